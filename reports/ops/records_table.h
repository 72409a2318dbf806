// Lightning 2.x's shape of the op report (--ops-layout records): its
// PyTorchProfiler.summary() prints one key_averages() table over everything
// the profiler recorded, under "Profile stats for: records[ rank: N]".  Ours
// is the sum of the step-function tables (each step's ops, --schedule's
// active steps only when asked), so the per-step numbers and these add up.
#pragma once
#include <cstdint>
#include <vector>

#include "reports/aggregate/ops.h"

namespace lt {

struct RecordsTable {
  OpTableData table;                 // titled "records"
  std::uint64_t left_out_calls = 0;  // op calls of "outside step functions": in no step, not summed
};

// Rows keyed by (op, input shapes), calls and times summed, in the order
// each row first appears table by table.  A process with no step function
// has one table, already "records": it is returned as it is.
RecordsTable records_table(const std::vector<OpTableData>& tables);

}  // namespace lt
