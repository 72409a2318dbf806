#include "user/cluster/coordinator.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>

#include "user/cluster/agent_protocol.h"
#include "user/cluster/clock_exchange.h"
#include "user/cluster/line_pipe.h"
#include "user/cluster/slurm_job.h"
#include "user/cluster/streamed_file.h"
#include "user/cluster/subprocess.h"
#include "user/core/errors.h"
#include "user/core/output_file.h"
#include "user/text/numbers.h"

namespace lt::cluster {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kManifest = "cluster-nodes.tsv";

struct Node {
  std::string name;
  pid_t srun = -1;
  int out = -1, err = -1;
  std::string out_buf, err_buf;
  std::string host;  // as the agent names its machine
  double attached_s = -1;
  std::string processes, ranks;
  std::string trace;  // relative to out_dir, once there
  std::uint64_t bytes = 0;
  std::string clock_offset, clock_delay;
  bool hello = false;  // the agent runs (its signal handlers are in)
  Clock::time_point last_io{};
  int kill_stage = 0;  // 1: srun sent SIGTERM (it kills the step), 2: SIGKILL
  Clock::time_point kill_at{};
  bool done = false, failed_line = false;
  std::string error;  // what the agent or srun said went wrong
  std::vector<std::string> stderr_tail;
  StreamedFile stream;  // the trace streamed back, as it arrives
  int status = -1;      // srun's wait status
};

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// The node's most telling stderr line: the last one that is not srun's own
// "task 0: Exited with exit code N" summary (execve errors, ours).
std::string why_line(const Node& n) {
  for (auto it = n.stderr_tail.rbegin(); it != n.stderr_tail.rend(); ++it)
    if (it->find(": task ") == std::string::npos) return ": " + *it;
  return n.stderr_tail.empty() ? "" : ": " + n.stderr_tail.back();
}

}  // namespace

namespace {

// A directory holding an earlier run's traces would have them merged with
// this one's (and a failed node's stale file taken for its trace).
fs::path fresh_output_dir(const std::string& out_dir) {
  make_output_dirs(out_dir);
  std::error_code ec;
  const fs::path dir = fs::absolute(out_dir, ec);
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::ifstream f(e.path(), std::ios::binary);
    char magic[8] = {};
    if (e.path().filename() == kManifest ||
        (e.is_regular_file(ec) && f.read(magic, 8) && std::memcmp(magic, "LTRACEBF", 8) == 0))
      throw Error(ExitCode::usage, out_dir + " already holds traces of an earlier run (" +
                                       e.path().filename().string() + "): give a new -o directory");
  }
  return dir;
}

// One capture: an agent per node through srun, their lines and traces
// gathered until every agent has ended, then the manifest.
class Capture {
 public:
  // t0: the command's start, which the times it prints count from.
  Capture(const ClusterOptions& opt, SlurmJob job, std::vector<std::string> nodes, fs::path dir, Clock::time_point t0)
      : opt_(opt), job_(std::move(job)), dir_(std::move(dir)), t0_(t0), ns_(nodes.size()) {
    for (std::size_t i = 0; i < nodes.size(); ++i) ns_[i].name = nodes[i];
  }
  void start_agents(const std::string& marker, int clock_port);
  void supervise(const std::atomic<bool>& stop);
  void reap();
  // The manifest, and a line per node; the number of nodes that gave a whole trace.
  std::size_t write_manifest();
  std::size_t size() const { return ns_.size(); }

 private:
  double since() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }
  void handle_line(Node& n, const std::string& line);
  void drain(Node& n, bool is_err);
  void terminate(Node& n, Clock::time_point now);
  void stop_agents(Clock::time_point now);
  void enforce_deadlines(Clock::time_point now);
  void announce_when_all_attached();

  const ClusterOptions& opt_;
  const SlurmJob job_;
  const fs::path dir_;
  const Clock::time_point t0_;
  std::vector<Node> ns_;
  bool stopping_ = false, announced_ = false, poll_failed_ = false;
  Clock::time_point stop_at_{};
};

