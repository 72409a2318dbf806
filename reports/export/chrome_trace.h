// Chrome / Perfetto trace in PyTorch profiler (kineto) conventions:
// complete "X" events with cat "user_annotation" for Lightning actions
// (nested per thread by time), process_name / thread_name metadata,
// distributedInfo for the rank, and ltrace-bpf's lost-event counts.
// Loads in Perfetto, chrome://tracing and Holistic Trace Analysis.
#pragma once
#include <ostream>

#include "reports/aggregate/actions.h"

namespace lt {
// Built from a report aggregated with keep_intervals = true.
void write_chrome_trace(const ActionsReport& rep, std::ostream& out);
}  // namespace lt
