// A failed read of a target's memory says why: gone, refused, or not
// mapped (the message used to blame a missing capability every time).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "user/proc/procfs.h"

using lt::ExitCode;

TEST(UnreadableMemory, AnAddressNotMappedIsNotAPermissionProblem) {
  const lt::Error e = lt::proc::unreadable_memory(getpid(), 0x10, 8);
  EXPECT_EQ(e.code(), ExitCode::io);
  EXPECT_NE(std::string(e.what()).find("at 0x10: Bad address"), std::string::npos) << e.what();
  EXPECT_EQ(std::string(e.what()).find("CAP_SYS_PTRACE"), std::string::npos) << e.what();
}

TEST(UnreadableMemory, ARangeWhoseEndIsNotMapped) {
  // The last byte of a mapped page, and the unmapped page after it.
  const long page = sysconf(_SC_PAGESIZE);
  char* p = static_cast<char*>(mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(p, MAP_FAILED);
  ASSERT_EQ(munmap(p + page, page), 0);
  const lt::Error e = lt::proc::unreadable_memory(getpid(), reinterpret_cast<std::uint64_t>(p + page - 1), 16);
  EXPECT_EQ(e.code(), ExitCode::io);
  EXPECT_NE(std::string(e.what()).find("Bad address"), std::string::npos) << e.what();
  munmap(p, page);
}

TEST(UnreadableMemory, AProcessThatExitedIsGone) {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  ASSERT_GT(pid, 0);
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  const lt::Error e = lt::proc::unreadable_memory(pid, 0x1000, 8);
  EXPECT_EQ(e.code(), ExitCode::no_such_process) << e.what();
}
