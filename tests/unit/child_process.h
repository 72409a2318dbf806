// What the tests of ptrace holds (exec_hold_test, exit_hold_test) ask of
// the child processes they start: the state /proc shows, whether a library
// is mapped, a bounded wait for a holder to report a pid, and the exit
// status as a shell would print it.
#pragma once
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

namespace lt::testing {

// The one-letter state of /proc/PID/stat ('t': a ptrace stop), '?' if gone.
inline char process_state(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), {});
  auto rp = s.rfind(')');
  return rp == std::string::npos || rp + 2 >= s.size() ? '?' : s[rp + 2];
}

// Whether a mapping of `pid` has `part` in its path.
inline bool maps_name(pid_t pid, const std::string& part) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(f, line))
    if (line.find(part) != std::string::npos) return true;
  return false;
}

// Calls holds.poll() every `nap` until it reports `pid`; false after 30 s
// (a bound for a wedged test, never a timing the test depends on).
template <class Holds>
bool poll_until_reported(Holds& holds, pid_t pid, std::chrono::microseconds nap) {
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       std::chrono::steady_clock::now() < until;) {
    for (pid_t p : holds.poll())
      if (p == pid) return true;
    std::this_thread::sleep_for(nap);
  }
  return false;
}

// Reaps `pid`: its exit code, or 128 + the signal that killed it; -1 if it
// is not our child.
inline int wait_status(pid_t pid) {
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// A fork of this process with no exec, waiting until killed (as a
// DataLoader worker is a fork of its trainer): killed and reaped at scope
// end, also when an ASSERT returns early (it would wait forever).
class PausedFork {
 public:
  PausedFork() : pid_(fork()) {
    if (pid_ == 0) {
      pause();
      _exit(0);
    }
  }
  ~PausedFork() { end(); }
  // Kills and reaps it now (its pid may be reused after).
  void end() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  PausedFork(const PausedFork&) = delete;
  PausedFork& operator=(const PausedFork&) = delete;
  pid_t pid() const { return pid_; }  // < 0: fork failed

 private:
  pid_t pid_;
};

}  // namespace lt::testing
