#include "user/cluster/cluster_dump.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>

#include "user/cluster/agent_protocol.h"
#include "user/cluster/node_steps.h"
#include "user/cluster/slurm_job.h"
#include "user/cluster/subprocess.h"
#include "user/core/errors.h"
#include "user/text/numbers.h"

namespace lt::cluster {

namespace {

using Clock = std::chrono::steady_clock;

struct Agent {
  NodeDump result;
  std::string last_err;
  DumpLineReader reader;
};

void handle_line(Agent& a, const std::string& line, bool is_err) {
  if (is_err) {
    std::string l = line;
    if (l.rfind("ltrace-bpf: ", 0) == 0) l.erase(0, 12);
    if (l.empty()) return;
    std::cerr << "ltrace-bpf: " << a.result.node << ": " << l << "\n";
    if (l.find(": task ") == std::string::npos) a.last_err = l;  // not srun's "task 0: Exited ..."
    return;
  }
  auto m = parse_agent_line(line);
  if (!m) {
    if (!line.empty()) std::cerr << "ltrace-bpf: " << a.result.node << ": " << line << "\n";
    return;
  }
  if (m->kind == "hello") {
    a.result.host = m->field("host");
  } else if (m->kind == "done") {
    a.result.done = true;
  } else if (m->kind == "failed") {
    a.result.error = m->field("error");
  } else if (!a.reader.take(*m) && !a.reader.error().empty() && a.result.error.empty()) {
    a.result.error = "bad line from the agent: " + a.reader.error();
  }
}

}  // namespace

std::vector<RankProcess> ClusterDump::by_rank() const {
  std::vector<RankProcess> out;
  for (const auto& n : nodes) out.insert(out.end(), n.processes.begin(), n.processes.end());
  std::stable_sort(out.begin(), out.end(), [](const RankProcess& a, const RankProcess& b) {
    if ((a.rank < 0) != (b.rank < 0)) return a.rank >= 0;
    return a.rank < b.rank;
  });
  return out;
}

ClusterDump gather_cluster_dump(const ClusterDumpOptions& opt, const std::atomic<bool>& stop) {
  const auto t0 = Clock::now();
  SlurmJob job = query_slurm_job(opt.job_id, opt.scontrol);
  const std::vector<std::string> nodes = chosen_nodes(job, opt.nodes);
  const std::string agent = node_binary(opt.agent_path);
  std::vector<Agent> as(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) as[i].result.node = nodes[i];
  auto argv_of = [&](const std::string& node) {
    return std::vector<std::string>{agent,
                                    "agent",
                                    "--dump-threads",
                                    "--job-env",
                                    "SLURM_JOB_ID=" + job.id.substr(0, job.id.find('_')),
                                    "--job-env",
                                    "SLURMD_NODENAME=" + node,
                                    "--wait",
                                    fixed(opt.wait_s, 3),
                                    "--duration",
                                    fixed(opt.interval_s, 3)};
  };
  // An agent reads twice and exits: one still running long after its wait
  // and interval (a step that never started, a node that hangs) is ended.
  const auto limit = std::chrono::duration<double>(30 + opt.wait_s + opt.interval_s);
  const auto steps = run_node_steps(
      opt, job, nodes, argv_of,
      [&](std::size_t i, const std::string& line, bool is_err) { handle_line(as[i], line, is_err); }, limit, stop,
      step_user_for(job));  // a user's job: its owner reads their own processes
  ClusterDump cd;
  cd.job_id = job.id;
  cd.nodelist = job.nodelist;
  for (std::size_t i = 0; i < as.size(); ++i) {
    auto& a = as[i];
    const auto& s = steps[i];
    if (a.result.error.empty() && !s.start_error.empty()) a.result.error = s.start_error;
    if (a.result.error.empty() && s.killed)
      a.result.error = stop.load() ? "stopped" : "no answer within " + fixed(limit.count(), 0) + " s";
    if (a.result.error.empty() && (!s.exited_ok() || !a.result.done))
      a.result.error =
          "its agent ended without a dump (" + s.ended() + (a.last_err.empty() ? "" : ": " + a.last_err) + ")";
    a.result.processes = std::move(a.reader.processes());
    for (auto& p : a.result.processes) p.node = a.result.node;
    cd.nodes.push_back(std::move(a.result));
  }
  cd.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return cd;
}

}  // namespace lt::cluster
