// proc::running(): what a writer of BPF entries checks after its write (BPF
// removes them at the exit tracepoint; PF_EXITING is set before it, while
// /proc still says R): a process that began to exit, a zombie and a reaped
// one are not running (CI 112: an entry written in that window outlived
// its process).
#include <gtest/gtest.h>
#include <sys/personality.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/unit/child_process.h"
#include "user/proc/fork_finder.h"
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

// sh, forked from here (with ASLR off if asked: personality()), forks a
// child that execs `sleep 30`, then execs `sleep 30` itself: parent and
// child, one command line, two execs. Returns {sh, its child}.
std::pair<pid_t, pid_t> two_execs_of_one_command(bool aslr_off) {
  const pid_t sh = fork();
  if (sh < 0) return {0, 0};
  if (sh == 0) {
    if (aslr_off) personality(ADDR_NO_RANDOMIZE);
    execl("/bin/sh", "sh", "-c", "sleep 30 & exec sleep 30", static_cast<char*>(nullptr));
    _exit(127);
  }
  pid_t child = 0;
  const std::vector<std::string> sleep_30 = {"sleep", "30"};
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       !child && std::chrono::steady_clock::now() < until;) {  // a bound for a wedged test, not a timing
    if (read_cmdline(sh) == sleep_30)
      for (pid_t c : descendants(sh))
        if (read_cmdline(c) == sleep_30) child = c;
    if (!child) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return {sh, child};
}

// A DataLoader worker found already running is a fork of its trainer with
// no exec since; a torchrun rank (an exec) is not, even with the same
// command line: each exec gets new random bytes (AT_RANDOM), and, with
// ASLR on, a new vDSO address.
TEST(ProcSameImage, AForkWithoutExecIsItsParentsImageAnExecIsNot) {
  const lt::testing::PausedFork fork_of_us;
  const pid_t forked = fork_of_us.pid();
  ASSERT_GE(forked, 0);
  EXPECT_TRUE(same_image(forked, getpid()));
  for (bool aslr_off : {false, true}) {
    const auto [sh, child] = two_execs_of_one_command(aslr_off);
    ASSERT_GT(sh, 0);
    EXPECT_NE(child, 0) << "aslr_off=" << aslr_off;
    // With ASLR off both have their vDSO at one address: only the exec's
    // random bytes tell them apart (a review's case: Lightning's
    // subprocess launcher under `setarch -R`).
    if (child) {
      EXPECT_FALSE(same_image(child, sh)) << "aslr_off=" << aslr_off;
    }
    EXPECT_FALSE(same_image(forked, sh));  // another command line
    for (pid_t p : {child, sh})
      if (p > 0) kill(p, SIGKILL);
    waitpid(sh, nullptr, 0);
  }
  EXPECT_FALSE(same_image(999999999, getpid()));
}

// Without --children the verdict still finds the trainer's workers: its
// forks, not its exec'd children, nor the targets themselves.
TEST(ForkFinder, TheTargetsForksNotItsExecdChildren) {
  lt::testing::PausedFork fork_of_us;
  const pid_t forked = fork_of_us.pid();
  ASSERT_GE(forked, 0);
  const auto [sh, child] = two_execs_of_one_command(false);
  ASSERT_GT(sh, 0);
  ForkFinder finder;
  const auto forks = finder.scan({getpid()});
  EXPECT_TRUE(finder.ok());
  std::vector<pid_t> found;
  for (const auto& f : forks) {
    EXPECT_EQ(f.target, getpid());
    EXPECT_FALSE(f.via_forkserver);
    found.push_back(f.pid);
  }
  EXPECT_NE(std::find(found.begin(), found.end(), forked), found.end());
  EXPECT_EQ(std::find(found.begin(), found.end(), sh), found.end());  // exec'd
  // A fork that is a target itself is not a worker of the other.
  auto has_forked = [&] {
    return std::any_of(finder.forks().begin(), finder.forks().end(),
                       [&](const ForkFinder::Fork& f) { return f.pid == forked; });
  };
  finder.scan({getpid(), forked});
  EXPECT_FALSE(has_forked());
  // Judged again when asked again (cached by pid and start time).
  EXPECT_EQ(finder.scan({getpid()}).size(), forks.size());
  for (pid_t p : {child, sh})
    if (p > 0) kill(p, SIGKILL);
  waitpid(sh, nullptr, 0);
  fork_of_us.end();
  finder.scan({getpid()});
  EXPECT_FALSE(has_forked());  // gone
  // A process list it cannot read: no fork, and not ok (the verdict then
  // does not say num_workers=0).
  ForkFinder nowhere("/nonexistent/proc");
  EXPECT_TRUE(nowhere.scan({getpid()}).empty());
  EXPECT_FALSE(nowhere.ok());
}

}  // namespace
}  // namespace lt::proc
