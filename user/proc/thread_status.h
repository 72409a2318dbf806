// What one thread of a process is doing now, from /proc alone (no ptrace
// stop): its name, scheduler state, and, when it is blocked, the system
// call it is blocked in with the user stack and instruction pointers at
// the call (/proc/PID/task/TID/syscall: the kernel reads them from the
// blocked task's saved registers; a running thread has none).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lt::proc {

struct ThreadStatus {
  pid_t tid = 0;                 // as we see it (host pid namespace)
  std::string name;              // comm: raw bytes, up to 15
  char state = '?';              // stat field 3: R running, S sleeping, D disk sleep, T/t stopped, Z, X, I
  long syscall = -1;             // the call it is blocked in; -1: none (running, or blocked outside one)
  std::uint64_t sp = 0, pc = 0;  // user registers while blocked (0: running or unknown)
  // How many times the scheduler has put it on a CPU (schedstat's third
  // field): unchanged between two reads, the thread did not run at all in
  // between, so it was blocked the whole time.  -1: not known (no schedstat).
  long long runs = -1;
  std::string state_words() const;  // "running", "sleeping", "disk sleep", ...
};

// Thread ids of `pid` as we see them, ascending; empty if it is gone.
std::vector<pid_t> task_ids(pid_t pid);
// nullopt: the thread is gone (it exited while we looked).
std::optional<ThreadStatus> thread_status(pid_t pid, pid_t tid);
// stat field 22, the start time in clock ticks since boot: with the pid it
// names one process, so a pid reused while we read is noticed.  nullopt
// when the process is gone or a zombie (exited, not yet reaped).
std::optional<std::uint64_t> start_time(pid_t pid);

}  // namespace lt::proc
