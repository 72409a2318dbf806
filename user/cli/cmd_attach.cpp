// The commands that attach with BPF: live (reports when the session ends),
// record (a trace file), run (a command launched under ltrace-bpf) and
// agent (record for the cluster coordinator, with status lines on stdout,
// user/cluster/agent_protocol.h).  They share one session.
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include "user/cli/builtin.h"
#include "user/cli/launch.h"
#include "user/cli/report_set.h"
#include "user/cli/stop_signals.h"
#include "user/cluster/agent.h"
#include "user/cluster/agent_capture.h"
#include "user/cluster/agent_dump.h"
#include "user/cluster/clock_exchange.h"
#include "user/collector/gpu_tracer.h"
#include "user/collector/session.h"
#include "user/core/errors.h"
#include "user/proc/job_discovery.h"
#include "user/proc/procfs.h"
#include "user/proc/rank_env.h"

namespace lt {
namespace {

using C = Options::Command;

// A target that exits while we attach gives one error, whichever step
// noticed first (its /proc files gone, a probe on a vanished process, the
// ptrace injection...): "process N exited while ltrace-bpf was attaching to
// it", exit code 16 (target_exited). `existed`: the targets that were there
// when we started.
void rethrow_if_a_target_exited(const std::vector<pid_t>& existed) {
  // A process in the middle of exiting has lost its files and memory but is
  // not a zombie yet: give it a moment to become one.
  for (int i = 0; i < 20; ++i) {
    bool all_there = true;
    for (pid_t pid : existed) all_there &= proc::exists(pid);
    if (!all_there) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (pid_t pid : existed)
    if (!proc::exists(pid))
      throw Error(ExitCode::target_exited,
                  "process " + std::to_string(pid) + " exited while ltrace-bpf was attaching to it");
}

// The agent's clock exchange with the coordinator (--clock-server), and its
// "attached" line with the ranks found.
void set_up_agent(const Options& opts, SessionOptions& so) {
  std::string host;
  if (!opts.clock_server.empty() && !cluster::parse_host_port(opts.clock_server, host, so.clock_port))
    throw Error(ExitCode::usage, "--clock-server needs [HOST]:PORT (got '" + opts.clock_server + "')");
  if (!opts.clock_server.empty()) {
    so.clock_host = cluster::clock_server_host(host);
    if (so.clock_host.empty())
      std::cerr << "ltrace-bpf: --clock-server " << opts.clock_server
                << ": no host given and no SLURM_LAUNCH_NODE_IPADDR: clock not measured\n";
  }
  so.on_attached = [pids = opts.pids] {
    std::string ranks;
    for (pid_t p : pids) {
      const auto env = proc::parse_rank_env(proc::read_environ(p));
      if (env.rank >= 0) ranks += (ranks.empty() ? "" : ",") + std::to_string(env.rank);
    }
    cluster::agent_say("attached", {{"processes", std::to_string(pids.size())}, {"ranks", ranks}});
  };
}

// The agent's last lines: the clock measurements, "done", and the trace
// itself when it streams it back.
void finish_agent(const SessionStats& st, const cluster::AgentOutput& out) {
  for (const auto& c : st.clock_syncs)
    cluster::agent_say("clock", {{"phase", std::to_string(c.phase)},
                                 {"offset_ns", std::to_string(c.offset_ns)},
                                 {"delay_ns", std::to_string(c.delay_ns)},
                                 {"samples", std::to_string(c.samples)}});
  cluster::agent_say("done", {{"records", std::to_string(st.records)},
                              {"bytes", std::to_string(st.file_bytes)},
                              {"path", out.stream ? std::string() : out.trace_path},
                              {"stream", out.stream ? "1" : "0"}});
  if (out.stream) {
    std::string why;
    if (!cluster::stream_trace_file(out.trace_path, &why))
      throw Error(ExitCode::io, why + "; the trace is kept at " + out.trace_path);
    std::remove(out.trace_path.c_str());
  }
}

// One session over the targets; returns the exit code.  Live and run feed
// `reports` as records arrive; record and agent only write the trace file.
int attach(Options& opts) {
  const bool agent = opts.command == C::agent;
  const bool recording = opts.command == C::record || agent;
  install_stop_signals(agent);
  cluster::AgentOutput agent_out{opts.output, false};
  if (agent) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    cluster::agent_say("hello", {{"host", host}, {"pid", std::to_string(getpid())}});
    agent_out = cluster::agent_output(opts.output, opts.shared_marker, opts.stream);
  }
  std::unique_ptr<Launch> launch;
  if (opts.command == C::run) {
    const std::string bridge = opts.gpu ? find_bridge_library() : "";
    launch = std::make_unique<Launch>(opts.run_argv, bridge);
    opts.pids = {launch->pid()};
    if (opts.gpu && bridge.empty())
      std::cerr << "ltrace-bpf: libltrace-bridge.so not found next to ltrace-bpf: no CUPTI/NVTX for the command\n";
    else if (opts.verbose && !launch->injected().empty())
      std::cerr << "ltrace-bpf: run: " << launch->injected() << "=" << bridge << "\n";
  }
  if (!opts.job_env.empty()) {
    std::string why;
    auto found = agent ? cluster::wait_for_job_processes(opts.job_env, opts.wait_s, &why)
                       : proc::find_job_processes(opts.job_env, &why);
    if (found.empty()) throw Error(ExitCode::no_such_process, "--job-env: " + why);
    opts.pids.insert(opts.pids.end(), found.begin(), found.end());
    if (opts.verbose) std::cerr << "ltrace-bpf: --job-env: " << found.size() << " process(es) of the job here\n";
  }
  SessionOptions so{opts.pids, opts.all, opts.children, {}, opts.duration_s, opts.verbose};
  // A CPython that is none of our descendants but carries run's mark or
  // the job's variables is held at its exec and adopted.
  if (launch) {
    so.adopt_env = {launch->marker()};
    so.launched = true;
  } else if (!opts.job_env.empty()) {
    so.adopt_env = opts.job_env;
  }
  so.gpu = opts.gpu;
  so.reports = opts.report;
  so.inject = opts.inject;
  so.launch_stacks = opts.launch_stacks;
  so.device_stats = opts.device_stats;
  so.wake_fd = loop_wakeup_fd();  // a stop wakes the sleeping drain loop at once
  if (launch) so.on_attached = [&launch] { launch->release(); };
  if (launch && !launch->injected().empty()) so.preloaded_bridge = find_bridge_library();
  so.output_path = agent_out.trace_path;
  if (agent) set_up_agent(opts, so);
  so.off_cpu = opts.off_cpu;
  // What the reports asked for need (user/cli/report_registry.cpp), and
  // what other options ask for.
  const ReportSources needs = report_sources(opts);
  so.sources = needs;
  // A report that reads samples (the verdict's logging and sampled-GC
  // findings) has them at a profile's rate unless --rate says otherwise.
  so.sample_rate_hz = opts.effective_rate();
  if (!so.sample_rate_hz && needs.stacks) so.sample_rate_hz = 99;
  so.sources.ops |= opts.wants_ops();
  so.sources.memory |= opts.profile_memory;
  so.op_filters = opts.op_filters;
  so.shapes = opts.group_by_input_shapes;
  so.module_names = opts.module_names;
  so.keep_in_memory = !opts.dump_path.empty();
  std::unique_ptr<ReportSet> reports;
  if (!recording) {
    reports = std::make_unique<ReportSet>(opts);
    so.sink = [r = reports.get()](const lt_event_header& h, const std::byte* p) { r->add(h, p); };
  }
  std::vector<pid_t> existed;
  for (pid_t pid : opts.pids)
    if (proc::exists(pid)) existed.push_back(pid);
  bool attached = false;
  so.on_attached = [&attached, then = std::move(so.on_attached)] {
    attached = true;
    if (then) then();
  };
  Session session(so);
  Trace trace;
  try {
    session.prepare();
    trace = session.run(stop_requested());
  } catch (const Error&) {
    if (!attached) rethrow_if_a_target_exited(existed);
    throw;
  }
  const auto& st = session.stats();
  // Nothing was traced and a process we met ended while we were attaching
  // to it (a job shorter than the attach): one line and its own exit code,
  // never an empty report that looks like success. What a trace file got
  // stays in it.
  if (!opts.all && st.traced == 0 && !st.exited_during_attach.empty()) {
    const int rc = launch ? launch->wait() : -1;
    throw Error(ExitCode::target_exited,
                "pid " + std::to_string(st.exited_during_attach.front()) +
                    " exited while ltrace-bpf was attaching to it: nothing of it was recorded" +
                    (rc >= 0 ? " (the command's status: " + std::to_string(rc) + ")" : ""));
  }
  for (auto& n : session.notes()) std::cerr << "ltrace-bpf: " << n << "\n";
  // run: the command's own status is ours once the reports are out (128 +
  // signal when it was killed), as time, perf record and nsys do.
  int command_status = 0;
  if (launch) {
    const int rc = launch->wait();
    if (rc > 0) {
      std::cerr << "ltrace-bpf: the command exited with status " << rc << "\n";
      command_status = rc;
    }
  }
  if (opts.all && st.traced == 0) {
    if (!st.found) throw Error(ExitCode::no_such_process, "--all: no process with torch or Lightning loaded was found");
    throw Error(static_cast<ExitCode>(st.first_refusal),
                "--all: none of the " + std::to_string(st.found) + " process(es) found could be profiled");
  }
  if (agent) finish_agent(st, agent_out);
  if (opts.verbose)
    std::cerr << "ltrace-bpf: attach latency " << st.attach_latency_ms << " ms, " << st.probes << " uprobe(s), "
              << st.records << " events\n";
  if (recording)
    std::cerr << "ltrace-bpf: recorded " << st.records << " events from " << st.processes << " process(es) to "
              << agent_out.trace_path << " (" << st.file_bytes << " bytes); see it with: ltrace-bpf report "
              << (agent_out.stream ? opts.output : agent_out.trace_path) << "\n";
  if (reports) reports->write();
  if (!opts.dump_path.empty()) write_event_dump(trace, opts.dump_path);
  // A live report's -o file that failed: said when it did; the report was printed.
  return st.file_error_code ? st.file_error_code : command_status;
}

// live and record: the targets given, or with none every torch/Lightning process.
void check_targets(Options& o) {
  if (o.all && (!o.pids.empty() || !o.job_env.empty()))
    throw Error(ExitCode::usage, "--all takes every torch/Lightning process: --pid and --job-env do not apply");
  if (o.pids.empty() && o.job_env.empty()) o.all = true;
  if (o.all) o.children = true;
}

}  // namespace

void check_live(Options& o) {
  check_targets(o);
}

void check_record(Options& o) {
  check_targets(o);
  if (o.output.empty()) throw Error(ExitCode::usage, "record needs -o FILE");
}

void check_run(Options& o) {
  if (o.run_argv.empty())
    throw Error(ExitCode::usage, "run needs a command: ltrace-bpf run [options] -- COMMAND [ARGS]");
  o.children = true;  // the command's children (workers, ranks) too
}

void check_agent(Options& o) {
  if (!o.agent_capture_via.empty()) {
    if (o.job_env.empty() || !o.output.empty() || !o.pids.empty() || o.agent_dump)
      throw Error(ExitCode::usage, "agent --capture-via DIR finds its processes by --job-env and writes to stdout");
    return;
  }
  if (o.agent_dump) {
    if (o.job_env.empty()) throw Error(ExitCode::usage, "agent --dump-threads needs --job-env KEY=VALUE");
    if (!o.output.empty() || !o.pids.empty())
      throw Error(ExitCode::usage, "agent --dump-threads writes to stdout and finds its processes by --job-env");
    return;
  }
  if (o.pids.empty() && o.job_env.empty())
    throw Error(ExitCode::usage, "no target: give --pid PID or --job-env KEY=VALUE (see --help)");
  if (o.output.empty()) throw Error(ExitCode::usage, "agent needs -o FILE");
}

int cmd_live(Options& opts) {
  return attach(opts);
}
int cmd_record(Options& opts) {
  return attach(opts);
}
int cmd_run(Options& opts) {
  return attach(opts);
}
int cmd_agent(Options& opts) {
  if (opts.agent_dump) return cluster::run_agent_dump(opts.job_env, opts.wait_s, opts.duration_s, opts.verbose);
  if (!opts.agent_capture_via.empty())
    return cluster::run_agent_capture(opts.job_env, opts.wait_s, opts.agent_capture_via, opts.duration_s, opts.stream,
                                      opts.verbose);
  return attach(opts);
}

}  // namespace lt
