// One ltrace-bpf step on each node of a running Slurm job (srun --overlap,
// each in its own process group), their stdout and stderr read line by
// line as they come, and their ends: what `cluster ... dump` and `cluster
// ... capture` share. A step still running past `limit` or after `stop` is
// killed with its srun.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "user/cluster/slurm_job.h"

namespace lt::cluster {

struct NodeStep {
  std::string node;
  pid_t srun = -1;  // -1: it could not be started (start_error says why)
  std::string start_error;
  bool killed = false;  // ended by us: past the limit, or stopped
  int status = -1;      // srun's wait status (-1: never started)
  // "exit status N" / "signal N" / "not started"
  std::string ended() const;
  bool exited_ok() const;
};

// argv_of(node): the ltrace-bpf command line for that node (agent_srun_argv
// wraps it; `as`: the user srun runs as, step_user_for). on_line(i, line, is_err): a line of step i,
// as it comes.
std::vector<NodeStep> run_node_steps(const JobNodes& j, const SlurmJob& job, const std::vector<std::string>& nodes,
                                     const std::function<std::vector<std::string>(const std::string&)>& argv_of,
                                     const std::function<void(std::size_t, const std::string&, bool)>& on_line,
                                     std::chrono::duration<double> limit, const std::atomic<bool>& stop,
                                     const std::optional<RunAs>& as = std::nullopt);

}  // namespace lt::cluster
