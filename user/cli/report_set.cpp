#include "user/cli/report_set.h"

#include <algorithm>
#include <cstring>
#include <iostream>

#include "reports/dump/event_dump.h"
#include "reports/export/chrome_trace.h"
#include "reports/export/html_report.h"
#include "reports/export/perfetto_trace.h"
#include "user/cli/prof_dump_output.h"
#include "user/cli/stack_output.h"
#include "user/core/output_file.h"

namespace lt {
namespace {
// Without --report, the reports the recording was made for (written by the
// recorder at attach; a trace older than that record prints Simple). Names
// this version does not know are left out; --report still wins.
void take_recorded_reports(Options& opts, const lt_event_header& h, const std::byte* p) {
  lt_recorded_reports_event r{};
  if (h.size < sizeof r) return;
  std::memcpy(&r, p, sizeof r);
  const std::string given(r.reports, strnlen(r.reports, sizeof r.reports));
  std::string known;
  for (std::size_t at = 0; at <= given.size();) {
    const std::size_t end = std::min(given.find(',', at), given.size());
    const std::string one = given.substr(at, end - at);
    if (is_report_name(one) && ("," + known + ",").find("," + one + ",") == std::string::npos)
      known += (known.empty() ? "" : ",") + one;
    at = end + 1;
  }
  if (!known.empty()) opts.report = known;
}

bool wants_exports(const Options& o) {
  return !o.chrome_path.empty() || !o.perfetto_path.empty() || !o.html_path.empty();
}
}  // namespace

ReportSet::ReportSet(const Options& opts)
    : opts_(opts),
      actions_(wants_exports(opts) || reports_keep_intervals(opts)),
      stacks_(actions_, opts.full_stacks),
      ops_(actions_, {opts.schedule, wants_exports(opts), opts.group_by_input_shapes}),
      gpu_(actions_, wants_exports(opts) || reports_keep_intervals(opts)),
      devstats_(actions_),
      memory_(actions_, {.keep_events = wants_exports(opts)}),
      comm_(actions_, {.keep_calls = wants_exports(opts)}),
      nccl_(actions_),
      compiles_(&actions_),
      xla_(actions_, wants_exports(opts)) {}

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
  xla_.add(h, p);
}

void ReportSet::gap() {
  actions_.gap();
  stacks_.gap();
  memory_.gap();
  comm_stacks_.gap();
  xla_.gap();
}

ReportResults ReportSet::finish() {
  ReportResults r;
  r.actions = actions_.finish();
  r.stacks = stacks_.finish();
  r.ops = ops_.finish();
  r.compiles = compiles_.finish();
  r.gpu = gpu_.finish();
  r.device_stats = devstats_.finish();
  r.memory = memory_.finish();
  r.comm = comm_.finish();
  r.comm_stacks = comm_stacks_.finish();
  r.nccl = nccl_.finish();
  r.xla = xla_.finish();
  return r;
}

void ReportSet::write() {
  const Options& o = opts_;
  const ReportResults res = finish();
  const ActionsReport& rep = res.actions;
  const StacksReport& stack_rep = res.stacks;
  const OpsReport& ops_rep = res.ops;
  const GpuReport& gpu_rep = res.gpu;
  const MemoryReport& mem_rep = res.memory;
  const CommReport& comm_rep = res.comm;
  write_reports(o, res, {o.extended, o.dirpath, o.filename});
  if (!o.dump_stats_dir.empty()) write_prof_dumps(rep, stack_rep, o.dump_stats_dir, o.filename);
  write_stack_exports(stack_rep, {o.collapsed_path, o.flamegraph_path, o.speedscope_path});
  // --steps/--window: the trace exports only (the reports above cover the attach).
  const RangeFilter range(o.export_range, rep);
  if (!range.everything())
    std::cerr << "ltrace-bpf: " << (range.matched_nothing() ? "warning: " : "") << "trace exports keep "
              << range.summary() << "\n";
  if (!o.chrome_path.empty())
    write_output(o.chrome_path, [&](std::ostream& f) {
      write_chrome_trace(rep, f, o.wants_ops() ? &ops_rep : nullptr, &gpu_rep, &mem_rep, &range, &res.xla);
    });
  if (!o.perfetto_path.empty())
    write_output(o.perfetto_path, [&](std::ostream& f) {
      const PerfettoStats st =
          write_perfetto_trace(rep, f, o.wants_ops() ? &ops_rep : nullptr, &gpu_rep, &mem_rep, &range, &res.xla);
      if (o.verbose)
        std::cerr << "ltrace-bpf: --perfetto: " << st.slices << " slices (" << st.cut_slices
                  << " cut at their parent's end to nest), " << st.counters << " counter values, " << st.packets
                  << " packets\n";
    });
  if (!o.html_path.empty())
    write_output(o.html_path, [&](std::ostream& f) {
      write_html_report(rep, o.extended, f, &stack_rep, o.wants_ops() ? &ops_rep : nullptr, &gpu_rep, &mem_rep,
                        &comm_rep, &res.xla);
    });
}

// Streams `path` through `reports` (built on `opts`, which may take the
// recorded report list). Nothing else is kept unless `keep` asks for the
// whole stream.
FileReports read_reports(const std::string& path, Options& opts, Trace* keep, bool warn) {
  FileReports out;
  // The aggregators are made once the report list is known: the recorder
  // writes it second, after HOST_INFO, and what a report keeps (intervals,
  // slices) depends on it. Records before it wait (at most that one).
  Trace early;
  auto reports = [&]() -> ReportSet& {
    if (!out.reports) {
      out.reports = std::make_unique<ReportSet>(opts);
      early.for_each([&](const lt_event_header& h, const std::byte* p) { out.reports->add(h, p); });
      early = Trace();
    }
    return *out.reports;
  };
  out.read = tracefile::read_trace_file(
      path,
      [&](const lt_event_header& h, const std::byte* p) {
        if (keep) keep->append(p, h.size);
        if (!out.reports && h.kind == LT_EV_HOST_INFO) {
          early.append(p, h.size);
          return;
        }
        if (h.kind == LT_EV_RECORDED_REPORTS && !opts.report_given) take_recorded_reports(opts, h, p);
        reports().add(h, p);
      },
      // Nothing pairs across the gap: a start before it with a stop after it.
      [&](const tracefile::DamagedRange&) { reports().gap(); });
  reports();  // an empty file still has its (empty) reports
  if (warn)
    for (auto& w : out.read.warnings) std::cerr << "ltrace-bpf: warning: " << path << ": " << w << "\n";
  return out;
}

// One rank's reports in a merge: `report FILE`'s, without its exports (the
// merge writes merged ones).
void write_rank_reports(const Options& opts, const std::string& file, const OutputOptions& out) {
  Options rank = opts;
  rank.chrome_path.clear();
  rank.perfetto_path.clear();
  rank.html_path.clear();
  rank.chrome_dir.clear();
  rank.collapsed_path.clear();
  rank.flamegraph_path.clear();
  rank.speedscope_path.clear();
  rank.dump_stats_dir.clear();
  auto read = read_reports(file, rank, nullptr, /*warn=*/false);  // warned once, when the merge read it
  write_reports(rank, read.reports->finish(), out);
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