void Capture::start_agents(const std::string& marker, int clock_port) {
  const std::string agent = node_binary(opt_.agent_path);
  std::cerr << "ltrace-bpf: cluster: Slurm job " << job_.id << ": " << ns_.size() << " node(s) (" << job_.nodelist
            << "); starting an agent on each\n";
  for (Node& n : ns_) {
    std::vector<std::string> a = {agent,
                                  "agent",
                                  "--job-env",
                                  "SLURM_JOB_ID=" + job_.id.substr(0, job_.id.find('_')),
                                  "--job-env",
                                  "SLURMD_NODENAME=" + n.name,
                                  "-o",
                                  (dir_ / (n.name + ".ltrace")).string(),
                                  "--clock-server",
                                  opt_.clock_host + ":" + std::to_string(clock_port),
                                  "--wait",
                                  fixed(opt_.wait_s, 3)};
    if (opt_.gather == Gather::stream) a.push_back("--stream");
    if (!marker.empty()) a.insert(a.end(), {"--shared-marker", marker});
    if (opt_.duration_s > 0) a.insert(a.end(), {"--duration", fixed(opt_.duration_s, 3)});
    a.insert(a.end(), opt_.agent_args.begin(), opt_.agent_args.end());
    const auto argv = agent_srun_argv(opt_.srun, job_.id, n.name, a);
    n.srun = spawn_srun(argv, opt_.verbose, n.out, n.err);
    if (n.srun < 0) n.error = "cannot run " + opt_.srun + ": " + std::strerror(errno);
  }
}

// A line of an agent's stdout: its status lines (agent_protocol.h), or
// output passed on.
void Capture::handle_line(Node& n, const std::string& line) {
  if (n.stream.receiving()) {
    if (n.stream.take(line) && !n.stream.error().empty()) n.error = n.stream.error();
    return;
  }
  auto m = parse_agent_line(line);
  if (!m) {
    if (!line.empty()) std::cout << n.name << ": " << line << "\n";
    return;
  }
  if (m->kind == "hello") {
    n.hello = true;
    n.host = m->field("host");
  } else if (m->kind == "attached") {
    n.attached_s = since();
    n.processes = m->field("processes");
    n.ranks = m->field("ranks");
    std::cerr << "ltrace-bpf: cluster: " << n.name << ": attached to " << n.processes << " process(es)"
              << (n.ranks.empty() ? "" : " (ranks " + n.ranks + ")") << " at " << fixed(n.attached_s, 3) << " s\n";
  } else if (m->kind == "clock") {
    n.clock_offset = m->field("offset_ns");
    n.clock_delay = m->field("delay_ns");
  } else if (m->kind == "done") {
    n.done = true;
    if (!m->field("path").empty() && m->field("stream") != "1") {
      n.trace = fs::path(m->field("path")).lexically_relative(dir_).string();
      n.bytes = std::strtoull(m->field("bytes").c_str(), nullptr, 10);
    }
  } else if (m->kind == "failed") {
    n.failed_line = true;
    n.error = m->field("error");
  } else if (m->kind == "file") {
    n.stream.begin((dir_ / (n.name + ".ltrace")).string(), std::strtoull(m->field("bytes").c_str(), nullptr, 10));
    if (!n.stream.error().empty()) n.error = n.stream.error();
  }
}

void Capture::drain(Node& n, bool is_err) {
  const auto now = Clock::now();
  int& fd = is_err ? n.err : n.out;
  std::string& buf = is_err ? n.err_buf : n.out_buf;
  const bool read_some = drain_lines(fd, buf, [&](std::string line) {
    if (!is_err) return handle_line(n, line);
    if (line.rfind("ltrace-bpf: ", 0) == 0) line.erase(0, 12);
    if (line.empty()) return;
    std::cerr << "ltrace-bpf: " << n.name << ": " << line << "\n";
    n.stderr_tail.push_back(line);
    if (n.stderr_tail.size() > 3) n.stderr_tail.erase(n.stderr_tail.begin());
  });
  if (read_some) n.last_io = now;
}

// srun answers SIGTERM by killing the step; SIGKILL (the group) if even
// that does not end it.
void Capture::terminate(Node& n, Clock::time_point now) {
  if (n.srun <= 0 || n.kill_stage) return;
  kill(n.srun, SIGTERM);
  n.kill_stage = 1;
  n.kill_at = now;
}

// srun forwards SIGUSR1 to the agent as it is (a SIGTERM it would turn into
// SIGKILL, losing the trace). An agent that has not said hello may not
// handle it yet: its step is ended instead.
void Capture::stop_agents(Clock::time_point now) {
  stopping_ = true;
  stop_at_ = now;
  std::cerr << "ltrace-bpf: cluster: stopping the agents\n";
  for (auto& n : ns_)
    if (n.srun > 0 && n.hello)
      kill(n.srun, SIGUSR1);
    else
      terminate(n, now);
}

