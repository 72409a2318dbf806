// Starting the Slurm commands (scontrol, srun) that `cluster` runs.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace lt::cluster {

// Runs argv (PATH searched) with stdin from /dev/null and stdout/stderr on
// two pipes whose read ends come back in `out` / `err`.  The child gets its
// own process group (a Ctrl-C at the terminal reaches only us, and we stop
// it in order: srun takes a lone SIGINT as "status?") and no SLURM_* input
// variables but SLURM_CONF (an enclosing salloc's SLURM_NTASKS etc. would
// become srun's defaults).  A command that cannot be executed exits 127
// after saying why on its stderr.  Returns the pid, or -1 (errno set).
// `as`: the child becomes that user first (groups, gid, uid; cwd /), or
// exits 126 saying why.  `in`: stdin is a pipe instead, whose write end
// comes back there (close-on-exec).
struct RunAs {
  uid_t uid;
  gid_t gid;
  std::vector<gid_t> groups;
};
pid_t spawn_piped(const std::vector<std::string>& argv, int& out, int& err, const RunAs* as = nullptr,
                  int* in = nullptr);
// spawn_piped of an srun line, said first under -v ("ltrace-bpf: cluster: srun ...").
pid_t spawn_srun(const std::vector<std::string>& argv, bool verbose, int& out, int& err, const RunAs* as = nullptr,
                 int* in = nullptr);
// The ltrace-bpf the nodes run: --agent's PATH, else this very binary.
std::string node_binary(const std::string& agent_path);

}  // namespace lt::cluster
