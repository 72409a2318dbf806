// ltrace-bpf: entry point.  Parses options, runs a live session, renders
// reports.  Every failure ends as one line on stderr and a documented exit
// code (see --help); nothing escapes as an abort or a stack dump.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iostream>
#include <thread>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/device_stats.h"
#include "reports/aggregate/gpu.h"
#include "reports/aggregate/ops.h"
#include "reports/aggregate/stacks.h"
#include "reports/dump/event_dump.h"
#include "reports/export/chrome_trace.h"
#include "reports/export/html_report.h"
#include "reports/gpu/device_stats_report.h"
#include "user/cli/launch.h"
#include "user/cli/merge_output.h"
#include "user/cli/options.h"
#include "user/cli/ps_command.h"
#include "user/cli/report_output.h"
#include "user/cli/stack_output.h"
#include "user/cli/terminal_escape.h"
#include "user/cluster/agent.h"
#include "user/cluster/clock_exchange.h"
#include "user/cluster/coordinator.h"
#include "user/collector/gpu_tracer.h"
#include "user/collector/session.h"
#include "user/core/errors.h"
#include "user/core/output_file.h"
#include "user/proc/job_discovery.h"
#include "user/proc/procfs.h"
#include "user/proc/rank_env.h"
#include "user/tracefile/trace_reader.h"

