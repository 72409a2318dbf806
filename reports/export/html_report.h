// One self-contained HTML page (no network): per process the Simple table,
// an SVG timeline of actions per thread, nested by time, the lost-event
// counts, and, when stacks were sampled, an interactive flame graph per
// action (on-CPU, and off-CPU with --off-cpu; inline script, no external
// resources).  Hover a slice for its name and duration.
#pragma once
#include <ostream>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/gpu.h"
#include "reports/aggregate/ops.h"
#include "reports/aggregate/stacks.h"

namespace lt {
// Built from a report aggregated with keep_intervals = true.
// With `gpu`: per process the kernel, copy and NVTX summaries and the GPU
// work per action; op tables gain Self CUDA / CUDA total when joined.
void write_html_report(const ActionsReport& rep, bool extended, std::ostream& out, const StacksReport* stacks = nullptr,
                       const OpsReport* ops = nullptr, const GpuReport* gpu = nullptr);
}  // namespace lt
