// `--report steps`: Lightning's steps per process and stage as text, the
// numbers behind the dashboard's step charts (reports/aggregate/steps.h).
// A step runs from its fetch to its last batch hook; its time is split by
// the innermost action open at each instant. Every time here is measured
// from the action records (no sampling):
//
//   Steps (each batch of a stage from its fetch to its last hook, measured)
//
//   pid 4242 rank 0 (python)
//     stage  steps  p50 ms  p90 ms  p99 ms  max ms  slowest  spikes  dataloader  step  backward  optimizer  hooks other
//     train     32   9.812  12.001  14.250  14.250       17       1       12.1%  ...
//     (with CUDA records) stage  kernel  copy  GPU idle
//
// The parts are shares of the stage's summed step time; a spike is a step
// longer than median + max(3 MAD, 5% of the median).
#pragma once
#include <string>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/gpu.h"

namespace lt {

// `rep` aggregated with kept intervals (ActionAggregator(true)); `gpu` with
// kept slices, or null.
std::string render_steps_report(const ActionsReport& rep, const GpuReport* gpu);

}  // namespace lt
