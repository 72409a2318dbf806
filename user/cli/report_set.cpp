#include "user/cli/report_set.h"

#include <iostream>

#include "reports/comm/comm_report.h"
#include "reports/comm/comm_stacks_section.h"
#include "reports/comm/nccl_section.h"
#include "reports/dump/event_dump.h"
#include "reports/export/chrome_trace.h"
#include "reports/export/html_report.h"
#include "reports/export/perfetto_trace.h"
#include "reports/gpu/device_stats_report.h"
#include "reports/memory/memory_report.h"
#include "reports/ops/compile_section.h"
#include "user/cli/prof_dump_output.h"
#include "user/cli/report_output.h"
#include "user/cli/stack_output.h"
#include "user/core/output_file.h"

namespace lt {
namespace {
bool wants_exports(const Options& o) {
  return !o.chrome_path.empty() || !o.perfetto_path.empty() || !o.html_path.empty();
}
}  // namespace

ReportSet::ReportSet(const Options& opts)
    : opts_(opts),
      actions_(wants_exports(opts)),
      stacks_(actions_, opts.full_stacks),
      ops_(actions_, {opts.schedule, wants_exports(opts), opts.group_by_input_shapes}),
      gpu_(actions_, wants_exports(opts)),
      devstats_(actions_),
      memory_(actions_, {.keep_events = wants_exports(opts)}),
      comm_(actions_, {.keep_calls = wants_exports(opts)}),
      nccl_(actions_),
      compiles_(&actions_) {}

void ReportSet::add(const lt_event_header& h, const std::byte* p) {
  actions_.add(h, p);
  stacks_.add(h, p);
  ops_.add(h, p);
  gpu_.add(h, p);
  devstats_.add(h, p);
  memory_.add(h, p);
  comm_.add(h, p);
  nccl_.add(h, p);
  comm_stacks_.add(h, p);
  compiles_.add(h, p);
}

void ReportSet::gap() {
  actions_.gap();
  stacks_.gap();
  memory_.gap();
  comm_stacks_.gap();
}

void ReportSet::write() {
  const Options& o = opts_;
  ActionsReport rep = actions_.finish();
  StacksReport stack_rep = stacks_.finish();
  OpsReport ops_rep = ops_.finish();
  GpuReport gpu_rep = gpu_.finish();
  DeviceStatsReport dev_rep = devstats_.finish();
  MemoryReport mem_rep = memory_.finish();
  CommReport comm_rep = comm_.finish();
  const OutputOptions files{o.extended, o.dirpath, o.filename};
  if (o.wants_report("simple")) write_simple_reports(rep, files);
  if (o.wants_report("advanced")) write_advanced_reports(rep, stack_rep, files, o.line_count_restriction);
  if (!o.dump_stats_dir.empty()) write_prof_dumps(rep, stack_rep, o.dump_stats_dir, o.filename);
  if (o.wants_ops())
    write_ops_reports(
        rep, ops_rep, files,
        {o.sort_by, o.row_limit, o.group_by_input_shapes, o.profile_memory, o.memory_bytes, o.ops_records});
  // A compiled job's regions and recompilations: after its op tables (the
  // region rows come from the op probes; docs/design-compile.md).
  if (o.wants_ops()) {
    const CompilesReport comp = compiles_.finish();
    for (const auto& [pid, p] : comp.procs) std::cout << render_compile_section(pid, p, comp.window_begin_ns);
  }
  // GPU tables when asked, or by default whenever a target used CUDA.
  if (o.wants_report("gpu") || (!o.report_given && gpu_rep.any())) write_gpu_reports(rep, gpu_rep);
  if (o.wants_report("memory")) std::cout << render_memory_report(mem_rep, {&rep, o.row_limit}) << "\n";
  if (o.wants_report("comm")) {
    std::cout << render_comm_report(comm_rep, {&rep}) << "\n";
    if (auto st = render_comm_stacks(comm_stacks_.finish(), {&rep}); !st.empty()) std::cout << st << "\n";
    if (auto nc = render_nccl_section(nccl_.finish(), {&rep}); !nc.empty()) std::cout << nc << "\n";
  }
  if (!dev_rep.processes.empty()) std::cout << render_device_stats(dev_rep, {&rep, {}, 0}) << "\n";
  if (o.device_stats)
    if (auto cuda = render_cuda_memory_stats(mem_rep, {&rep}); !cuda.empty()) std::cout << cuda << "\n";
  write_stack_exports(stack_rep, {o.collapsed_path, o.flamegraph_path, o.speedscope_path});
  // --steps/--window: the trace exports only (the reports above cover the attach).
  const RangeFilter range(o.export_range, rep);
  if (!range.everything())
    std::cerr << "ltrace-bpf: " << (range.matched_nothing() ? "warning: " : "") << "trace exports keep "
              << range.summary() << "\n";
  if (!o.chrome_path.empty())
    write_output(o.chrome_path, [&](std::ostream& f) {
      write_chrome_trace(rep, f, o.wants_ops() ? &ops_rep : nullptr, &gpu_rep, &mem_rep, &range);
    });
  if (!o.perfetto_path.empty())
    write_output(o.perfetto_path, [&](std::ostream& f) {
      const PerfettoStats st =
          write_perfetto_trace(rep, f, o.wants_ops() ? &ops_rep : nullptr, &gpu_rep, &mem_rep, &range);
      if (o.verbose)
        std::cerr << "ltrace-bpf: --perfetto: " << st.slices << " slices (" << st.cut_slices
                  << " cut at their parent's end to nest), " << st.counters << " counter values, " << st.packets
                  << " packets\n";
    });
  if (!o.html_path.empty())
    write_output(o.html_path, [&](std::ostream& f) {
      write_html_report(rep, o.extended, f, &stack_rep, o.wants_ops() ? &ops_rep : nullptr, &gpu_rep, &mem_rep,
                        &comm_rep);
    });
}

void write_event_dump(const Trace& trace, const std::string& path) {
  if (path == "-" || path == "/dev/stdout") {
    dump_events(trace, std::cout);
    return;
  }
  OutputFile dump(path);
  dump_events(trace, dump.stream());
  dump.close();
}

}  // namespace lt
