// Which steps the HTML page's step timeline embeds, and each one's slices.
//
// The page draws one chosen step at full resolution, but embeds the slices
// of a bounded set of steps only, so a 1-hour run's page stays light: the
// slowest (the worst spikes first), then the median step, the first and the
// last, in that priority, while the estimated bytes of their actions and
// GPU work fit a budget; then, in the same order, their aten ops and
// allocator events in what is left, thinned when they do not fit
// (docs/design-html.md, "Step timeline").
//
// Pure functions of the kept intervals (ActionAggregator(keep_intervals)),
// op calls (OpAggregator keep_intervals) and memory events (keep_events).
#pragma once
#include <cstdint>
#include <vector>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/comm.h"
#include "reports/aggregate/gpu.h"
#include "reports/aggregate/memory.h"
#include "reports/aggregate/ops.h"
#include "reports/aggregate/steps.h"

namespace lt {

inline constexpr std::size_t kTimelineSlowest = 20;                   // the slowest steps embedded
inline constexpr std::size_t kTimelineBudgetBytes = 2 * 1024 * 1024;  // all embedded slices of a process
inline constexpr std::size_t kTimelineSliceBytes = 40;                // estimate of one slice's JSON ("[n,t,b,e,d],")

// One action inside a step: on its thread, nested `depth` deep among the
// step's actions of that thread; times are ns from the step's begin.
struct StepSlice {
  std::uint32_t action = 0;  // index into ProcessActions::actions
  std::uint32_t tid = 0;
  std::uint64_t begin_ns = 0, end_ns = 0;
  std::uint32_t depth = 0;
  std::uint32_t level = 0;  // ops only: nesting among the step's ops of its thread (0: outermost drawn)
};

// The actions of `p` that lie wholly inside [begin_ns, end_ns] (any thread),
// ordered by thread, then begin (the enclosing first), with their depths.
// `by_begin`: p.intervals' indexes sorted by begin (sorted_by_begin).
std::vector<std::size_t> sorted_by_begin(const ProcessActions& p);
std::vector<StepSlice> step_slices(const ProcessActions& p, const std::vector<std::size_t>& by_begin,
                                   std::uint64_t begin_ns, std::uint64_t end_ns);

// The kernels, copies and sets of process `pid`, by begin, and the longest
// one (so a step's overlapping work is found by a binary search).
struct GpuWork {
  std::vector<const GpuSlice*> by_begin;
  std::uint64_t longest = 0;
};
GpuWork gpu_work_of(const GpuReport& gpu, std::uint32_t pid);
// That work overlapping [begin_ns, end_ns], clipped to it (ns from begin),
// `tid` the stream and `action` the index into GpuReport::names; by stream,
// then begin, with depths per stream (concurrent work on one stream stacks).
std::vector<StepSlice> step_gpu_slices(const GpuWork& w, std::uint64_t begin_ns, std::uint64_t end_ns);

// The aten op calls of process `pid` (OpsReport::intervals, kept with
// keep_intervals), by begin.
struct OpWork {
  std::vector<const OpInterval*> by_begin;
};
OpWork op_work_of(const OpsReport& ops, std::uint32_t pid);
// How many of those calls begin inside [begin_ns, end_ns) (a binary search).
std::size_t step_op_count(const OpWork& w, std::uint64_t begin_ns, std::uint64_t end_ns);
// The op calls beginning inside [begin_ns, end_ns), `action` the index into
// OpsReport::names, ns from begin.  An op's end is an upper bound (the next
// op entry or sample that saw it gone; no probe sees a return), so it is
// clipped to the step's end and to the first boundary (begin or end) on its
// thread of the step's `actions` (step_slices of the same step) after its
// begin: ops are called from Python, and return before that code opens or
// closes the next Lightning action.  Each op then lies in one stretch of
// the innermost action containing its begin, and its depth is that action's
// depth + 1 (0 with none) + `level`, its nesting among the step's ops of
// the thread: the rows below the action it runs in.  By thread, then begin.
// An op that began before the step (its enclosing run-level op, or the
// previous step's last) is not the step's: not returned.
std::vector<StepSlice> step_op_slices(const OpWork& w, const std::vector<StepSlice>& actions, std::uint64_t begin_ns,
                                      std::uint64_t end_ns);
// At most `cap` of `ops` (step_op_slices), for the page budget: the
// outermost first (level 0: the calls Python made, then what they called),
// the longest first within a level, so every op kept has its caller kept;
// by thread, then begin, again.
std::vector<StepSlice> thin_ops(std::vector<StepSlice> ops, std::size_t cap);

// Allocator events (MemoryReport kept events, --profile-memory) as instant
// markers: the process's, by time.
struct MemWork {
  std::vector<const MemEvent*> by_ts;
};
MemWork mem_work_of(const MemoryReport& mem, std::uint32_t pid);
std::size_t step_mem_count(const MemWork& w, std::uint64_t begin_ns, std::uint64_t end_ns);
struct StepMark {
  std::uint32_t tid = 0;
  std::uint64_t t_ns = 0;  // from the step's begin
  std::int64_t bytes = 0;  // > 0 allocated, < 0 freed, 0 size unknown
  std::uint8_t flags = 0;  // kMarkCuda, kMarkOom
};
inline constexpr std::uint8_t kMarkCuda = 1, kMarkOom = 2;
// The events in [begin_ns, end_ns), at most `cap` of them: out-of-memory
// events first, then the largest |bytes| first; by thread, then time.
std::vector<StepMark> step_mem_marks(const MemWork& w, std::uint64_t begin_ns, std::uint64_t end_ns, std::size_t cap);

// c10d calls (CommAggregator keep_calls) as instant markers at their entry:
// the process's, by time.
struct CommWork {
  std::vector<const CommCall*> by_ts;
};
CommWork comm_work_of(const ProcessComm& comm);
std::size_t step_comm_count(const CommWork& w, std::uint64_t begin_ns, std::uint64_t end_ns);
// The calls entered in [begin_ns, end_ns), the first `cap` of them, by time.
std::vector<const CommCall*> step_comm_marks(const CommWork& w, std::uint64_t begin_ns, std::uint64_t end_ns,
                                             std::size_t cap);

// Step positions in embedding priority: the `slowest` longest (longest
// first), the median (nearest rank), the first and the last; no repeats.
std::vector<std::size_t> timeline_priority(const std::vector<StepRecord>& steps, std::size_t slowest);

struct TimelineChoice {
  std::vector<std::size_t> steps;     // positions chosen, ascending
  std::size_t default_step = 0;       // the slowest step's position (drawn first)
  std::size_t slice_cap = 0;          // slices kept of the default step when it alone is over budget (0: all)
  std::size_t left_out = 0;           // prioritised steps left out for the budget
  std::vector<std::size_t> priority;  // the positions chosen, in priority order (the default first)
  std::size_t used_bytes = 0;         // estimated bytes of the chosen steps' slices (capped at the budget)
};
// `slice_counts[i]`: how many slices step i has.  Steps are taken in
// priority while their estimated bytes fit `budget_bytes`; the slowest is
// always taken, cut to the budget if it alone exceeds it.  `also`: step
// positions to take after those, in that order, while they fit (the merged
// page: the steps the other ranks embed, so one choice draws on every rank).
TimelineChoice choose_timeline_steps(const std::vector<StepRecord>& steps, const std::vector<std::size_t>& slice_counts,
                                     std::size_t budget_bytes = kTimelineBudgetBytes,
                                     std::size_t slowest = kTimelineSlowest, const std::vector<std::size_t>& also = {});
// Ops come after the steps are chosen (their actions and GPU work): in
// priority order each chosen step keeps what fits of its `op_counts[i]`
// ops in the bytes still left of `budget_bytes` (thin_ops picks which).
// The result, by step position: ops kept (0 for a step not chosen).
std::vector<std::size_t> timeline_op_caps(const TimelineChoice& c, const std::vector<std::size_t>& op_counts,
                                          std::size_t budget_bytes = kTimelineBudgetBytes);
// The same sharing of `slices_left` slices (what the ops left, for the
// memory markers), in `c.priority` order.
std::vector<std::size_t> share_in_priority(const TimelineChoice& c, const std::vector<std::size_t>& counts,
                                           std::size_t slices_left);

}  // namespace lt
