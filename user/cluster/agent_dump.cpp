#include "user/cluster/agent_dump.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <thread>

#include "user/cluster/agent.h"
#include "user/cluster/dump_lines.h"
#include "user/cluster/job_ranks.h"
#include "user/core/errors.h"
#include "user/proc/procfs.h"
#include "user/proc/rank_env.h"
#include "user/python/process_dump.h"

namespace lt::cluster {

namespace {

using Clock = std::chrono::steady_clock;

struct Read {
  python::ProcessDump dump;
  Clock::time_point start, end;
};

// One pass over `pids`; those that cannot be dumped (not Python, exited)
// are left out, with a note on stderr under -v or when one exited.
std::map<pid_t, Read> read_all(const std::vector<pid_t>& pids, proc::NativeNamer& namer, bool verbose) {
  std::map<pid_t, Read> out;
  for (pid_t pid : pids) {
    Read r;
    r.start = Clock::now();
    try {
      r.dump = python::dump_process(pid, namer);
    } catch (const Error& e) {
      if (verbose || e.code() == ExitCode::no_such_process)
        std::cerr << "ltrace-bpf: agent: skipped " << pid << ": " << e.what() << "\n";
      continue;
    }
    r.end = Clock::now();
    out[pid] = std::move(r);
  }
  return out;
}

}  // namespace

int run_agent_dump(const std::vector<std::pair<std::string, std::string>>& job_env, double wait_s, double interval_s,
                   bool verbose) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  agent_say("hello", {{"host", host}, {"pid", std::to_string(getpid())}});
  std::string why;
  const std::vector<pid_t> pids = job_process_trees(job_env, wait_s, &why);
  if (pids.empty()) {
    agent_say("failed", {{"error", "--job-env: " + why}});
    throw Error(ExitCode::no_such_process, "--job-env: " + why);
  }

  proc::NativeNamer namer;
  auto first = read_all(pids, namer, verbose);
  std::map<pid_t, Read> second;
  if (interval_s > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(interval_s));
    std::vector<pid_t> again;
    for (const auto& [pid, r] : first) again.push_back(pid);
    second = read_all(again, namer, verbose);
  } else {
    second = std::move(first);
  }
  std::vector<pid_t> read;
  for (const auto& [pid, r] : second) read.push_back(pid);
  const auto rank_envs = ranks_of(read);
  std::string ranks;
  for (auto& [pid, r] : second) {
    RankProcess p;
    const auto& env = rank_envs.at(pid);
    p.rank = env.rank;
    p.world_size = env.world_size;
    p.dump = std::move(r.dump);
    if (auto it = first.find(pid); interval_s > 0 && it != first.end()) {
      // The least time between this process's two reads: from the end of
      // the first to the start of the second.
      p.interval_s = std::chrono::duration<double>(r.start - it->second.end).count();
      python::mark_still_blocked(it->second.dump, p.dump, p.interval_s);
    }
    if (p.rank >= 0) ranks += (ranks.empty() ? "" : ",") + std::to_string(p.rank);
    std::string block;  // one write per process
    for (const auto& line : dump_lines(p)) block += (block.empty() ? "" : "\n") + line;
    agent_say_line(block);
  }
  agent_say("done", {{"processes", std::to_string(second.size())}, {"ranks", ranks}});
  return second.empty() ? static_cast<int>(ExitCode::no_such_process) : 0;
}

}  // namespace lt::cluster
