// The next report of a thread we ptrace, for the holders (exit_hold.h,
// exec_hold.h): one waitid/waitpid dance that never takes a child's exit
// status from its parent.  A tracee that is also our own child (`run`'s
// command) is left for its launcher to reap: it wants the status.
#pragma once
#include <sys/types.h>

#include <csignal>
#include <functional>

namespace lt::proc {

struct PtraceStop {
  enum Kind {
    none,     // nothing yet (not blocking)
    ended,    // exited or killed, or not ours to wait for any more
    stopped,  // in a ptrace stop: see sig and event
  } kind = none;
  int sig = 0;    // WSTOPSIG: SIGTRAP | 0x80 for a system-call stop (PTRACE_O_TRACESYSGOOD)
  int event = 0;  // PTRACE_EVENT_* (status >> 16), 0 for a signal or system-call stop

  bool syscall_stop() const { return kind == stopped && event == 0 && sig == (0x80 | SIGTRAP); }
  bool signal_stop() const { return kind == stopped && event == 0 && !syscall_stop(); }
  // PTRACE_EVENT_STOP: SIGTRAP for our PTRACE_INTERRUPT, else a group stop (job control).
  bool interrupt_stop() const;
  bool group_stop() const;
};

// Takes one report of thread `tid` (waiting for it when `block`).
PtraceStop next_ptrace_stop(pid_t tid, bool block);

// Lets go of a tracee that is running (a running tracee cannot be
// detached): interrupts it, takes its next stop and detaches, handing over
// the signal that stopped it on its way in if that was the stop.  Nothing
// to do when it is gone.  `step` runs before and after the detach (the
// tests kill the tracer there).
void detach_running(pid_t tid, const std::function<void()>& step = {});

}  // namespace lt::proc
