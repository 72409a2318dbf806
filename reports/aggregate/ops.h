// aten ops per process, one table per step function (training_step,
// validation_step, test_step, predict_step) holding the ops of that stage's
// batches: a batch runs from its fetch to its last on_{stage}_batch_end hook
// (step_batches.h; docs/design-ops.md).  Ops in no batch get the table
// "outside step functions"; a process with no step functions gets one
// table, "records", for the whole attach window.
//
// Memory columns (MEM records, --profile-memory) are exact: each allocation
// or free is charged to the ops running on its thread, as torch.profiler's
// profile_memory=True charges them (docs/design-memory.md).
//
// Calls are exact (one OP record per entry, or one OP_SPAN per call).  CPU
// times are measured where the op observer ran in the job (OP_SPAN: each
// call's start, end and self, on its thread; a call counts in the window
// its start falls in); else sampled: a cpu-clock sample of a thread carries
// the ops running on it, outermost first; the innermost gets self time,
// each distinct op in it total time.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "reports/aggregate/actions.h"
#include "user/model/trace.h"

namespace lt {

struct OpRowData {
  std::string name;  // "aten::add"
  std::uint64_t calls = 0;
  std::uint64_t self_samples = 0, total_samples = 0;
  std::string input_shapes;  // grouped by input shapes: torch's "[[2, 3], []]"; else ""
  // GPU (CUPTI through the bridge; measured, not sampled): kernel time the
  // op launched itself (self) and with the ops it called (total); kernel
  // and copy rows have both equal to their duration.  CUDA runtime rows
  // ("cudaLaunchKernel") have a measured CPU time instead of samples.
  std::uint64_t self_cuda_ns = 0, cuda_total_ns = 0;
  std::uint64_t cpu_exact_ns = 0;
  // [pl][profile] rows (one per Lightning action, as PyTorchProfiler's
  // record_function around it): measured total, self less what ran inside.
  std::uint64_t record_self_ns = 0, record_total_ns = 0;
  // The op observer's measured times (OP_SPAN records): self and total of
  // every call, as torch.profiler's self_cpu_time_total / cpu_time_total.
  std::uint64_t measured_self_ns = 0, measured_total_ns = 0;
  bool device_row = false;  // a kernel / copy row: no CPU time
  // --profile-memory (MEM records; exact): bytes allocated minus freed
  // while the op ran (total: in it or the ops it called; self: in it alone),
  // CPU allocator and CUDA caching allocator apart.  torch's "[memory]" row
  // holds the allocations and frees made outside every op.
  std::int64_t cpu_mem = 0, self_cpu_mem = 0, cuda_mem = 0, self_cuda_mem = 0;

