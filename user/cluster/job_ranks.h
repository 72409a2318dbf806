// A node's processes of a job, found by their environment (--job-env), and
// which of them are ranks: what `agent --dump-threads` and `agent
// --capture-via` both need.
#pragma once
#include <sys/types.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "user/proc/rank_env.h"

namespace lt::cluster {

// The job's process trees on this node (roots found by `job_env` within
// `wait_s`, and their descendants), sorted. Empty, with *why, when none.
std::vector<pid_t> job_process_trees(const std::vector<std::pair<std::string, std::string>>& job_env, double wait_s,
                                     std::string* why);

// Each of `pids`' rank environment; a launcher (torchrun under srun: only
// SLURM_PROCID, its node's index, while its children have RANK) gets rank
// -1: taking it for a rank would hide the real one.
std::map<pid_t, proc::RankEnv> ranks_of(const std::vector<pid_t>& pids);

}  // namespace lt::cluster
