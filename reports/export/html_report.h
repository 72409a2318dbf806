// One self-contained HTML page (no network): per process the Simple table,
// an SVG timeline of actions per thread, nested by time, the lost-event
// counts, and, when stacks were sampled, an interactive flame graph per
// action (on-CPU, and off-CPU with --off-cpu; inline script, no external
// resources).  Hover a slice for its name and duration.
#pragma once
#include <ostream>
#include <string_view>
#include <vector>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/comm.h"
#include "reports/aggregate/gpu.h"
#include "reports/aggregate/memory.h"
#include "reports/aggregate/ops.h"
#include "reports/aggregate/stacks.h"
#include "reports/aggregate/xla.h"
#include "reports/verdict/findings.h"

namespace lt {
// Built from a report aggregated with keep_intervals = true.
// With `gpu`: per process the kernel, copy and NVTX summaries and the GPU
// work per action; op tables gain Self CUDA / CUDA total when joined.
// With `memory` (events kept): per process and device a timeline of live
// bytes (each point the maximum of its stretch of time, at most 2000 per
// device; CUDA: reserved bytes too) and the allocation totals.
// With `comm` (calls kept): the c10d calls in the step timelines.
// `findings`: the verdict's ranked findings, as `--report verdict` finds
// them from every aggregate (the page then says what the text says);
// without, those the actions, collectives and GPU records alone give.
// The style every page shares (the body, the tables' frame): a page's own sheet follows it.
std::string_view page_style();

void write_html_report(const ActionsReport& rep, bool extended, std::ostream& out, const StacksReport* stacks = nullptr,
                       const OpsReport* ops = nullptr, const GpuReport* gpu = nullptr,
                       const MemoryReport* memory = nullptr, const CommReport* comm = nullptr,
                       const XlaReport* xla = nullptr, const std::vector<Finding>* findings = nullptr);
}  // namespace lt
