#include "user/cluster/job_ranks.h"

#include <algorithm>

#include "user/cluster/agent.h"
#include "user/proc/procfs.h"

namespace lt::cluster {

std::vector<pid_t> job_process_trees(const std::vector<std::pair<std::string, std::string>>& job_env, double wait_s,
                                     std::string* why) {
  const auto roots = wait_for_job_processes(job_env, wait_s, why);
  std::vector<pid_t> pids = roots;
  for (pid_t r : roots)
    for (pid_t c : proc::descendants(r)) pids.push_back(c);
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  return pids;
}

std::map<pid_t, proc::RankEnv> ranks_of(const std::vector<pid_t>& pids) {
  std::map<pid_t, std::map<std::string, std::string>> environ;
  for (pid_t pid : pids) environ[pid] = proc::read_environ(pid);
  auto explicit_rank = [&](pid_t pid) {
    const auto& e = environ[pid];
    for (const char* k : {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"})
      if (auto it = e.find(k); it != e.end() && proc::parse_env_number(it->second) >= 0) return true;
    return false;
  };
  auto launcher = [&](pid_t pid) {
    if (explicit_rank(pid)) return false;
    for (pid_t c : proc::descendants(pid))
      if (environ.count(c) && explicit_rank(c)) return true;
    return false;
  };
  std::map<pid_t, proc::RankEnv> out;
  for (pid_t pid : pids) {
    auto env = proc::parse_rank_env(environ[pid]);
    if (launcher(pid)) env.rank = -1;
    out[pid] = env;
  }
  return out;
}

}  // namespace lt::cluster