  // Adds the counts and times of the same op's row from another window (the
  // one place that knows every field: tables summed over steps use it).
  OpRowData& operator+=(const OpRowData& r) {
    calls += r.calls;
    self_samples += r.self_samples;
    total_samples += r.total_samples;
    self_cuda_ns += r.self_cuda_ns;
    cuda_total_ns += r.cuda_total_ns;
    cpu_exact_ns += r.cpu_exact_ns;
    record_self_ns += r.record_self_ns;
    record_total_ns += r.record_total_ns;
    measured_self_ns += r.measured_self_ns;
    measured_total_ns += r.measured_total_ns;
    device_row = device_row || r.device_row;
    cpu_mem += r.cpu_mem;
    self_cpu_mem += r.self_cpu_mem;
    cuda_mem += r.cuda_mem;
    self_cuda_mem += r.self_cuda_mem;
    return *this;
  }
};

struct OpTableData {
  std::string title;             // the step function's action name, "outside step functions" or "records"
  std::vector<OpRowData> rows;   // order of first call
  std::uint64_t steps = 0;       // batches summed into it (records: 1, outside step functions: 0)
  std::uint64_t samples = 0;     // samples of the process in those windows
  std::uint64_t in_probe = 0;    // ...of which in our own probes (not charged to ops)
  bool has_cuda = false;         // GPU records were joined into it
  bool has_memory = false;       // MEM records were charged into it
  bool has_cuda_memory = false;  // ...of a CUDA device
  // Calls the op probes counted, their times sampled: in a process the op
  // observer measured, those before it began (it began after the probes).
  std::uint64_t probe_calls = 0;
};

struct ProcessOps {
  std::uint32_t pid = 0;
  std::vector<OpTableData> tables;  // order of first step end
  std::uint64_t calls = 0;          // every op call seen
  std::uint64_t too_deep = 0;       // calls nested deeper than LT_OPS_DEPTH (counted, not nested)
  std::uint64_t skipped_steps = 0;  // windows left out by --schedule
  // Memory (MEM records): events seen, and CPU frees of an allocation made
  // before the attach (their size is unknown: counted, charged to nothing).
  std::uint64_t mem_events = 0, frees_unknown = 0;
  std::uint64_t mem_without_ops = 0;  // MEM records with no op stack (op probes off): not charged
  std::uint64_t ooms = 0;             // out-of-memory events
  // How its op times were had (OP_OBSERVER): measured by the op observer in
  // the job (every row's times exact), else sampled estimates; why the
  // observer was not used; calls it could not record.
  bool measured = false;
  std::string observer_not_used;
  std::uint64_t observer_dropped = 0, observer_too_deep = 0;
};

// A row's CPU times, nanoseconds: its samples x the period (sampled
// estimates), plus what was measured (CUPTI's runtime calls, [pl] records,
// the op observer's calls).  The text table and the dashboard both use it.
inline double op_self_ns(const OpRowData& r, std::uint64_t period_ns) {
  return double(r.self_samples) * double(period_ns) + double(r.cpu_exact_ns) + double(r.record_self_ns) +
         double(r.measured_self_ns);
}
inline double op_total_ns(const OpRowData& r, std::uint64_t period_ns) {
  return double(r.total_samples) * double(period_ns) + double(r.cpu_exact_ns) + double(r.record_total_ns) +
         double(r.measured_total_ns);
}
// A table's CPU times are sampled estimates unless the op observer timed
// every call in it.
inline bool op_table_estimated(const ProcessOps& po, const OpTableData& t) {
  return !po.measured || t.probe_calls > 0;
}

inline constexpr std::size_t kMaxOpIntervals = 4'000'000;  // ~160 MB of timeline at most

// One op call on the timeline (exports).  end_ns is an upper bound: the
// first moment the op was seen no longer running (next op entry or sample
// on its thread); no probe sees the return itself.
struct OpInterval {
  std::uint32_t pid, tid, op;
  std::uint16_t depth;
  std::uint64_t begin_ns, end_ns;
  // The op observer's call (its end measured, not the upper bound the op
  // probes give); a record_function() scope (torch.profiler's user annotation).
  bool measured = false, user_scope = false;
};

struct OpsReport {
  std::vector<ProcessOps> processes;    // processes with op calls, first-seen order
  std::vector<std::string> names;       // op index -> name ("" unknown)
  std::vector<OpInterval> intervals;    // kept only when asked, the first kMaxOpIntervals calls
  std::uint64_t intervals_dropped = 0;  // calls past that cap (not on any timeline)
  std::uint64_t period_ns = 0;          // sampling period (0: no samples, no times)
  unsigned rate_hz = 0;
  std::vector<std::string> notes;  // e.g. the default-schedule override warning
};

struct OpAggregatorOptions {
  bool schedule = false;  // Lightning's default: wait 1, warmup 1, active 3 per stage
  bool keep_intervals = false;
  bool group_by_shapes = false;  // rows per (op, input shapes) from OP_SHAPES records
};

// Add each record after `actions` has seen it (it tells which step ended).
class OpAggregator {
 public:
  OpAggregator(const ActionAggregator& actions, OpAggregatorOptions opts);
  ~OpAggregator();
  void add(const lt_event_header& h, const std::byte* record);
  OpsReport finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// The step function an action name ends with ("training_step", ...), or "".
std::string step_function_of(const std::string& action);

}  // namespace lt
