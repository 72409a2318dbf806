#include "user/cluster/node_steps.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>

#include "user/cluster/line_pipe.h"
#include "user/cluster/subprocess.h"
#include "user/core/errors.h"

namespace lt::cluster {

std::string NodeStep::ended() const {
  if (status < 0) return "not started";
  return WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                           : "signal " + std::to_string(WTERMSIG(status));
}

bool NodeStep::exited_ok() const {
  return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 && !killed;
}

std::vector<NodeStep> run_node_steps(const JobNodes& j, const SlurmJob& job, const std::vector<std::string>& nodes,
                                     const std::function<std::vector<std::string>(const std::string&)>& argv_of,
                                     const std::function<void(std::size_t, const std::string&, bool)>& on_line,
                                     std::chrono::duration<double> limit, const std::atomic<bool>& stop,
                                     const std::optional<RunAs>& as) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  struct Pipes {
    int out = -1, err = -1;
    std::string out_buf, err_buf;
  };
  std::vector<NodeStep> steps(nodes.size());
  std::vector<Pipes> pipes(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    steps[i].node = nodes[i];
    const auto srun = agent_srun_argv(j.srun, job.id, nodes[i], argv_of(nodes[i]));
    steps[i].srun = spawn_srun(srun, j.verbose, pipes[i].out, pipes[i].err, as ? &*as : nullptr);
    if (steps[i].srun < 0) steps[i].start_error = "cannot run " + j.srun + ": " + std::strerror(errno);
  }
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<std::pair<std::size_t, bool>> who;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      if (pipes[i].out >= 0) fds.push_back({pipes[i].out, POLLIN, 0}), who.push_back({i, false});
      if (pipes[i].err >= 0) fds.push_back({pipes[i].err, POLLIN, 0}), who.push_back({i, true});
    }
    if (fds.empty()) break;
    const bool late = Clock::now() - t0 > limit;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      auto& s = steps[i];
      if (s.srun <= 0 || s.killed || (pipes[i].out < 0 && pipes[i].err < 0) || !(late || stop.load())) continue;
      kill(-s.srun, SIGKILL);  // its own process group (spawn_piped): srun and its step
      s.killed = true;
    }
    const int r = poll(fds.data(), fds.size(), 200);
    if (r < 0 && errno != EINTR) throw Error(ExitCode::io, std::string("poll: ") + std::strerror(errno));
    for (std::size_t k = 0; k < fds.size() && r > 0; ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const std::size_t i = who[k].first;
      const bool is_err = who[k].second;  // (not a structured binding: clang 14 captures none)
      auto& p = pipes[i];
      drain_lines(is_err ? p.err : p.out, is_err ? p.err_buf : p.out_buf,
                  [&](std::string line) { on_line(i, line, is_err); });
    }
  }
  for (auto& s : steps) {
    if (s.srun <= 0) continue;
    int st = 0;
    while (waitpid(s.srun, &st, 0) < 0 && errno == EINTR) {
    }
    s.status = st;
  }
  return steps;
}

}  // namespace lt::cluster
