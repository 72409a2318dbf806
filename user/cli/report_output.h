// Where reports go: stdout (byte-exact reports, one per process) or
// Lightning's files; notes (open actions, drops, hints) go to stderr so
// stdout stays byte-identical to Lightning's output.
#pragma once
#include <string>

#include "reports/advanced/advanced_report.h"
#include "reports/aggregate/actions.h"
#include "reports/aggregate/gpu.h"
#include "reports/aggregate/ops.h"
#include "reports/aggregate/stacks.h"

namespace lt {

struct OutputOptions {
  bool extended = true;
  std::string dirpath, filename;
};

// Returns the number of reports written.  Throws lt::Error(io).
int write_simple_reports(const ActionsReport& rep, const OutputOptions& out);
// The Advanced report of every process with stack samples.
int write_advanced_reports(const ActionsReport& rep, const StacksReport& stacks, const OutputOptions& out,
                           const LineRestriction& restriction);

struct OpsOutputOptions {
  std::string sort_by = "cpu_time_total";
  int row_limit = 20;
  bool input_shapes = false;
  bool profile_memory = false;  // --profile-memory: the memory columns (also shown when the trace has MEM records)
  bool memory_bytes = false;    // --memory-bytes: exact byte counts in the memory cells
  bool records = false;         // --ops-layout records: one "records" table summed over the steps
};
// PyTorchProfiler's report of every process with op calls: one "Profile
// stats for:" table per step function (or "records").
int write_ops_reports(const ActionsReport& rep, const OpsReport& ops, const OutputOptions& out,
                      const OpsOutputOptions& table);

// The GPU section per process with GPU records: nsys-style kernel, copy,
// API and NVTX summaries and the GPU work per action, on stdout; how the
// data was had (CUPTI, uprobes) and what is missing, on stderr.
int write_gpu_reports(const ActionsReport& rep, const GpuReport& gpu);

}  // namespace lt
