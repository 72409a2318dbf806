// `report DIR --merge`: the per-rank reports, the cluster summary and the
// merged traces of several trace files (reports/cluster/), delivered like
// report_output.h does: reports on stdout or under --dirpath, notes on
// stderr, files written with a "wrote" note.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "reports/cluster/cluster_summary.h"
#include "reports/cluster/merge.h"
#include "reports/export/export_range.h"
#include "reports/verdict/findings.h"
#include "user/cli/report_output.h"

namespace lt {

struct MergeOptions {
  // Writes one file's reports, as `report FILE` does (cmd_report.cpp), and
  // returns its verdict findings (the merged page's); none when empty.
  // `reports` says where; with --dirpath and several hosts each host's go
  // to DIRPATH/<host>/ (Lightning names the files by local rank, which
  // repeats across nodes).
  std::function<std::vector<Finding>(const std::string& file, const OutputOptions& out)> rank_reports;
  OutputOptions reports;
  std::string chrome_path;    // --chrome FILE: the merged trace
  std::string chrome_dir;     // --chrome-dir DIR: rank-<N>.json per rank (HTA's input)
  std::string html_path;      // --html FILE: the merged dashboard
  std::string perfetto_path;  // --perfetto FILE: the merged trace in Perfetto's format
  ExportRange range;          // --steps/--window: what the trace exports keep (per rank)
  // host name -> ns added to its wall clock (the cluster agent's measurement)
  std::map<std::string, std::int64_t> measured_offsets_ns;
  bool estimate_clock = true;  // refine hosts without a measurement from the collectives
  ClusterSummaryOptions summary;
  std::vector<std::string> notes;  // added to the summary's notes (the cluster manifest's failed nodes)
};

// Returns the number of ranks merged.  Throws lt::Error(io).
int write_merged_reports(const std::vector<MergeInput>& files, const MergeOptions& opt);

// rank-<N>.json for every rank under `dir` (created); returns the paths.
std::vector<std::string> write_rank_traces(const MergePlan& plan, const std::string& dir,
                                           const ExportRange& range = {});

// The trace files under `dir` (recursively, by their magic), sorted by path.
// Throws lt::Error(io) when `dir` cannot be read.
std::vector<std::string> trace_files_in(const std::string& dir);

// Reads and aggregates every trace file of `path` (a directory, or one
// file), each on its own, intervals kept; with `ops`, op tables and slices
// too; with `gpu_slices`, GPU slices (for the merged Chrome traces).  Reader
// warnings go to stderr; nothing pairs across a damaged stretch, and the
// input says it was damaged.  Throws lt::Error(io) when there is no trace file,
// lt::Error(bad_trace) as the reader does.
std::vector<MergeInput> read_merge_inputs(const std::string& path, bool ops, OpAggregatorOptions op_options = {},
                                          bool gpu_slices = false);

}  // namespace lt