void Capture::enforce_deadlines(Clock::time_point now) {
  for (auto& n : ns_) {
    if (n.out < 0 && n.err < 0) continue;
    if (!n.hello && now - t0_ > std::chrono::seconds(30) + std::chrono::duration<double>(opt_.wait_s) &&
        !n.kill_stage) {
      n.error =
          "no agent started on " + n.name + " within 30 s (is the job step pending? squeue -s -j " + job_.id + ")";
      terminate(n, now);
    }
    // After a stop, an agent silent for 30 s (not one still sending its
    // trace) is ended.
    if (stopping_ && now - std::max(stop_at_, n.last_io) > std::chrono::seconds(30)) terminate(n, now);
    if (n.kill_stage == 1 && now - n.kill_at > std::chrono::seconds(5)) {
      kill(-n.srun, SIGKILL);
      n.kill_stage = 2;
    }
  }
}

void Capture::announce_when_all_attached() {
  if (announced_) return;
  bool all = true;
  double last = 0;
  for (auto& n : ns_) {
    all = all && (n.attached_s >= 0 || (n.out < 0 && n.err < 0));
    last = std::max(last, n.attached_s);
  }
  if (!all) return;
  announced_ = true;
  std::size_t ok = 0;
  for (auto& n : ns_) ok += n.attached_s >= 0;
  std::cerr << "ltrace-bpf: cluster: " << ok << " of " << ns_.size() << " node(s) attached; the last at "
            << fixed(last, 3) << " s after start\n";
}

// Until every agent's pipes are closed.
void Capture::supervise(const std::atomic<bool>& stop) {
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<std::pair<std::size_t, bool>> who;
    for (std::size_t i = 0; i < ns_.size(); ++i) {
      if (ns_[i].out >= 0) fds.push_back({ns_[i].out, POLLIN, 0}), who.push_back({i, false});
      if (ns_[i].err >= 0) fds.push_back({ns_[i].err, POLLIN, 0}), who.push_back({i, true});
    }
    if (fds.empty()) break;
    const auto now = Clock::now();
    // A capture that overruns its --duration by far (an agent hanging) is
    // stopped as if by a signal.
    const bool overdue = opt_.duration_s > 0 && since() > opt_.duration_s + opt_.wait_s + 120;
    if ((stop.load() || overdue || poll_failed_) && !stopping_) stop_agents(now);
    enforce_deadlines(now);
    const int r = poll(fds.data(), fds.size(), 200);
    if (r < 0 && errno != EINTR) poll_failed_ = true;
    for (std::size_t k = 0; k < fds.size() && r > 0; ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      drain(ns_[who[k].first], who[k].second);
    }
    announce_when_all_attached();
  }
}

void Capture::reap() {
  for (auto& n : ns_) {
    if (n.srun <= 0) continue;
    int st = 0;
    while (waitpid(n.srun, &st, 0) < 0 && errno == EINTR) {
    }
    n.status = st;
  }
}

