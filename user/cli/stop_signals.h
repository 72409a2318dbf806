// The stop request of a command that runs until told: SIGINT, SIGTERM,
// SIGHUP, SIGUSR1 and SIGUSR2 (srun forwards both as they are: the cluster
// coordinator stops its agents with SIGUSR1, its watchers, whose SIGUSR1 asks
// for a capture, with SIGUSR2; SIGTERM to srun cancels the step) set one
// flag the loops poll.  Ctrl-Z's stops go through user/proc/job_stop.h.
#pragma once
#include <atomic>

namespace lt {

std::atomic<bool>& stop_requested();
// An eventfd (non-blocking) that a stop signal, or wake_loop() from any
// thread or signal handler, makes readable: the session's drain loop sleeps
// on it with the ring, so a stop is seen at once whichever thread the
// signal went to.  -1 before install_stop_signals() or if none could be made.
int loop_wakeup_fd();
// Async-signal-safe: the loop runs now (a capture asked for, a stop).
void wake_loop();
// `restart`: SA_RESTART, so a signal does not fail a write in progress (the
// agent's stdout, the coordinator's stderr); the loops that wait still wake,
// as poll() and nanosleep() are never restarted.  Without it a blocking
// read returns too.  SIGPIPE is ignored either way.
void install_stop_signals(bool restart);

}  // namespace lt
