#include "user/cluster/cluster_watch.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "user/cluster/agent_protocol.h"
#include "user/cluster/clock_exchange.h"
#include "user/cluster/cross_node_stragglers.h"
#include "user/cluster/line_pipe.h"
#include "user/cluster/slurm_job.h"
#include "user/cluster/subprocess.h"
#include "user/cluster/watch_uplink.h"
#include "user/core/clocks.h"
#include "user/core/errors.h"

namespace lt::cluster {

namespace {

using Clock = std::chrono::steady_clock;

struct NodeWatcher {
  std::string node;
  pid_t srun = -1;
  int out = -1, err = -1;
  int in = -1;  // its stdin (srun passes it on): the coordinator's straggler requests
  std::string out_buf, err_buf, last_err;
  int status = -1;
  Clock::time_point termed{};  // the last SIGUSR2 sent
  bool killed = false;
  bool clock_said = false;
};

// A watcher's line, as ours: "ltrace-bpf: NODE: watch: ...".
void pass_on(NodeWatcher& w, std::string line, bool is_err) {
  if (line.rfind("ltrace-bpf: ", 0) == 0) line.erase(0, 12);
  if (line.empty()) return;
  std::cerr << "ltrace-bpf: " << w.node << ": " << line << "\n";
  if (is_err && line.find(": task ") == std::string::npos) w.last_err = line;  // not srun's "task 0: Exited ..."
}

std::int64_t to_i64(const std::string& s) {
  return std::strtoll(s.c_str(), nullptr, 10);
}

// A watcher's uplink line (user/cluster/watch_uplink.h): into the straggler
// rule across nodes. False: not one of those.
bool take_uplink_line(NodeWatcher& w, const std::string& line, CrossNodeStragglers& rule, bool verbose) {
  const auto m = parse_agent_line(line);
  if (!m) return false;
  const auto pid = static_cast<std::uint32_t>(to_i64(m->field("pid")));
  if (m->kind == "arrival") {
    rule.arrival(w.node, pid, std::strtoull(m->field("pg").c_str(), nullptr, 10),
                 std::strtoull(m->field("seq").c_str(), nullptr, 10),
                 static_cast<std::uint8_t>(to_i64(m->field("kind"))), to_i64(m->field("t")));
  } else if (m->kind == "progress") {
    rule.progress(w.node, pid, static_cast<int>(to_i64(m->field("rank", "-1"))),
                  static_cast<std::uint64_t>(to_i64(m->field("steps"))),
                  static_cast<std::uint64_t>(to_i64(m->field("median_ns"))));
  } else if (m->kind == "through") {
    rule.through(w.node, to_i64(m->field("t")));
  } else if (m->kind == "gone") {
    rule.gone(w.node, pid);
  } else if (m->kind != "clock") {
    return false;  // not the uplink's: passed on as the node's line
  } else {
    // Once, and again under -v (every minute): the node's wall clock against ours.
    if (w.clock_said && !verbose) {
    } else if (m->field("ok") != "1") {
      std::cerr << "ltrace-bpf: cluster: " << w.node << ": clock not measured (" << m->field("error")
                << "): its arrivals are taken on its own wall clock\n";
    } else {
      char buf[160];
      std::snprintf(buf, sizeof buf, "clock %+.3f ms against this host's (round trip %.3f ms)",
                    -static_cast<double>(to_i64(m->field("offset_ns"))) / 1e6,
                    static_cast<double>(to_i64(m->field("delay_ns"))) / 1e6);
      std::cerr << "ltrace-bpf: cluster: " << w.node << ": " << buf << "\n";
    }
    w.clock_said = true;
  }
  return true;
}

}  // namespace

int run_cluster_watch(const ClusterWatchOptions& opt, const std::atomic<bool>& stop) {
  SlurmJob job = query_slurm_job(opt.job_id, opt.scontrol);
  const std::vector<std::string> nodes = chosen_nodes(job, opt.nodes);
  const std::string exe = node_binary(opt.agent_path);
  std::vector<NodeWatcher> ws(nodes.size());
  // The straggler rule over every node's ranks: each watcher sends its
  // arrivals up on its own clock made ours (measured against this server).
  ClockServer clock;
  const std::string upstream = opt.clock_host + ":" + std::to_string(clock.port());
  CrossNodeStragglers stragglers(opt.straggler);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    NodeWatcher& w = ws[i];
    w.node = nodes[i];
    std::vector<std::string> argv = {exe,         "watch",
                                     "--job-env", "SLURM_JOB_ID=" + job.id.substr(0, job.id.find('_')),
                                     "--job-env", "SLURMD_NODENAME=" + w.node};
    argv.insert(argv.end(), opt.watch_args.begin(), opt.watch_args.end());
    // Its own directory: nodes may share DIR, and a watcher owns its DIR.
    argv.insert(argv.end(), {"--dir", opt.dir + "/" + w.node, "--upstream", upstream});
    const auto srun = agent_srun_argv(opt.srun, job.id, w.node, argv);
    w.srun = spawn_srun(srun, opt.verbose, w.out, w.err, nullptr, &w.in);
    // A request is one short line; a srun that stops reading must not stop us.
    if (w.in >= 0) fcntl(w.in, F_SETFL, fcntl(w.in, F_GETFL) | O_NONBLOCK);
    if (w.srun < 0) w.last_err = "cannot run " + opt.srun + ": " + std::strerror(errno);
  }
  std::cerr << "ltrace-bpf: cluster: watching Slurm job " << job.id << " on " << nodes.size()
            << " node(s); each node's recorder and captures in " << opt.dir << "/NODE there\n";
  // A stop goes to each srun as SIGUSR2, which srun passes on to its task
  // as it is: the watcher flushes and exits (SIGTERM would cancel the step,
  // and Slurm kills what has not ended KillWait later). One that is still
  // there 60 s later (a node that hangs) is killed with its srun.
  Clock::time_point stopped{};
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<std::pair<std::size_t, bool>> who;
    for (std::size_t i = 0; i < ws.size(); ++i) {
      if (ws[i].out >= 0) fds.push_back({ws[i].out, POLLIN, 0}), who.push_back({i, false});
      if (ws[i].err >= 0) fds.push_back({ws[i].err, POLLIN, 0}), who.push_back({i, true});
    }
    if (fds.empty()) break;
    if (stop.load() && stopped == Clock::time_point{}) stopped = Clock::now();
    for (auto& w : ws) {
      if (w.srun <= 0 || (w.out < 0 && w.err < 0) || stopped == Clock::time_point{}) continue;
      // Again every 5 s: one sent before srun could pass it on (its step
      // still starting, or srun between fork and exec) is lost.
      if (Clock::now() - w.termed > std::chrono::seconds(5)) {
        kill(w.srun, SIGUSR2);
        w.termed = Clock::now();
      }
      if (!w.killed && Clock::now() - stopped > std::chrono::seconds(60)) {
        kill(-w.srun, SIGKILL);  // its own process group (spawn_piped): srun and its step
        w.killed = true;
        w.last_err = "its watcher did not end within 60 s of the stop";
      }
    }
    const int r = poll(fds.data(), fds.size(), 200);
    if (r < 0 && errno != EINTR) throw Error(ExitCode::io, std::string("poll: ") + std::strerror(errno));
    for (std::size_t k = 0; k < fds.size() && r > 0; ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      NodeWatcher& w = ws[who[k].first];
      const bool is_err = who[k].second;
      drain_lines(is_err ? w.err : w.out, is_err ? w.err_buf : w.out_buf, [&](std::string line) {
        if (is_err || !take_uplink_line(w, line, stragglers, opt.verbose)) pass_on(w, std::move(line), is_err);
      });
      if (!is_err && w.out < 0) stragglers.node_gone(w.node);
    }
    // The straggler across nodes: said here, and captured by its node's watcher.
    if (auto named = stragglers.check(static_cast<std::int64_t>(clock_ns(CLOCK_MONOTONIC)))) {
      std::cerr << "ltrace-bpf: cluster: straggler: " << named->what << "\n";
      for (auto& w : ws) {
        if (w.node != named->node || w.in < 0) continue;
        const std::string req = straggler_request_line(named->pid, named->what) + "\n";
        if (write(w.in, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
          std::cerr << "ltrace-bpf: cluster: " << w.node
                    << ": cannot ask its watcher for a capture: " << std::strerror(errno) << "\n";
        }
      }
    }
  }
  bool failed = false;
  for (auto& w : ws)
    if (w.in >= 0) close(w.in);
  for (auto& w : ws) {
    if (w.srun > 0) {
      int st = 0;
      while (waitpid(w.srun, &st, 0) < 0 && errno == EINTR) {
      }
      w.status = st;
    }
    const bool ok = w.status >= 0 && WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0 && !w.killed;
    if (ok) continue;
    failed = true;
    std::cerr << "ltrace-bpf: cluster: " << w.node << ": its watcher ended badly ("
              << (w.status < 0          ? std::string("not started")
                  : WIFEXITED(w.status) ? "exit status " + std::to_string(WEXITSTATUS(w.status))
                                        : "signal " + std::to_string(WTERMSIG(w.status)))
              << (w.last_err.empty() ? "" : ": " + w.last_err) << ")\n";
  }
  return failed ? static_cast<int>(ExitCode::partial) : 0;
}

}  // namespace lt::cluster
