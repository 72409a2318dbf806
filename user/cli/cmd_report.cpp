// `ltrace-bpf report FILE|-`: the reports from a trace file (no root, no
// BPF); `report DIR --merge`: several trace files as one job.
#include <algorithm>
#include <cstring>
#include <iostream>

#include "user/cli/builtin.h"
#include "user/cli/merge_output.h"
#include "user/cli/report_set.h"
#include "user/cluster/coordinator.h"
#include "user/core/errors.h"
#include "user/tracefile/trace_reader.h"

namespace lt {
namespace {

int merge_reports(const Options& opts) {
  MergeOptions mo;
  mo.ops = opts.wants_ops();
  mo.simple = opts.wants_report("simple");
  mo.reports = {opts.extended, opts.dirpath, opts.filename};
  mo.ops_table = {opts.sort_by,        opts.row_limit,    opts.group_by_input_shapes,
                  opts.profile_memory, opts.memory_bytes, opts.ops_records};
  mo.chrome_path = opts.chrome_path;
  mo.chrome_dir = opts.chrome_dir;
  mo.html_path = opts.html_path;
  mo.perfetto_path = opts.perfetto_path;
  mo.range = opts.export_range;
  mo.notes = cluster::manifest_notes(opts.input);
  // GPU slices kept only for the outputs that draw them.
  const bool traces = opts.wants_trace_export() || !mo.html_path.empty();
  write_merged_reports(read_merge_inputs(opts.input, mo.ops, {opts.schedule, true, opts.group_by_input_shapes}, traces),
                       mo);
  return 0;
}

}  // namespace

void check_report(Options& o) {
  if (o.input.empty()) throw Error(ExitCode::usage, "report needs a trace file: ltrace-bpf report FILE");
}

// Without --report, the reports the recording was made for (written by the
// recorder at attach; a trace older than that record prints Simple). Names
// this version does not know are left out; --report still wins.
static void take_recorded_reports(Options& opts, const lt_event_header& h, const std::byte* p) {
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

int cmd_report(Options& opts) {
  if (opts.merge) return merge_reports(opts);
  ReportSet reports(opts);
  // Streamed: the aggregators see each chunk's records; nothing else is
  // kept unless --dump asks for the whole stream.
  Trace trace;
  const bool keep = !opts.dump_path.empty();
  auto r = tracefile::read_trace_file(
      opts.input,
      [&](const lt_event_header& h, const std::byte* p) {
        if (h.kind == LT_EV_RECORDED_REPORTS && !opts.report_given) take_recorded_reports(opts, h, p);
        reports.add(h, p);
        if (keep) trace.append(p, h.size);
      },
      // Nothing pairs across the gap: a start before it with a stop after it.
      [&](const tracefile::DamagedRange&) { reports.gap(); });
  for (auto& w : r.warnings) std::cerr << "ltrace-bpf: warning: " << opts.input << ": " << w << "\n";
  if (opts.verbose) std::cerr << "ltrace-bpf: read " << r.records << " events in " << r.chunks << " chunk(s)\n";
  reports.write();
  if (keep) write_event_dump(trace, opts.dump_path);
  // Every report is still printed from what is intact; the exit code says data was lost.
  return r.data_lost() ? static_cast<int>(ExitCode::damaged_trace) : 0;
}

}  // namespace lt
