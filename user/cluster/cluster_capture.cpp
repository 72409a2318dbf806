#include "user/cluster/cluster_capture.h"

#include <unistd.h>

#include <iostream>

#include "user/cluster/agent_protocol.h"
#include "user/cluster/node_steps.h"
#include "user/cluster/subprocess.h"
#include "user/core/errors.h"
#include "user/text/numbers.h"

namespace lt::cluster {

namespace {

struct NodeAnswers {
  std::size_t asked = 0, refused = 0;
  bool done = false;
  std::string error, last_err;
};

}  // namespace

int run_cluster_capture(const ClusterCaptureOptions& opt, const std::atomic<bool>& stop) {
  const SlurmJob job = query_slurm_job(opt.job_id, opt.scontrol);
  // Slurm would refuse the steps anyway ("Access denied"); one line first.
  if (geteuid() != 0 && job.uid >= 0 && job.uid != static_cast<long>(geteuid()))
    throw Error(ExitCode::refused, "Slurm job " + job.id + " is uid " + std::to_string(job.uid) + "'s, you are uid " +
                                       std::to_string(geteuid()) +
                                       ": only its owner (or root) may ask for its captures");
  const std::vector<std::string> nodes = chosen_nodes(job, opt.nodes);
  const std::string agent = node_binary(opt.agent_path);
  std::vector<NodeAnswers> answers(nodes.size());
  auto argv_of = [&](const std::string& node) {
    return std::vector<std::string>{agent,           "agent",
                                    "--capture-via", opt.watcher_dir,
                                    "--job-env",     "SLURM_JOB_ID=" + job.id.substr(0, job.id.find('_')),
                                    "--job-env",     "SLURMD_NODENAME=" + node,
                                    "--wait",        fixed(opt.wait_s, 3)};
  };
  auto on_line = [&](std::size_t i, const std::string& line, bool is_err) {
    auto& a = answers[i];
    if (is_err) {
      std::string l = line.rfind("ltrace-bpf: ", 0) == 0 ? line.substr(12) : line;
      if (l.empty()) return;
      std::cerr << "ltrace-bpf: " << nodes[i] << ": " << l << "\n";
      if (l.find(": task ") == std::string::npos) a.last_err = l;  // not srun's "task 0: Exited ..."
      return;
    }
    const auto m = parse_agent_line(line);
    if (!m) return;
    const std::string who = nodes[i] + ": rank " + m->field("rank") + " (pid " + m->field("pid") + "): ";
    if (m->kind == "captured") {
      ++a.asked;
      std::cout << who << m->field("answer") << "\n";
    } else if (m->kind == "capture-refused") {
      ++a.refused;
      std::cout << who << m->field("error") << "\n";
    } else if (m->kind == "failed") {
      a.error = m->field("error");
    } else if (m->kind == "done") {
      a.done = true;
    }
    std::cout.flush();
  };
  // Root on a user's job: the steps run as its owner (Slurm starts no
  // other's there), and the watchers take them for the owner's requests.
  const auto steps = run_node_steps(opt, job, nodes, argv_of, on_line, std::chrono::duration<double>(30 + opt.wait_s),
                                    stop, step_user_for(job));
  std::size_t asked = 0, refused = 0;
  bool whole = true;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    auto& a = answers[i];
    asked += a.asked;
    refused += a.refused;
    if (a.done && a.refused == 0) continue;
    whole = false;
    if (a.done) continue;  // its refusals are said above
    std::string why = !a.error.empty()                ? a.error
                      : !steps[i].start_error.empty() ? steps[i].start_error
                      : steps[i].killed               ? std::string(stop.load() ? "stopped" : "no answer in time")
                                                      : "its agent ended (" + steps[i].ended() +
                                              (a.last_err.empty() ? "" : ": " + a.last_err) + ")";
    std::cerr << "ltrace-bpf: cluster: " << nodes[i] << ": no capture asked for: " << why << "\n";
  }
  if (whole) return 0;
  return static_cast<int>(refused > 0 && asked == 0 ? ExitCode::refused : ExitCode::partial);
}

}  // namespace lt::cluster
