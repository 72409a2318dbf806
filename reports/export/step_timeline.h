// The HTML page's step timeline: one chosen training step drawn at full
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
#include "reports/aggregate/step_slices.h"
#include "reports/aggregate/steps.h"

namespace lt {

// The timeline's style and script (once, in <head>, after the dashboard's).
void write_step_timeline_head(std::ostream& out);
// The training steps of `s` for process `p` (nothing without any); `id`: the
// process's chart prefix (process_chart_id), whose step charts' bars select
// the step drawn.
// `gpu`: kept slices (GpuAggregator(keep_slices)): the step's kernels and
// copies on stream rows; null: none.
// `also`: more step positions to embed while they fit the budget, after the
// process's own (choose_timeline_steps); `budget_bytes`: of its embedded slices.
void write_step_timeline(const ProcessActions& p, const ProcessSteps& s, const std::string& id, std::ostream& out,
                         const GpuReport* gpu = nullptr, const std::vector<std::size_t>& also = {},
                         std::size_t budget_bytes = kTimelineBudgetBytes);

}  // namespace lt
