// The verdict's GPU findings (docs/design-diff.md, "Findings"): the
// training loop waiting for the device (host-device synchronisation) and
// the device waiting for the loop (GPU idle, launch-bound), from the CUPTI
// records of a process's train steps.
#pragma once
#include <vector>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/gpu.h"
#include "reports/aggregate/steps.h"
#include "reports/verdict/findings.h"

namespace lt {

inline constexpr double kHostSync = 0.05, kGpuIdle = 0.20;
// Launch-bound: this many kernels per step or more, half of them shorter than this.
inline constexpr double kLaunchBoundKernels = 100, kLaunchBoundMedianUs = 20;

// `s`: the process's steps with their GPU parts (step_records(p, &gpu));
// `gpu`: its kept slices.  Adds nothing without GPU records.
void gpu_findings(const ProcessActions& p, const ProcessSteps& s, const GpuReport& gpu, std::vector<Finding>& out);

}  // namespace lt