std::size_t Capture::write_manifest() {
  std::size_t good = 0;
  std::ostringstream tsv;
  tsv << "# ltrace-bpf cluster: Slurm job " << job_.id << " (" << job_.nodelist << "), " << ns_.size()
      << " node(s)\n# node\tstatus\thost\tprocesses\tranks\tattached_s\ttrace\tbytes\tclock_offset_ns\tclock_delay_ns\t"
         "detail\n";
  for (auto& n : ns_) {
    n.stream.abandon();
    if (!n.stream.path().empty()) {
      n.trace = fs::path(n.stream.path()).filename().string();
      n.bytes = n.stream.received();
      if (!n.stream.whole() && n.error.empty())
        n.error = n.stream.error().empty() ? "the streamed trace was cut short" : n.stream.error();
    }
    const bool exited_ok = n.status >= 0 && WIFEXITED(n.status) && WEXITSTATUS(n.status) == 0;
    std::error_code fe;
    const bool have_trace = !n.trace.empty() && fs::exists(dir_ / n.trace, fe);
    std::string detail = n.error;
    if (!exited_ok && detail.empty())
      detail = n.srun < 0 ? "srun did not start" : "agent ended with " + describe_status(n.status) + why_line(n);
    if (exited_ok && !have_trace && detail.empty() && !n.trace.empty())
      detail = "its trace is not in " + dir_.string() + " here: the node wrote it to its own " +
               (dir_ / n.trace).string() + " (is the directory shared? --gather stream sends it back)";
    // A node whose agent died mid-capture may still have left part of its
    // trace in a shared directory: keep it, the merge marks it cut.
    if (!have_trace) {
      const fs::path maybe = dir_ / (n.name + ".ltrace");
      if (fs::exists(maybe, fe) && fs::file_size(maybe, fe) > 0) {
        n.trace = maybe.filename().string();
        n.bytes = fs::file_size(maybe, fe);
        detail += detail.empty() ? "" : "; ";
        detail += "partial trace kept";
      }
    }
    const bool ok = exited_ok && n.error.empty() && !n.failed_line && have_trace;
    good += ok;
    std::string clean = detail;
    std::replace(clean.begin(), clean.end(), '\t', ' ');
    std::replace(clean.begin(), clean.end(), '\n', ' ');
    tsv << n.name << "\t" << (ok ? "ok" : "failed") << "\t" << (n.host.empty() ? "-" : n.host) << "\t"
        << (n.processes.empty() ? "-" : n.processes) << "\t" << (n.ranks.empty() ? "-" : n.ranks) << "\t"
        << (n.attached_s >= 0 ? fixed(n.attached_s, 3) : "-") << "\t" << (n.trace.empty() ? "-" : n.trace) << "\t"
        << n.bytes << "\t" << (n.clock_offset.empty() ? "-" : n.clock_offset) << "\t"
        << (n.clock_delay.empty() ? "-" : n.clock_delay) << "\t" << (clean.empty() ? "-" : clean) << "\n";
    if (ok)
      std::cerr << "ltrace-bpf: cluster: " << n.name << ": " << (dir_ / n.trace).string() << " (" << n.bytes << " bytes"
                << (n.stream.path().empty() ? "" : ", streamed back") << ")"
                << (n.clock_delay.empty() ? ""
                                          : "; clock " + n.clock_offset + " ns, round trip " + n.clock_delay + " ns")
                << "\n";
    else
      std::cerr << "ltrace-bpf: cluster: " << n.name << ": no complete trace: " << detail << "\n";
  }
  OutputFile m((dir_ / kManifest).string());
  m.stream() << tsv.str();
  m.close();
  return good;
}

}  // namespace

int run_cluster(const ClusterOptions& opt, const std::atomic<bool>& stop) {
  const auto t0 = Clock::now();
  SlurmJob job = query_slurm_job(opt.job_id, opt.scontrol);
  const std::vector<std::string> nodes = chosen_nodes(job, opt.nodes);
  const fs::path dir = fresh_output_dir(opt.out_dir);
  // A marker only a node that shares this directory can see.
  std::string marker;
  if (opt.gather == Gather::automatic) {
    std::random_device rd;
    marker = (dir / (".ltrace-cluster-" + std::to_string(rd()) + std::to_string(getpid()))).string();
    OutputFile m(marker);
    m.stream() << "ltrace-bpf cluster marker\n";
    m.close();
  }
  ClockServer clock;
  Capture capture(opt, std::move(job), nodes, dir, t0);
  capture.start_agents(marker, clock.port());
  capture.supervise(stop);
  capture.reap();
  std::error_code ec;
  if (!marker.empty()) fs::remove(marker, ec);
  const std::size_t good = capture.write_manifest();
  std::cerr << "ltrace-bpf: cluster: " << good << " of " << capture.size()
            << " node(s) recorded; see them with: ltrace-bpf report " << opt.out_dir << " --merge\n";
  return good == capture.size() ? 0 : static_cast<int>(ExitCode::partial);
}

std::vector<std::string> manifest_notes(const std::string& dir) {
  std::vector<std::string> out;
  std::ifstream f(fs::path(dir) / kManifest);
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> c;
    std::size_t at = 0;
    for (std::size_t tab; (tab = line.find('\t', at)) != std::string::npos; at = tab + 1)
      c.push_back(line.substr(at, tab - at));
    c.push_back(line.substr(at));
    if (c.size() < 11 || c[1] == "ok") continue;
    out.push_back("node " + c[0] + ": its agent failed (" + c[10] + ")" +
                  (c[6] == "-" ? ": no trace" : ": its trace " + c[6] + " may be incomplete"));
  }
  return out;
}

}  // namespace lt::cluster
