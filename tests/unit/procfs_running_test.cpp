// proc::running(): what a writer of BPF entries checks after its write (BPF
// removes them at the exit tracepoint; PF_EXITING is set before it, while
// /proc still says R): a process that began to exit, a zombie and a reaped
// one are not running (CI 112: an entry written in that window outlived
// its process).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

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

namespace lt::proc {
namespace {

std::vector<pid_t> children_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  std::vector<pid_t> out;
  for (pid_t c; f >> c;) out.push_back(c);
  return out;
}

// A DataLoader worker found already running is a fork of its trainer with
// no exec since; a torchrun rank (an exec) is not, even with the same
// command line: each exec places the vDSO anew.
TEST(ProcSameImage, AForkWithoutExecIsItsParentsImageAnExecIsNot) {
  const pid_t forked = fork();
  ASSERT_GE(forked, 0);
  if (forked == 0) {
    pause();
    _exit(0);
  }
  EXPECT_TRUE(same_image(forked, getpid()));
  // sh forks a child that execs `sleep 30`, then execs `sleep 30` itself:
  // parent and child, one command line, two execs.
  const pid_t sh = fork();
  ASSERT_GE(sh, 0);
  if (sh == 0) {
    execl("/bin/sh", "sh", "-c", "sleep 30 & exec sleep 30", static_cast<char*>(nullptr));
    _exit(127);
  }
  pid_t child = 0;
  const std::vector<std::string> sleep_30 = {"sleep", "30"};
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       !child && std::chrono::steady_clock::now() < until;) {  // a bound for a wedged test, not a timing
    if (read_cmdline(sh) == sleep_30)
      for (pid_t c : children_of(sh))
        if (read_cmdline(c) == sleep_30) child = c;
    if (!child) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_NE(child, 0);
  std::ifstream aslr("/proc/sys/kernel/randomize_va_space");
  int randomized = 0;
  aslr >> randomized;
  if (randomized) EXPECT_FALSE(same_image(child, sh));
  EXPECT_FALSE(same_image(forked, sh));  // another command line
  EXPECT_FALSE(same_image(999999999, getpid()));
  for (pid_t p : {forked, child, sh}) kill(p, SIGKILL);
  for (pid_t p : {forked, sh}) waitpid(p, nullptr, 0);
}

}  // namespace
}  // namespace lt::proc
