// Finding the processes of a distributed job on this machine by their
// environment (e.g. SLURM_JOB_ID=4242), without being told pids.
#pragma once
#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace lt::proc {

// The roots of the job's Python process trees on this machine:
//
//   candidates = live processes (zombies, kernel threads, this process and
//                its ancestors left out) whose /proc/PID/environ has every
//                KEY=VALUE of `match` (the first KEY= entry counts, as for
//                getenv), and whose executable is CPython (/proc/PID/exe
//                named python*, or libpython3 mapped);
//   result     = the candidates none of whose ancestors is a candidate,
//                in ascending pid order.
//
// So a launcher written in Python (torchrun, launcher.py) is returned and its
// ranks are not (trace the result with --children to cover them); a shell or
// srun in between is skipped over, and the first Python process below it is
// returned.  Environments we cannot read (no permission, the process exited
// meanwhile) are skipped silently.  /proc/PID/environ is the environment the
// process was started with: variables a program sets in itself later
// (os.environ[...] = ...) are not seen.
//
// An empty result sets *why (if given) to one line saying why (nothing
// matched; matches that are not Python; unreadable environments); a
// non-empty one clears it.  An empty `match` matches nothing.  Never throws.
// Whether process `pid`'s environment has every KEY=VALUE of `match` (the
// first KEY= entry counts); false when it cannot be read or `match` is
// empty.
bool environ_has(pid_t pid, const std::vector<std::pair<std::string, std::string>>& match);

std::vector<pid_t> find_job_processes(const std::vector<std::pair<std::string, std::string>>& match,
                                      std::string* why = nullptr);

}  // namespace lt::proc
