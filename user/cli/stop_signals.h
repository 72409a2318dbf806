// The stop request of a command that runs until told: SIGINT, SIGTERM,
// SIGHUP and SIGUSR1 (srun forwards SIGUSR1 as it is; the cluster
// coordinator stops its agents with it) set one flag the loops poll.
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
