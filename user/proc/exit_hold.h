// Holding a finalizing target at its exit until the drain has read it.
//
// A stack sample names each Python frame by its code object's address; what
// that address means (function, file, line table) is read from the live
// process by the drain. Samples of a job's last milliseconds were read after
// the process was gone and their new frames left <unknown> (a CI failure:
// the drain is woken when the interpreter starts to finalize, but on a busy
// machine the few milliseconds of a small script's finalization can pass
// before the drain runs).
//
// So when the Py_FinalizeEx probe wakes the drain, the finalizing thread is
// seized (PTRACE_SEIZE with PTRACE_O_TRACEEXIT) and paused at once
// (PTRACE_INTERRUPT): finalization frees modules, functions and their code
// objects, so its samples are read first (measured: 10 frames <unknown> in
// 1 of 3 runs of tests/workloads/exit_burst.py when the only read came at
// its exit). go_on() lets it finalize; its exit then stops it in do_exit
// *before* its memory is released (the PTRACE_EVENT_EXIT stop comes before
// exit_mm), the drain reads what came since, and go_on() again detaches it
// to exit as it would have.
//
// Why ptrace and not SIGSTOP: a ptrace stop is invisible to the target's
// parent (a shell seeing a SIGSTOP would report "Stopped" and take the
// terminal back), and if ltrace-bpf dies the kernel detaches the thread and
// it runs on (exit_ptrace), so nothing is ever left stopped. Never
// PTRACE_O_EXITKILL. A signal the thread gets while seized stops it on its
// way in (signal-delivery-stop); poll() passes it on, so it arrives at most
// one poll later. A target traced by someone else (a debugger) is not held.
//
// ptrace ties a tracee to the tracing thread: one thread uses an ExitHolds.
#pragma once
#include <sys/types.h>

#include <vector>

namespace lt::proc {

class ExitHolds {
 public:
  ExitHolds() = default;
  ExitHolds(const ExitHolds&) = delete;
  ExitHolds& operator=(const ExitHolds&) = delete;
  ~ExitHolds();  // release_all()

  // Seizes thread `tid` of process `pid`, and pauses it where it is when
  // `pause`. False when it cannot be held (gone, traced by someone else,
  // not permitted) or is held already.
  bool hold(pid_t pid, pid_t tid, bool pause = false);
  // Passes on the signals held threads stopped for, forgets threads that
  // ended, and returns the processes whose thread waits for us, paused or
  // at its exit stop: read them, then go_on() each.
  std::vector<pid_t> poll();
  // A paused thread runs on (still held); one at its exit is released.
  void go_on(pid_t pid);
  // Detaches the held thread of `pid`; the process goes on (or exits) as if
  // never held.
  void release(pid_t pid);
  void release_all();
  bool any() const { return !held_.empty(); }
  std::size_t count() const { return held_.size(); }
  bool held(pid_t pid) const;

 private:
  struct Held {
    pid_t pid = 0;
    pid_t tid = 0;
    bool at_exit = false;
    bool pausing = false;  // interrupted: its stop is still to come
    bool paused = false;
  };
  // Takes the stops of `h` reported so far (waiting for one when `block`);
  // false once the thread has ended.
  bool take_stops(Held& h, bool block);
  void detach(const Held& h, int sig);

  std::vector<Held> held_;
};

}  // namespace lt::proc
