// GPU work per Lightning action: the kernels, copies, launches and host
// waits each action caused (a kernel counts toward the action open on the
// thread that launched it).  A pure function: no I/O.
#pragma once
#include <string>
#include <vector>

#include "reports/aggregate/gpu.h"

namespace lt {

// Rows by kernel time, descending (launch count when there are no times).
// with_times: CUPTI gave GPU times; without (uprobe mode) only the counts of
// launches and syncs are shown.  "" when there are no rows.
std::string render_gpu_actions(std::vector<GpuActionRow> rows, bool with_times);

}  // namespace lt
