// Ctrl-Z stops the tracer only after it has let go of what it holds under
// ptrace.  A tracee in a ptrace stop runs again only when its tracer says
// so: a tracer stopped by job control would keep a finalizing job at its
// exit, or a new CPython at its exec, for as long as the user leaves it
// stopped.  So SIGTSTP, SIGTTIN and SIGTTOU (the stops a terminal sends;
// SIGSTOP cannot be caught, and a tracer starved of CPU is held for) go to
// the thread that holds tracees (TargetHolder): it releases them and then
// stops the process with SIGSTOP.  With no holder registered the process
// stops at once, as it would by default.
#pragma once

namespace lt::proc {

// Installs the handler (idempotent).  Async-signal-safe inside.
void install_job_stop_handler();

// The holder's registration: an eventfd (non-blocking) that a job-control
// stop makes readable, or -1 when a holder is registered already or no fd
// could be made.  After unregister_job_stop() a stop stops the process
// itself again (and one asked just before is done then).
int register_job_stop();
void unregister_job_stop(int fd);

// Reads the fd empty; true when a stop was asked for since the last read.
bool job_stop_asked(int fd);

// Stops this process (SIGSTOP) once its holds are let go; returns when it
// is continued (SIGCONT).
void job_stop_now();

}  // namespace lt::proc
