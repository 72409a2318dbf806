#include "user/cli/report_set.h"

#include <algorithm>
#include <cstring>
#include <iostream>

#include "reports/dump/event_dump.h"
#include "reports/export/chrome_trace.h"
#include "reports/export/html_report.h"
#include "reports/export/perfetto_trace.h"
#include "user/cli/prof_dump_output.h"
#include "user/cli/report_registry.h"
#include "user/cli/stack_output.h"
#include "user/core/output_file.h"
#include "user/model/record_dispatch.h"
#include "user/text/utf8_text.h"

namespace lt {
namespace {
// Without --report, the reports the recording was made for (written by the
// recorder at attach; a trace older than that record prints Simple). Names
// this version does not know are left out; --report still wins.
void take_recorded_reports(Options& opts, const lt_event_header& h, const std::byte* p) {
  std::string given;
  visit_record(h, p, [&](const lt_event_header&, const lt_recorded_reports_event& r) {
    given.assign(r.reports, strnlen(r.reports, sizeof r.reports));
  });
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

// The trace exports: a file each, written after the reports, over the
// --steps/--window range.
struct ExportEntry {
  std::string Options::*path;
  void (*write)(const Options&, const ReportResults&, const RangeFilter&, std::ostream&);
};

const OpsReport* exported_ops(const Options& o, const ReportResults& r) {
  return o.wants_ops() ? &r.ops : nullptr;
}

constexpr ExportEntry kExports[] = {
    {&Options::chrome_path,
     [](const Options& o, const ReportResults& r, const RangeFilter& range, std::ostream& f) {
       write_chrome_trace(r.actions, f, exported_ops(o, r), &r.gpu, &r.memory, &range, &r.xla);
     }},
    {&Options::perfetto_path,
     [](const Options& o, const ReportResults& r, const RangeFilter& range, std::ostream& f) {
       const PerfettoStats st =
           write_perfetto_trace(r.actions, f, exported_ops(o, r), &r.gpu, &r.memory, &range, &r.xla);
       if (o.verbose)
         std::cerr << "ltrace-bpf: --perfetto: " << st.slices << " slices (" << st.cut_slices
                   << " cut at their parent's end to nest), " << st.counters << " counter values, " << st.packets
                   << " packets\n";
     }},
    {&Options::html_path,
     [](const Options& o, const ReportResults& r, const RangeFilter&, std::ostream& f) {
       const std::vector<Finding> findings = verdict_findings(r);
       write_html_report(r.actions, o.extended, f, &r.stacks, exported_ops(o, r), &r.gpu, &r.memory, &r.comm, &r.xla,
                         &findings);
     }},
};
}  // namespace

ReportSet::ReportSet(const Options& opts)
    : opts_(opts), actions_(aggregator_needs(opts).exports || aggregator_needs(opts).intervals) {
  aggregators_ = make_aggregators(opts, aggregator_needs(opts), actions_);
}

void ReportSet::add(const lt_event_header& h, const std::byte* p) {
  actions_.add(h, p);
  for (auto& a : aggregators_) a->add(h, p);
}

void ReportSet::gap() {
  actions_.gap();
  for (auto& a : aggregators_) a->gap();
}

ReportResults ReportSet::finish() {
  ReportResults r;
  r.actions = actions_.finish();
  for (auto& a : aggregators_) a->finish(r);
  return r;
}

void ReportSet::write() {
  const Options& o = opts_;
  const ReportResults res = finish();
  write_reports(o, res, {o.extended, o.dirpath, o.filename});
  if (!o.dump_stats_dir.empty()) write_prof_dumps(res.actions, res.stacks, o.dump_stats_dir, o.filename);
  write_stack_exports(res.stacks, {o.collapsed_path, o.flamegraph_path, o.speedscope_path});
  // --steps/--window: the trace exports only (the reports above cover the attach).
  const RangeFilter range(o.export_range, res.actions);
  if (!range.everything())
    std::cerr << "ltrace-bpf: " << (range.matched_nothing() ? "warning: " : "") << "trace exports keep "
              << range.summary() << "\n";
  for (const auto& e : kExports)
    if (const std::string& path = o.*e.path; !path.empty())
      write_output(path, [&](std::ostream& f) { e.write(o, res, range, f); });
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
        // What the recorder said on stderr about the recording: said again
        // (by report FILE, and for each rank of report DIR --merge).
        visit_record(h, p, [&](const lt_event_header&, const lt_note_event& e) {
          std::cerr << "ltrace-bpf: recorded: " << utf8_text(std::string(e.text, strnlen(e.text, sizeof e.text)))
                    << "\n";
        });
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
std::vector<Finding> write_rank_reports(const Options& opts, const std::string& file, const OutputOptions& out) {
  Options rank = opts;
  rank.findings_for_page = !opts.html_path.empty();
  rank.chrome_path.clear();
  rank.perfetto_path.clear();
  rank.html_path.clear();
  rank.chrome_dir.clear();
  rank.collapsed_path.clear();
  rank.flamegraph_path.clear();
  rank.speedscope_path.clear();
  rank.dump_stats_dir.clear();
  auto read = read_reports(file, rank, nullptr, /*warn=*/false);  // warned once, when the merge read it
  const ReportResults results = read.reports->finish();
  write_reports(rank, results, out);
  return rank.findings_for_page ? verdict_findings(results) : std::vector<Finding>{};
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
