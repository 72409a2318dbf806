// Chrome / Perfetto trace in PyTorch profiler (kineto) conventions:
// complete "X" events with cat "user_annotation" for Lightning actions
// and "cpu_op" for aten ops
// (nested per thread by time), process_name / thread_name metadata,
// distributedInfo for the rank, and ltrace-bpf's lost-event counts.
// Loads in Perfetto, chrome://tracing and Holistic Trace Analysis.
#pragma once
#include <ostream>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/ops.h"

namespace lt {
// Built from reports aggregated with keep_intervals = true.  With `ops`,
// every op call is a "cpu_op" slice (kineto's category); its end is an upper
// bound (args "end": "upper bound"): no probe sees an op return.
void write_chrome_trace(const ActionsReport& rep, std::ostream& out, const OpsReport* ops = nullptr);
}  // namespace lt
