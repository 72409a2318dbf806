// `ltrace-bpf report FILE|-`: the reports from a trace file (no root, no
// BPF); `report DIR --merge`: several trace files as one job, each file's
// own reports first, as `report FILE` prints them.
#include <algorithm>
#include <filesystem>
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
  mo.rank_reports = [&opts](const std::string& file, const OutputOptions& out) {
    return write_rank_reports(opts, file, out);
  };
  mo.reports = {opts.extended, opts.dirpath, opts.filename};
  mo.chrome_path = opts.chrome_path;
  mo.chrome_dir = opts.chrome_dir;
  mo.html_path = opts.html_path;
  mo.perfetto_path = opts.perfetto_path;
  mo.range = opts.export_range;
  mo.notes = cluster::manifest_notes(opts.input);
  // Op and GPU slices kept only for the outputs that draw them.
  const bool traces = opts.wants_trace_export() || !mo.html_path.empty();
  const auto inputs =
      read_merge_inputs(opts.input, opts.wants_ops(), {opts.schedule, true, opts.group_by_input_shapes}, traces);
  write_merged_reports(inputs, mo);
  // Every report is still printed from what is intact; the exit code says data was lost.
  const bool lost = std::any_of(inputs.begin(), inputs.end(), [](const MergeInput& in) { return in.damaged; });
  return lost ? static_cast<int>(ExitCode::damaged_trace) : 0;
}

}  // namespace

void check_report(Options& o) {
  if (o.input.empty()) throw Error(ExitCode::usage, "report needs a trace file: ltrace-bpf report FILE");
  // A watch capture's directory: its trace (an audit: exit 8, "is a
  // directory", for the directory the summary line names).
  std::error_code ec;
  if (!o.merge && std::filesystem::is_directory(o.input, ec)) {
    const std::string capture = o.input + "/trace.ltrace";
    if (std::filesystem::is_regular_file(capture, ec)) {
      o.input = capture;
    } else {
      throw Error(ExitCode::io, "cannot read " + o.input +
                                    ": it is a directory, not a trace file (Is a directory): no watch capture's "
                                    "trace.ltrace in it; a cluster recording's traces are read with --merge");
    }
  }
}

int cmd_report(Options& opts) {
  if (opts.merge) return merge_reports(opts);
  Trace trace;
  const bool keep = !opts.dump_path.empty();
  auto [r, reports] = [&] {
    try {
      return read_reports(opts.input, opts, keep ? &trace : nullptr, /*warn=*/true);
    } catch (const Error& e) {
      // Which file (an audit: "not an ltrace-bpf trace file (bad magic)",
      // of what?), as diff says it.
      const std::string what = e.what();
      if (opts.input == "-" || what.find(opts.input) != std::string::npos) throw;
      throw Error(e.code(), opts.input + ": " + what);
    }
  }();
  if (opts.verbose) std::cerr << "ltrace-bpf: read " << r.records << " events in " << r.chunks << " chunk(s)\n";
  reports->write();
  if (keep) write_event_dump(trace, opts.dump_path);
  // Every report is still printed from what is intact; the exit code says data was lost.
  return r.data_lost() ? static_cast<int>(ExitCode::damaged_trace) : 0;
}

}  // namespace lt
