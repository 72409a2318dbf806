#include "user/cluster/cluster_capture.h"

#include <unistd.h>

#include <iostream>
#include <memory>

#include "user/cluster/agent_protocol.h"
#include "user/cluster/node_steps.h"
#include "user/cluster/streamed_file.h"
#include "user/cluster/subprocess.h"
#include "user/core/errors.h"
#include "user/core/output_file.h"
#include "user/text/numbers.h"

namespace lt::cluster {

namespace {

struct NodeAnswers {
  std::size_t asked = 0, refused = 0, brought = 0, lost = 0;
  bool done = false;
  std::string error, last_err;
  // A capture's trace coming back (-o): its rank line, where it goes.
  std::string who, path;
  StreamedFile stream;
};

// A file name from what an agent said (it runs as the job's owner; we may
// be root): letters, digits, '.', '_' and '-' kept, the rest '_', never
// a leading '.'.
std::string safe_name(const std::string& s) {
  std::string out;
  for (char c : s) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    out += ok ? c : '_';
  }
  if (out.empty() || out[0] == '.') out.insert(out.begin(), '_');
  return out.substr(0, 200);
}

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
  if (!opt.out_dir.empty()) make_output_dirs(opt.out_dir);
  auto argv_of = [&](const std::string& node) {
    std::vector<std::string> a{agent,           "agent",
                               "--capture-via", opt.watcher_dir,
                               "--job-env",     "SLURM_JOB_ID=" + job.id.substr(0, job.id.find('_')),
                               "--job-env",     "SLURMD_NODENAME=" + node,
                               "--wait",        fixed(opt.wait_s, 3)};
    if (!opt.out_dir.empty()) a.push_back("--stream");  // each capture's trace back on stdout
    if (opt.after_s > 0) a.insert(a.end(), {"--duration", fixed(opt.after_s, 3)});
    return a;
  };
  // A line of a capture's trace coming back (base64), or its end.
  auto receive = [&](NodeAnswers& a, const std::string& line) {
    if (!a.stream.take(line)) return;
    if (a.stream.whole()) {
      ++a.brought;
      std::cout << a.who << "brought back to " << a.path << "\n";
    } else {
      ++a.lost;
      std::cout << a.who << "its trace came back cut short (" << a.stream.received() << " of " << a.stream.expected()
                << " bytes, in " << a.path << (a.stream.error().empty() ? "" : ": " + a.stream.error()) << ")\n";
    }
  };

  auto on_line = [&](std::size_t i, const std::string& line, bool is_err) {
    auto& a = answers[i];
    if (!is_err && a.stream.receiving()) return receive(a, line);
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
    } else if (m->kind == "capture-file" && !opt.out_dir.empty()) {
      // Named by node and capture (time, host, pid, rank): one file each.
      a.who = who;
      a.path = opt.out_dir + "/" + safe_name(nodes[i] + "-" + m->field("name")) + ".ltrace";
    } else if (m->kind == "file" && !a.path.empty()) {
      a.stream.begin(a.path, std::strtoull(m->field("bytes").c_str(), nullptr, 10));  // an error: said at its end
    } else if (m->kind == "capture-lost") {
      ++a.lost;
      std::cout << who << "not brought back: " << m->field("error") << "\n";
    } else if (m->kind == "failed") {
      a.error = m->field("error");
    } else if (m->kind == "done") {
      a.done = true;
    }
    std::cout.flush();
  };
  // Root on a user's job: the steps run as its owner (Slurm starts no
  // other's there), and the watchers take them for the owner's requests.
  // Bringing captures back waits for them to be written (the agent's
  // bound: 300 s).
  const double bound_s = 30 + opt.wait_s + (opt.out_dir.empty() ? 0 : 330 + opt.after_s);
  const auto steps = run_node_steps(opt, job, nodes, argv_of, on_line, std::chrono::duration<double>(bound_s), stop,
                                    step_user_for(job));
  std::size_t asked = 0, refused = 0;
  bool whole = true;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    auto& a = answers[i];
    if (a.stream.receiving()) {  // the agent ended mid-stream
      a.stream.abandon();
      ++a.lost;
      std::cout << a.who << "its trace came back cut short (" << a.stream.received() << " of " << a.stream.expected()
                << " bytes, in " << a.path << ")\n";
    }
    asked += a.asked;
    refused += a.refused;
    if (a.done && a.refused == 0 && a.lost == 0 && (opt.out_dir.empty() || a.brought == a.asked)) continue;
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
