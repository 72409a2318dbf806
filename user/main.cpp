// ltrace-bpf: entry point.  Parses options, runs a live session, renders
// reports.  Every failure ends as one line on stderr and a documented exit
// code (see --help); nothing escapes as an abort or a stack dump.
#include <csignal>
#include <cstring>
#include <fstream>
#include <iostream>

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
#include "user/cli/report_output.h"
#include "user/cli/stack_output.h"
#include "user/collector/gpu_tracer.h"
#include "user/collector/session.h"
#include "user/core/errors.h"
#include "user/proc/job_discovery.h"
#include "user/tracefile/trace_reader.h"

namespace {
std::atomic<bool> g_stop{false};
void on_signal(int) {
  g_stop.store(true);
}

void install_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: let poll() return
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
}
}  // namespace

int main(int argc, char** argv) {
  using namespace lt;
  try {
    Options opts = parse_options(argc, argv);
    if (opts.help) {
      std::cout << usage_text();
      return 0;
    }
    if (opts.version) {
      std::cout << "ltrace-bpf 0.1.0 (event ABI " << LT_EVENT_ABI_VERSION << ")\n";
      return 0;
    }
    if (opts.command == Options::Command::report && opts.merge) {
      MergeOptions mo;
      mo.ops = opts.wants_ops();
      mo.simple = opts.wants_report("simple");
      mo.reports = {opts.extended, opts.dirpath, opts.filename};
      mo.ops_table = {opts.sort_by, opts.row_limit, opts.group_by_input_shapes};
      mo.chrome_path = opts.chrome_path;
      mo.chrome_dir = opts.chrome_dir;
      write_merged_reports(read_merge_inputs(opts.input, mo.ops, {opts.schedule, true, opts.group_by_input_shapes}), mo);
      return 0;
    }
    Trace trace;
    const bool exports = !opts.chrome_path.empty() || !opts.html_path.empty();
    ActionAggregator aggregator(exports);
    // Sees each record right after `aggregator`, which tells it the action
    // open on a sample's thread.
    StackAggregator stacks(aggregator);
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
      auto r = tracefile::read_trace_file(opts.input, [&](const lt_event_header& h, const std::byte* p) {
        consume(h, p);
        if (keep) trace.append(p, h.size);
      });
      for (auto& w : r.warnings) std::cerr << "ltrace-bpf: warning: " << opts.input << ": " << w << "\n";
      if (opts.verbose) std::cerr << "ltrace-bpf: read " << r.records << " events in " << r.chunks << " chunk(s)\n";
    } else {
      install_signals();
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
        auto found = proc::find_job_processes(opts.job_env, &why);
        if (found.empty()) throw Error(ExitCode::no_such_process, "--job-env: " + why);
        opts.pids.insert(opts.pids.end(), found.begin(), found.end());
        if (opts.verbose) std::cerr << "ltrace-bpf: --job-env: " << found.size() << " process(es) of the job here\n";
      }
      SessionOptions so{opts.pids, opts.children, opts.duration_s, opts.verbose};
      so.gpu = opts.gpu;
      so.inject = opts.inject;
      so.launch_stacks = opts.launch_stacks;
      so.device_stats = opts.device_stats;
      if (launch) so.on_attached = [&launch] { launch->release(); };
      if (launch && !launch->injected().empty()) so.preloaded_bridge = find_bridge_library();
      so.output_path = opts.output;
      so.sample_rate_hz = opts.effective_rate();
      so.off_cpu = opts.off_cpu;
      so.ops = opts.wants_ops();
      so.op_filters = opts.op_filters;
      so.shapes = opts.group_by_input_shapes;
      so.keep_in_memory = !opts.dump_path.empty();
      if (opts.command != Options::Command::record) so.sink = consume;
      Session session(so);
      session.prepare();
      trace = session.run(g_stop);
      for (auto& n : session.notes()) std::cerr << "ltrace-bpf: " << n << "\n";
      if (launch) {
        const int rc = launch->wait();
        if (rc > 0) std::cerr << "ltrace-bpf: the command exited with status " << rc << "\n";
      }
      const auto& st = session.stats();
      if (opts.verbose)
        std::cerr << "ltrace-bpf: attach latency " << st.attach_latency_ms << " ms, " << st.probes << " uprobe(s), "
                  << st.records << " events\n";
      if (opts.command == Options::Command::record)
        std::cerr << "ltrace-bpf: recorded " << st.records << " events from " << st.processes << " process(es) to "
                  << opts.output << " (" << st.file_bytes << " bytes); see it with: ltrace-bpf report " << opts.output
                  << "\n";
    }
    if (opts.command != Options::Command::record) {
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
      auto write_file = [](const std::string& path, auto&& writer) {
        std::ofstream f(path, std::ios::binary);
        writer(f);
        if (!f.flush()) throw Error(ExitCode::io, "cannot write " + path);
        std::cerr << "ltrace-bpf: wrote " << path << "\n";
      };
      if (!opts.chrome_path.empty())
        write_file(opts.chrome_path,
                   [&](std::ostream& f) { write_chrome_trace(rep, f, opts.wants_ops() ? &ops_rep : nullptr, &gpu_rep); });
      if (!opts.html_path.empty())
        write_file(opts.html_path, [&](std::ostream& f) {
          write_html_report(rep, opts.extended, f, &stack_rep, opts.wants_ops() ? &ops_rep : nullptr, &gpu_rep);
        });
    }
    if (!opts.dump_path.empty()) {
      std::ofstream dump(opts.dump_path);
      dump_events(trace, dump);
      if (!dump) throw Error(ExitCode::io, "cannot write " + opts.dump_path);
    }
    return 0;
  } catch (const Error& e) {
    std::cerr << "ltrace-bpf: " << e.what() << "\n";
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::cerr << "ltrace-bpf: internal error: " << e.what() << "\n";
    return static_cast<int>(ExitCode::internal);
  }
}
