// The HTML page's step timeline: one chosen step of a stage drawn at full
// resolution (actions nested by depth on their thread rows), zoomable and
// pannable.  The slices of a bounded set of steps (step_slices.h) are
// embedded as compact JSON in a <script type="application/json"> block; the
// page's script draws only the chosen step, into SVG, on demand.  With
// script off the section says so and the tables stay (docs/design-html.md).
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/gpu.h"
#include "reports/aggregate/memory.h"
#include "reports/aggregate/ops.h"
#include "reports/aggregate/step_slices.h"
#include "reports/aggregate/steps.h"

namespace lt {

// The timeline's style and script (once, in <head>, after the dashboard's).
void write_step_timeline_head(std::ostream& out);
// One section per stage of `s` with steps (train, validation, test,
// predict) for process `p` (nothing without any), sharing the process's
// budget; `id`: the process's chart prefix (process_chart_id), whose step
// charts' bars select the step drawn.
// `gpu`: kept slices (GpuAggregator(keep_slices)): the step's kernels and
// copies on stream rows; null: none.
// `ops`: kept op intervals (OpAggregator keep_intervals): the step's aten
// ops under the actions they ran in (step_op_slices); null: none.
// `window_origin_ns`: what `--window` counts from (attach_begin_ns of the
// recording; 0: unknown): validation/test/predict steps, which `--steps`
// does not count, then show their `--window` export command.
// `comm`: the process's kept c10d calls (CommAggregator keep_calls): ticks
// at their entries on a collectives row per thread; null: none.
// `also`: more training-step positions to embed while they fit, after the
// process's own (choose_timeline_steps: the merged page's other ranks');
// `budget_bytes`: the process's, shared by its stages.
// `mem`: kept allocator events (MemoryAggregator keep_events): instant
// markers on a memory row per thread (step_mem_marks); null: none.
void write_step_timeline(const ProcessActions& p, const ProcessSteps& s, const std::string& id, std::ostream& out,
                         const GpuReport* gpu = nullptr, const OpsReport* ops = nullptr,
                         const MemoryReport* mem = nullptr, const ProcessComm* comm = nullptr,
                         const std::vector<std::size_t>& also = {}, std::size_t budget_bytes = kTimelineBudgetBytes,
                         std::uint64_t window_origin_ns = 0);

}  // namespace lt