namespace {
std::atomic<bool> g_stop{false};
bool g_agent = false;  // failures also go to the coordinator, as a status line
void on_signal(int) {
  g_stop.store(true);
}

// `restart`: SA_RESTART, so a signal does not fail a write in progress (the
// agent's stdout, the coordinator's stderr); the loops that wait still wake,
// as poll() and nanosleep() are never restarted.
// A target that exits while we attach gives one error, whichever step
// noticed first (its /proc files gone, a probe on a vanished process, the
// ptrace injection...): "process N exited while ltrace-bpf was attaching to
// it", exit code 3. `existed`: the targets that were there when we started.
void rethrow_if_a_target_exited(const std::vector<pid_t>& existed) {
  // A process in the middle of exiting has lost its files and memory but is
  // not a zombie yet: give it a moment to become one.
  for (int i = 0; i < 20; ++i) {
    bool all_there = true;
    for (pid_t pid : existed) all_there &= lt::proc::exists(pid);
    if (!all_there) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (pid_t pid : existed)
    if (!lt::proc::exists(pid))
      throw lt::Error(lt::ExitCode::no_such_process,
                      "process " + std::to_string(pid) + " exited while ltrace-bpf was attaching to it");
}

void install_signals(bool restart = false) {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = restart ? SA_RESTART : 0;  // none: let a blocking read return too
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  // srun turns SIGTERM into SIGKILL for its tasks but forwards SIGUSR1 as
  // it is: the cluster coordinator stops its agents with it.
  sigaction(SIGUSR1, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
}
}  // namespace

int main(int argc, char** argv) {
  using namespace lt;
  // `run`: the command's own status is ours once the reports are out
  // (128 + signal when it was killed), as time, perf record and nsys do.
  int command_status = 0;
  int file_status = 0;             // exit code of a live report's failed -o file (the report was printed)
  escape_controls_on_terminals();  // names from the target must not drive the terminal
  valid_utf8_on_std_streams();     // nor make the output invalid UTF-8
  try {
    g_agent = argc > 1 && std::string(argv[1]) == "agent";
    Options opts = parse_options(argc, argv);
    if (opts.help) {
      std::cout << usage_text();
      return 0;
    }
    if (opts.version) {
      std::cout << "ltrace-bpf 0.1.0 (event ABI " << LT_EVENT_ABI_VERSION << ")\n";
      return 0;
    }
    if (opts.command == Options::Command::ps) return run_ps(opts.verbose, std::cout, std::cerr);
    if (opts.command == Options::Command::cluster) {
      install_signals(true);
      cluster::ClusterOptions co;
      co.job_id = opts.slurm_job;
      co.out_dir = opts.output;
      co.nodes = opts.nodes;
      co.gather = opts.gather == "stream"   ? cluster::Gather::stream
                  : opts.gather == "shared" ? cluster::Gather::shared
                                            : cluster::Gather::automatic;
      co.agent_path = opts.agent_path;
      co.agent_args = opts.agent_args;
      co.duration_s = opts.duration_s;
      co.clock_host = opts.clock_addr;
      co.wait_s = opts.wait_s;
      co.verbose = opts.verbose;
      return cluster::run_cluster(co, g_stop);
    }
    if (opts.command == Options::Command::report && opts.merge) {
      MergeOptions mo;
      mo.ops = opts.wants_ops();
      mo.simple = opts.wants_report("simple");
      mo.reports = {opts.extended, opts.dirpath, opts.filename};
      mo.ops_table = {opts.sort_by, opts.row_limit, opts.group_by_input_shapes};
      mo.chrome_path = opts.chrome_path;
      mo.chrome_dir = opts.chrome_dir;
      mo.notes = cluster::manifest_notes(opts.input);
      write_merged_reports(read_merge_inputs(opts.input, mo.ops, {opts.schedule, true, opts.group_by_input_shapes}),
                           mo);
      return 0;
    }
    Trace trace;
    const bool exports = !opts.chrome_path.empty() || !opts.html_path.empty();
    ActionAggregator aggregator(exports);
    // Sees each record right after `aggregator`, which tells it the action
    // open on a sample's thread.
    StackAggregator stacks(aggregator, opts.full_stacks);
    OpAggregator ops(aggregator, {opts.schedule, exports, opts.group_by_input_shapes});
    GpuAggregator gpu(aggregator, exports);
    DeviceStatsAggregator devstats(aggregator);
    auto consume = [&](const lt_event_header& h, const std::byte* p) {
      aggregator.add(h, p);
      stacks.add(h, p);
      ops.add(h, p);
      gpu.add(h, p);
      devstats.add(h, p);
    };
    if (opts.command == Options::Command::report) {
      // Streamed: the aggregator sees each chunk's records; nothing else is
      // kept unless --dump asks for the whole stream.
      const bool keep = !opts.dump_path.empty();
      auto r = tracefile::read_trace_file(
          opts.input,
          [&](const lt_event_header& h, const std::byte* p) {
            consume(h, p);
            if (keep) trace.append(p, h.size);
          },
          [&](const tracefile::DamagedRange&) {
            // Nothing pairs across the gap: a start before it with a stop after it.
            aggregator.gap();
            stacks.gap();
          });
      for (auto& w : r.warnings) std::cerr << "ltrace-bpf: warning: " << opts.input << ": " << w << "\n";
      // Every report is still printed from what is intact; the exit code says data was lost.
      if (r.data_lost()) command_status = static_cast<int>(ExitCode::damaged_trace);
      if (opts.verbose) std::cerr << "ltrace-bpf: read " << r.records << " events in " << r.chunks << " chunk(s)\n";
    } else {
      install_signals(opts.command == Options::Command::agent);
      // The node agent: `record` that reports to the cluster coordinator on
      // stdout (user/cluster/agent_protocol.h).
      const bool agent = opts.command == Options::Command::agent;
      cluster::AgentOutput agent_out{opts.output, false};
      if (agent) {
        char host[256] = {};
        gethostname(host, sizeof host - 1);
        cluster::agent_say("hello", {{"host", host}, {"pid", std::to_string(getpid())}});
        agent_out = cluster::agent_output(opts.output, opts.shared_marker, opts.stream);
      }
      std::unique_ptr<Launch> launch;
      if (opts.command == Options::Command::run) {
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
      SessionOptions so{opts.pids, opts.all, opts.children, opts.duration_s, opts.verbose};
      so.gpu = opts.gpu;
      so.inject = opts.inject;
      so.launch_stacks = opts.launch_stacks;
      so.device_stats = opts.device_stats;
      if (launch) so.on_attached = [&launch] { launch->release(); };
      if (launch && !launch->injected().empty()) so.preloaded_bridge = find_bridge_library();
      so.output_path = agent_out.trace_path;
      if (agent) {
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
      so.sample_rate_hz = opts.effective_rate();
      so.off_cpu = opts.off_cpu;
      so.ops = opts.wants_ops();
      so.op_filters = opts.op_filters;
      so.shapes = opts.group_by_input_shapes;
      so.keep_in_memory = !opts.dump_path.empty();
      if (opts.command != Options::Command::record && !agent) so.sink = consume;
      std::vector<pid_t> existed;
      for (pid_t pid : opts.pids)
        if (proc::exists(pid)) existed.push_back(pid);
      bool attached = false;
      so.on_attached = [&attached, then = std::move(so.on_attached)] {
        attached = true;
        if (then) then();
      };
      Session session(so);
      try {
        session.prepare();
        trace = session.run(g_stop);
      } catch (const Error&) {
        if (!attached) rethrow_if_a_target_exited(existed);
        throw;
      }
      for (auto& n : session.notes()) std::cerr << "ltrace-bpf: " << n << "\n";
      if (launch) {
        const int rc = launch->wait();
        if (rc > 0) {
          std::cerr << "ltrace-bpf: the command exited with status " << rc << "\n";
          command_status = rc;
        }
      }
      const auto& st = session.stats();
      file_status = st.file_error_code;  // a live report's -o file failed: said when it did
      if (opts.all && st.traced == 0) {
        if (!st.found)
          throw Error(ExitCode::no_such_process, "--all: no process with torch or Lightning loaded was found");
        throw Error(static_cast<ExitCode>(st.first_refusal),
                    "--all: none of the " + std::to_string(st.found) + " process(es) found could be profiled");
      }
      if (agent) {
        for (const auto& c : st.clock_syncs)
          cluster::agent_say("clock", {{"phase", std::to_string(c.phase)},
                                       {"offset_ns", std::to_string(c.offset_ns)},
                                       {"delay_ns", std::to_string(c.delay_ns)},
                                       {"samples", std::to_string(c.samples)}});
        cluster::agent_say("done", {{"records", std::to_string(st.records)},
                                    {"bytes", std::to_string(st.file_bytes)},
                                    {"path", agent_out.stream ? std::string() : agent_out.trace_path},
                                    {"stream", agent_out.stream ? "1" : "0"}});
        if (agent_out.stream) {
          std::string why;
          if (!cluster::stream_trace_file(agent_out.trace_path, &why))
            throw Error(ExitCode::io, why + "; the trace is kept at " + agent_out.trace_path);
          std::remove(agent_out.trace_path.c_str());
        }
      }
      if (opts.verbose)
        std::cerr << "ltrace-bpf: attach latency " << st.attach_latency_ms << " ms, " << st.probes << " uprobe(s), "
                  << st.records << " events\n";
      if (opts.command == Options::Command::record || agent)
        std::cerr << "ltrace-bpf: recorded " << st.records << " events from " << st.processes << " process(es) to "
                  << agent_out.trace_path << " (" << st.file_bytes << " bytes); see it with: ltrace-bpf report "
                  << (agent_out.stream ? opts.output : agent_out.trace_path) << "\n";
    }
    if (opts.command != Options::Command::record && opts.command != Options::Command::agent) {
      ActionsReport rep = aggregator.finish();
      StacksReport stack_rep = stacks.finish();
      OpsReport ops_rep = ops.finish();
      GpuReport gpu_rep = gpu.finish();
      DeviceStatsReport dev_rep = devstats.finish();
      if (opts.wants_report("simple")) write_simple_reports(rep, {opts.extended, opts.dirpath, opts.filename});
      if (opts.wants_report("advanced"))
        write_advanced_reports(rep, stack_rep, {opts.extended, opts.dirpath, opts.filename},
                               opts.line_count_restriction);
      if (opts.wants_ops())
        write_ops_reports(rep, ops_rep, {opts.extended, opts.dirpath, opts.filename},
                          {opts.sort_by, opts.row_limit, opts.group_by_input_shapes});
      // GPU tables when asked, or by default whenever a target used CUDA.
      if (opts.wants_report("gpu") || (!opts.report_given && gpu_rep.any())) write_gpu_reports(rep, gpu_rep);
      if (!dev_rep.processes.empty()) std::cout << render_device_stats(dev_rep, {&rep, {}, 0}) << "\n";
      write_stack_exports(stack_rep, {opts.collapsed_path, opts.flamegraph_path, opts.speedscope_path});
      if (!opts.chrome_path.empty())
        write_output(opts.chrome_path, [&](std::ostream& f) {
          write_chrome_trace(rep, f, opts.wants_ops() ? &ops_rep : nullptr, &gpu_rep);
        });
      if (!opts.html_path.empty())
        write_output(opts.html_path, [&](std::ostream& f) {
          write_html_report(rep, opts.extended, f, &stack_rep, opts.wants_ops() ? &ops_rep : nullptr, &gpu_rep);
        });
    }
    if (!opts.dump_path.empty()) {
      if (opts.dump_path == "-" || opts.dump_path == "/dev/stdout") {
        dump_events(trace, std::cout);
      } else {
        OutputFile dump(opts.dump_path);
        dump_events(trace, dump.stream());
        dump.close();
      }
    }
    return file_status ? file_status : command_status;
  } catch (const Error& e) {
    std::cerr << "ltrace-bpf: " << e.what() << "\n";
    if (g_agent)
      lt::cluster::agent_say("failed", {{"code", std::to_string(static_cast<int>(e.code()))}, {"error", e.what()}});
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::cerr << "ltrace-bpf: internal error: " << e.what() << "\n";
    if (g_agent)
      lt::cluster::agent_say("failed", {{"code", "1"}, {"error", std::string("internal error: ") + e.what()}});
    return static_cast<int>(ExitCode::internal);
  }
}
