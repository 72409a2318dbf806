// Chrome / Perfetto traces of a merged job, written by the one Chrome-trace
// writer (reports/export/chrome_trace.h, kineto conventions); this file only
// chooses what goes in: which process of which recording is each rank, its
// clock correction (every timestamp on the plan's common clock, wall-clock
// microseconds; "baseTimeNanoseconds": 0), and its labels.
//
//  * write_merged_trace: one file, one process group per rank: pid = the
//    rank's index (its rank), process_name "rank N (host, pid P)",
//    process_sort_index = the index; distributedInfo {rank 0, world_size N}.
//    Its GPU rows (when the inputs have GpuReports with slices): pid
//    1e9 + 64 * index + device (never a rank's pid), named
//    "GPU d (rank N)", sorted with the rank; its ac2g flow ids are its
//    correlation ids + 2^32 * its place among the ranks with GPU rows
//    (when several have some).
//  * write_rank_trace: one rank alone (pid = its OS pid, as kineto writes),
//    distributedInfo.rank = its index; its GPU rows as a single trace has
//    them (pid = device, flow id = correlation id).  Holistic Trace Analysis takes a
//    directory of these, one per rank: it finds a file's rank with the regex
//    "rank":\s+(\d+) on the first line that has it (hta/common/trace_file.py),
//    so distributedInfo is written first, on its own line, and nothing
//    before it says "rank".  HTA then shifts every rank by the same earliest
//    timestamp, which keeps our alignment.
//
// Lightning actions are "user_annotation" slices; op calls (when the inputs
// have OpsReports with intervals) "cpu_op" slices; kernels, copies, CUDA API
// calls, NVTX ranges and launch flows as `--chrome` writes them.  One rank's
// events equal the single trace's of its process, but for the pid, the
// process_name / labels / sort index and the clock correction.
//
// With an ExportRange (--steps/--window), each rank keeps what the range
// selects in its own recording: its own steps (indexed from its first), or
// seconds from its recording's attach (reports/export/export_range.h).
//  * write_merged_perfetto: the merged trace's document in Perfetto's
//    protobuf format (reports/export/perfetto_trace.h).
#pragma once
#include <ostream>
#include <string>

#include "reports/cluster/merge.h"
#include "reports/export/export_range.h"

namespace lt {

void write_merged_trace(const MergePlan& plan, std::ostream& out, const ExportRange& range = {});
void write_merged_perfetto(const MergePlan& plan, std::ostream& out, const ExportRange& range = {});
void write_rank_trace(const MergePlan& plan, std::size_t rank_position, std::ostream& out,
                      const ExportRange& range = {});
// "rank-<index>.json"
std::string rank_trace_filename(const RankRun& r);

}  // namespace lt
