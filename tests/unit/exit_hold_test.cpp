// ExitHolds on real child processes: a held child's exit waits for
// release(), signals reach it while held, its exit status (or the signal
// that killed it) is its own.
#include "user/proc/exit_hold.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "tests/unit/child_process.h"

using namespace lt::proc;
using namespace lt::testing;
using namespace std::chrono_literals;

namespace {

// Polls until `pid` waits at its exit stop (bounded: fails after 30 s).
bool poll_until_at_exit(ExitHolds& holds, pid_t pid) {
  return poll_until_reported(holds, pid, 1ms);
}

volatile sig_atomic_t got_usr1 = 0;

// A child that exits with 3 after a pipe byte, or 4 if it saw SIGUSR1
// first. Returns once its SIGUSR1 handler is in place.
pid_t child_waiting_on(int fd) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGUSR1, [](int) { got_usr1 = 1; });
    if (write(ready[1], "r", 1) != 1) _exit(1);
    char c;
    while (read(fd, &c, 1) < 0) {
    }
    _exit(got_usr1 ? 4 : 3);
  }
  char c;
  close(ready[1]);
  if (pid > 0 && read(ready[0], &c, 1) != 1) pid = -1;
  close(ready[0]);
  return pid;
}

}  // namespace

TEST(ExitHolds, ExitWaitsForReleaseAndKeepsItsStatus) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  const pid_t child = child_waiting_on(p[0]);
  ASSERT_GT(child, 0);
  ExitHolds holds;
  ASSERT_TRUE(holds.hold(child, child));
  EXPECT_FALSE(holds.hold(child, child));  // once
  ASSERT_EQ(write(p[1], "x", 1), 1);
  ASSERT_TRUE(poll_until_at_exit(holds, child));
  // Stopped at its exit, not gone: its memory is still there to read.
  EXPECT_EQ(process_state(child), 't');
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(process_state(child), 't');
  holds.release(child);
  EXPECT_FALSE(holds.any());
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 3);
  close(p[0]);
  close(p[1]);
}

TEST(ExitHolds, SignalsReachAHeldThread) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  const pid_t child = child_waiting_on(p[0]);
  ASSERT_GT(child, 0);
  ExitHolds holds;
  ASSERT_TRUE(holds.hold(child, child));
  ASSERT_EQ(kill(child, SIGUSR1), 0);
  // The signal stops it on its way in until poll() passes it on.
  for (auto until = std::chrono::steady_clock::now() + 30s;
       process_state(child) != 't' && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(holds.poll().empty());
  ASSERT_EQ(write(p[1], "x", 1), 1);
  ASSERT_TRUE(poll_until_at_exit(holds, child));
  holds.release(child);
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 4);
  close(p[0]);
  close(p[1]);
}

TEST(ExitHolds, ReleaseOfARunningThreadLetsItGoOn) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  const pid_t child = child_waiting_on(p[0]);
  ASSERT_GT(child, 0);
  {
    ExitHolds holds;
    ASSERT_TRUE(holds.hold(child, child));
  }  // released, still blocked in read
  ASSERT_EQ(write(p[1], "x", 1), 1);
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 3);
  close(p[0]);
  close(p[1]);
}

TEST(ExitHolds, AThreadKilledWhileHeldStopsAtItsExitToo) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  const pid_t child = child_waiting_on(p[0]);
  ASSERT_GT(child, 0);
  ExitHolds holds;
  ASSERT_TRUE(holds.hold(child, child));
  ASSERT_EQ(kill(child, SIGKILL), 0);
  // Linux stops a SIGKILLed tracee at PTRACE_EVENT_EXIT as well: its last
  // samples are read like any other's; its status stays its parent's.
  ASSERT_TRUE(poll_until_at_exit(holds, child));
  holds.release(child);
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFSIGNALED(st));
  EXPECT_EQ(WTERMSIG(st), SIGKILL);
  close(p[0]);
  close(p[1]);
}

TEST(ExitHolds, AGoneThreadCannotBeHeld) {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  ExitHolds holds;
  EXPECT_FALSE(holds.hold(child, child));
  EXPECT_FALSE(holds.any());
}

// Paused where it is (the Py_FinalizeEx probe's moment), then at its exit:
// each stop waits for go_on(), and the exit status is still its own.
TEST(ExitHolds, PauseThenExitEachWaitForGoOn) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  const pid_t child = child_waiting_on(p[0]);
  ASSERT_GT(child, 0);
  ExitHolds holds;
  ASSERT_TRUE(holds.hold(child, child, /*pause=*/true));
  ASSERT_TRUE(poll_until_at_exit(holds, child));  // paused: it waits for us
  EXPECT_EQ(process_state(child), 't');
  ASSERT_EQ(write(p[1], "x", 1), 1);  // it would exit now, but is paused
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(process_state(child), 't');
  holds.go_on(child);
  EXPECT_TRUE(holds.held(child));
  ASSERT_TRUE(poll_until_at_exit(holds, child));  // now at its exit
  EXPECT_EQ(process_state(child), 't');
  holds.go_on(child);
  EXPECT_FALSE(holds.held(child));
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  EXPECT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 3);
  close(p[0]);
  close(p[1]);
}
