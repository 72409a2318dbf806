#include "user/cluster/agent_capture.h"

#include <sys/stat.h>
#include <unistd.h>

#include <iostream>

#include "user/cluster/agent.h"
#include "user/cluster/job_ranks.h"
#include "user/core/errors.h"
#include "user/proc/census.h"
#include "user/watch/request_server.h"

namespace lt::cluster {

std::string node_watcher_socket(const std::string& dir, const std::string& node) {
  for (const std::string& at : {node.empty() ? std::string() : dir + "/" + node + "/watch.sock", dir + "/watch.sock"}) {
    struct stat st {};
    if (!at.empty() && lstat(at.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) return at;
  }
  return "";
}

int run_agent_capture(const std::vector<std::pair<std::string, std::string>>& job_env, double wait_s,
                      const std::string& watcher_dir, bool verbose) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  agent_say("hello", {{"host", host}, {"pid", std::to_string(getpid())}});
  auto fail = [](ExitCode code, const std::string& why) {
    agent_say("failed", {{"error", why}});
    throw Error(code, why);
  };
  std::string why;
  const std::vector<pid_t> pids = job_process_trees(job_env, wait_s, &why);
  if (pids.empty()) fail(ExitCode::no_such_process, "--job-env: " + why);
  std::string node;
  for (const auto& [k, v] : job_env)
    if (k == "SLURMD_NODENAME") node = v;
  const std::string sock = node_watcher_socket(watcher_dir, node);
  if (sock.empty())
    fail(ExitCode::io, "no watcher here: no socket at " +
                           (node.empty() ? "" : watcher_dir + "/" + node + "/watch.sock or ") + watcher_dir +
                           "/watch.sock (cluster ... watch --dir DIR, or the ltrace-bpf-watch service)");
  // The ranks: Python processes that are not launchers; a job with no rank
  // variables at all has its Python processes asked for.
  const auto envs = ranks_of(pids);
  std::vector<std::pair<pid_t, int>> asked;
  for (bool any_rank : {true, false}) {
    for (pid_t pid : pids)
      if (proc::probe_process(pid).python && (!any_rank || envs.at(pid).rank >= 0))
        asked.emplace_back(pid, envs.at(pid).rank);
    if (!asked.empty()) break;
  }
  if (asked.empty()) fail(ExitCode::no_such_process, "no Python process of the job here");
  std::size_t ok = 0, refused = 0;
  for (const auto& [pid, rank] : asked) {
    try {
      const auto a = ask_watcher(sock, "capture " + std::to_string(pid));
      agent_say("captured", {{"pid", std::to_string(pid)}, {"rank", std::to_string(rank)}, {"answer", a.line}});
      ++ok;
    } catch (const Error& e) {
      if (e.code() == ExitCode::refused) ++refused;
      if (verbose) std::cerr << "ltrace-bpf: agent: pid " << pid << ": " << e.what() << "\n";
      agent_say("capture-refused", {{"pid", std::to_string(pid)}, {"rank", std::to_string(rank)}, {"error", e.what()}});
    }
  }
  agent_say("done", {{"asked", std::to_string(ok)}, {"refused", std::to_string(asked.size() - ok)}});
  if (ok == asked.size()) return 0;
  return static_cast<int>(refused == asked.size() ? ExitCode::refused : ExitCode::partial);
}

}  // namespace lt::cluster
