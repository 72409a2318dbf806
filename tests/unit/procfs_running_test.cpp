// proc::running(): what a writer of BPF entries checks after its write (BPF
// removes them at the exit tracepoint; PF_EXITING is set before it, while
// /proc still says R): a process that began to exit, a zombie and a reaped
// one are not running (CI 112: an entry written in that window outlived
// its process).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "user/proc/procfs.h"

namespace lt::proc {
namespace {

TEST(ProcRunning, TheStatLineSaysExitingZombieOrRunning) {
  // flags (the 9th field) 0x400000 (PF_FORKNOEXEC): running
  EXPECT_TRUE(stat_says_running("123 (python3) R 1 123 123 0 -1 4194304 100 0 0 0 5 1 0 0 20 0 1 0 42"));
  // ...with PF_EXITING (0x4): begun to exit
  EXPECT_FALSE(stat_says_running("123 (python3) R 1 123 123 0 -1 4194308 100 0 0 0 5 1 0 0 20 0 1 0 42"));
  EXPECT_FALSE(stat_says_running("123 (python3) Z 1 123 123 0 -1 4194316 100 0 0 0 5 1 0 0 20 0 1 0 42"));
  EXPECT_FALSE(stat_says_running("123 (python3) X 1 123 123 0 -1 4194316 100 0 0 0 5 1 0 0 20 0 1 0 42"));
  // A comm with ") " in it: the fields are read after the last ')'.
  EXPECT_TRUE(stat_says_running("7 (a) R 1 2 3 4 5 6 x) S 1 7 7 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 9"));
  EXPECT_FALSE(stat_says_running("7 (a) S 1 2 3 4 5 4194560 x) R 1 7 7 0 -1 4 0 0 0 0 0 0 0 0 20 0 1 0 9"));
  EXPECT_FALSE(stat_says_running(""));
}

TEST(ProcRunning, ThisProcessRunsItsZombieChildDoesNot) {
  EXPECT_TRUE(running(getpid()));
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);  // a zombie, not reaped
  EXPECT_FALSE(running(child));
  EXPECT_FALSE(exists(child));
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  EXPECT_FALSE(running(child));
  EXPECT_FALSE(running(0));
}

}  // namespace
}  // namespace lt::proc
