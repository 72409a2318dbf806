// Chrome / Perfetto traces of a merged job, in the kineto conventions of
// reports/export/chrome_trace.h, every timestamp on the plan's common clock
// (wall-clock microseconds; "baseTimeNanoseconds": 0).
//
//  * write_merged_trace: one file, one process group per rank: pid = the
//    rank's index (its rank), process_name "rank N (host, pid P)",
//    process_sort_index = the index; distributedInfo {rank 0, world_size N}.
//  * write_rank_trace: one rank alone (pid = its OS pid, as kineto writes),
//    distributedInfo.rank = its index.  Holistic Trace Analysis takes a
//    directory of these, one per rank: it finds a file's rank with the regex
//    "rank":\s+(\d+) on the first line that has it (hta/common/trace_file.py),
//    so distributedInfo is written first, on its own line, and nothing
//    before it says "rank".  HTA then shifts every rank by the same earliest
//    timestamp, which keeps our alignment.
//
// Lightning actions are "user_annotation" slices; op calls (when the inputs
// have OpsReports with intervals) "cpu_op" slices.  GPU rows are not merged.
#pragma once
#include <ostream>
#include <string>

#include "reports/cluster/merge.h"

namespace lt {

void write_merged_trace(const MergePlan& plan, std::ostream& out);
void write_rank_trace(const MergePlan& plan, std::size_t rank_position, std::ostream& out);
// "rank-<index>.json"
std::string rank_trace_filename(const RankRun& r);

}  // namespace lt
