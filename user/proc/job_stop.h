// Ctrl-Z stops the tracer only after it has let go of what it holds under
// ptrace.  A tracee in a ptrace stop runs again only when its tracer says
// so: a tracer stopped by job control would keep a finalizing job at its
// exit, a new CPython at its exec, or a thread it is calling into, for as
// long as the user leaves it stopped.  So SIGTSTP (Ctrl-Z; SIGSTOP cannot
// be caught, and a tracer starved of CPU is held for) goes to the thread
// that holds tracees (TargetHolder): it releases them and then asks for the
// stop.  The stop (SIGSTOP to this process) waits while a call into a
// target is in flight (a JobStopDeferral lives: an injection, bounded by
// its timeout) and is then asked of the holder again, which lets go of
// what it took meanwhile.  With no holder registered the stop is done at
// once.  As the kernel does for a terminal stop, none is done when our
// process group looks orphaned (our parent gone or in another session).
#pragma once

namespace lt::proc {

// Installs the handler (idempotent).  Async-signal-safe inside.
void install_job_stop_handler();

// The holder's registration: an eventfd (non-blocking) that a job-control
// stop makes readable, or -1 when a holder is registered already or no fd
// could be made.  After unregister_job_stop() a stop is asked for at once
// again (and one asked just before is asked for then).
int register_job_stop();
void unregister_job_stop(int fd);

// Reads the fd empty; true when a stop was asked for since the last read.
bool job_stop_asked(int fd);

// Stops this process (SIGSTOP) now, or asks again as the last
// JobStopDeferral ends.  Async-signal-safe.
void job_stop_now();

// While one lives a job-control stop waits: a thread of a target is
// stopped under ptrace mid-call (user/inject/remote_call.cpp).
class JobStopDeferral {
 public:
  JobStopDeferral();
  ~JobStopDeferral();
  JobStopDeferral(const JobStopDeferral&) = delete;
  JobStopDeferral& operator=(const JobStopDeferral&) = delete;
};

// For the unit tests: what stopping does (SIGSTOP to this process when
// null).  Returns the previous one.
using JobStopAction = void (*)();
JobStopAction set_job_stop_action_for_tests(JobStopAction a);

}  // namespace lt::proc
