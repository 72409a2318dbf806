#include "user/cluster/cluster_watch.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>

#include "user/cluster/line_pipe.h"
#include "user/cluster/slurm_job.h"
#include "user/cluster/subprocess.h"
#include "user/core/errors.h"

namespace lt::cluster {

namespace {

using Clock = std::chrono::steady_clock;

struct Watcher {
  std::string node;
  pid_t srun = -1;
  int out = -1, err = -1;
  std::string out_buf, err_buf, last_err;
  int status = -1;
  Clock::time_point termed{};  // the last SIGUSR2 sent
  bool killed = false;
};

// A watcher's line, as ours: "ltrace-bpf: NODE: watch: ...".
void pass_on(Watcher& w, std::string line, bool is_err) {
  if (line.rfind("ltrace-bpf: ", 0) == 0) line.erase(0, 12);
  if (line.empty()) return;
  std::cerr << "ltrace-bpf: " << w.node << ": " << line << "\n";
  if (is_err && line.find(": task ") == std::string::npos) w.last_err = line;  // not srun's "task 0: Exited ..."
}

}  // namespace

int run_cluster_watch(const ClusterWatchOptions& opt, const std::atomic<bool>& stop) {
  SlurmJob job = query_slurm_job(opt.job_id, opt.scontrol);
  const std::vector<std::string> nodes = chosen_nodes(job, opt.nodes);
  const std::string exe = node_binary(opt.agent_path);
  std::vector<Watcher> ws(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    Watcher& w = ws[i];
    w.node = nodes[i];
    std::vector<std::string> argv = {exe,         "watch",
                                     "--job-env", "SLURM_JOB_ID=" + job.id.substr(0, job.id.find('_')),
                                     "--job-env", "SLURMD_NODENAME=" + w.node};
    argv.insert(argv.end(), opt.watch_args.begin(), opt.watch_args.end());
    // Its own directory: nodes may share DIR, and a watcher owns its DIR.
    argv.insert(argv.end(), {"--dir", opt.dir + "/" + w.node});
    const auto srun = agent_srun_argv(opt.srun, job.id, w.node, argv);
    w.srun = spawn_srun(srun, opt.verbose, w.out, w.err);
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
      Watcher& w = ws[who[k].first];
      const bool is_err = who[k].second;
      drain_lines(is_err ? w.err : w.out, is_err ? w.err_buf : w.out_buf,
                  [&](std::string line) { pass_on(w, std::move(line), is_err); });
    }
  }
  bool failed = false;
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
