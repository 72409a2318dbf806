#include "user/cluster/cluster_dump.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>

#include "user/cluster/agent_protocol.h"
#include "user/cluster/line_pipe.h"
#include "user/cluster/slurm_job.h"
#include "user/cluster/subprocess.h"
#include "user/core/errors.h"
#include "user/text/numbers.h"

namespace lt::cluster {

namespace {

using Clock = std::chrono::steady_clock;

struct Agent {
  NodeDump result;
  pid_t srun = -1;
  int out = -1, err = -1;
  std::string out_buf, err_buf, last_err;
  DumpLineReader reader;
  bool killed = false;
  int status = -1;
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

void drain(Agent& a, int& fd, std::string& buf, bool is_err) {
  drain_lines(fd, buf, [&](std::string line) { handle_line(a, line, is_err); });
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
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    Agent& a = as[i];
    a.result.node = nodes[i];
    const std::vector<std::string> argv = {agent,
                                           "agent",
                                           "--dump-threads",
                                           "--job-env",
                                           "SLURM_JOB_ID=" + job.id.substr(0, job.id.find('_')),
                                           "--job-env",
                                           "SLURMD_NODENAME=" + a.result.node,
                                           "--wait",
                                           fixed(opt.wait_s, 3),
                                           "--duration",
                                           fixed(opt.interval_s, 3)};
    const auto srun = agent_srun_argv(opt.srun, job.id, a.result.node, argv);
    a.srun = spawn_srun(srun, opt.verbose, a.out, a.err);
    if (a.srun < 0) a.result.error = "cannot run " + opt.srun + ": " + std::strerror(errno);
  }
  // An agent reads twice and exits: one still running long after its wait
  // and interval (a step that never started, a node that hangs) is ended.
  const auto limit = std::chrono::duration<double>(30 + opt.wait_s + opt.interval_s);
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<std::pair<std::size_t, bool>> who;
    for (std::size_t i = 0; i < as.size(); ++i) {
      if (as[i].out >= 0) fds.push_back({as[i].out, POLLIN, 0}), who.push_back({i, false});
      if (as[i].err >= 0) fds.push_back({as[i].err, POLLIN, 0}), who.push_back({i, true});
    }
    if (fds.empty()) break;
    const bool late = Clock::now() - t0 > limit;
    for (auto& a : as) {
      if (a.srun <= 0 || a.killed || (a.out < 0 && a.err < 0) || !(late || stop.load())) continue;
      if (a.result.error.empty())
        a.result.error = stop.load() ? "stopped" : "no answer within " + fixed(limit.count(), 0) + " s";
      kill(-a.srun, SIGKILL);  // its own process group (spawn_piped): srun and its step
      a.killed = true;
    }
    const int r = poll(fds.data(), fds.size(), 200);
    if (r < 0 && errno != EINTR) throw Error(ExitCode::io, std::string("poll: ") + std::strerror(errno));
    for (std::size_t k = 0; k < fds.size() && r > 0; ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Agent& a = as[who[k].first];
      if (who[k].second)
        drain(a, a.err, a.err_buf, true);
      else
        drain(a, a.out, a.out_buf, false);
    }
  }
  ClusterDump cd;
  cd.job_id = job.id;
  cd.nodelist = job.nodelist;
  for (auto& a : as) {
    if (a.srun > 0) {
      int st = 0;
      while (waitpid(a.srun, &st, 0) < 0 && errno == EINTR) {
      }
      a.status = st;
    }
    const bool exited_ok = a.status >= 0 && WIFEXITED(a.status) && WEXITSTATUS(a.status) == 0;
    if (a.result.error.empty() && (!exited_ok || !a.result.done))
      a.result.error = "its agent ended without a dump (" +
                       (WIFEXITED(a.status) ? "exit status " + std::to_string(WEXITSTATUS(a.status))
                                            : "signal " + std::to_string(WTERMSIG(a.status))) +
                       (a.last_err.empty() ? "" : ": " + a.last_err) + ")";
    a.result.processes = std::move(a.reader.processes());
    for (auto& p : a.result.processes) p.node = a.result.node;
    cd.nodes.push_back(std::move(a.result));
  }
  cd.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return cd;
}

}  // namespace lt::cluster
