// The reports ltrace-bpf prints, as one table: what --report can name and
// its help, the probes each needs while recording, when each is printed and
// how. The option table (names, help, errors), the attach side's choice of
// sources, the live report, `report FILE` and the per-rank reports of
// `report DIR --merge` are loops over it, so a report added here is in all
// of them. Their aggregators are user/cli/aggregators.h's catalogue; the
// merged outputs of `report DIR --merge` (the cluster summary, merged
// traces and page) read actions, ops, GPU and comm (merge_output.cpp).
#pragma once
#include <span>
#include <string>
#include <string_view>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/comm.h"
#include "reports/aggregate/comm_stacks.h"
#include "reports/aggregate/compiles.h"
#include "reports/aggregate/device_stats.h"
#include "reports/aggregate/gc.h"
#include "reports/aggregate/gpu.h"
#include "reports/aggregate/loader_waits.h"
#include "reports/aggregate/logging_time.h"
#include "reports/aggregate/memory.h"
#include "reports/aggregate/nccl.h"
#include "reports/aggregate/ops.h"
#include "reports/aggregate/stacks.h"
#include "reports/aggregate/xla.h"
#include "reports/verdict/findings.h"
#include "user/cli/options.h"
#include "user/cli/report_output.h"
#include "user/collector/source_set.h"

namespace lt {

// Every aggregator's result over one record stream (ReportSet::finish).
struct ReportResults {
  ActionsReport actions;
  StacksReport stacks;
  OpsReport ops;
  CompilesReport compiles;
  GpuReport gpu;
  DeviceStatsReport device_stats;
  MemoryReport memory;
  CommReport comm;
  CommStacksReport comm_stacks;
  NcclReport nccl;
  XlaReport xla;
  GcReport gc;
  LoggingReport logging;
  LoaderWaitsReport loader_waits;
};

// The verdict's ranked findings from every aggregate: `--report verdict`
// prints them, the dashboard (--html) heads its page with them.
std::vector<Finding> verdict_findings(const ReportResults& r);

// The probes a report needs besides the action probes (ORed over the
// reports asked for; other options add their own).
using ReportSources = SourceSet;

struct ReportEntry {
  // --report NAME; empty: not chosen by name (printed when it has data or
  // its own option asks for it).
  std::string_view name;
  // What it prints, for --report's help ("NAME: HELP; ..."); "" unnamed.
  std::string_view help;
  ReportSources sources;
  // Printed for these options and results?
  bool (*printed)(const Options&, const ReportResults&);
  // Writes it: stdout, or Lightning's files under `out`.
  void (*write)(const Options&, const ReportResults&, const OutputOptions& out);
  // Its aggregates need every action's interval and the GPU slices kept
  // (they cost memory in proportion to the trace, so only when asked).
  bool keeps_intervals = false;
};

// In the order they print.
std::span<const ReportEntry> report_entries();
bool is_report_name(std::string_view name);
// "simple, advanced, ..." for messages.
std::string report_names_text();
// --report's help: every named report and what it prints, in order.
std::string report_help_text();
// The probes the reports in `opts.report` need.
ReportSources report_sources(const Options& opts);
// Whether one of them needs intervals kept.
bool reports_keep_intervals(const Options& opts);
// Every report printed for `opts`, in order.
void write_reports(const Options& opts, const ReportResults& results, const OutputOptions& out);

}  // namespace lt
