// `report --why-step N`: one train step taken apart, for each process that
// has it. Watch's slow-step captures ask it for their trigger's step, so
// that the summary line names where that step's time went even when the
// outliers finding stays under its share (one 0.5 s step in a 70 s window
// of 7 ms steps is 0.7 % of the steps' time: no finding, yet the step the
// user is told about).
//
// The step's time against the recording's median train step, the part
// (steps.h: dataloader, step, backward, optimizer, hooks, other) furthest
// over that part's median, and the longest action of that part inside the
// step on the loop thread. Measured, not sampled: the actions' own times.
#pragma once
#include <cstdint>
#include <string>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/device_stats.h"

namespace lt {

// One line per process with train step `step` (as the job numbers it: a
// watch capture's steps from its STEP_BASE), "pid 7: ..."; none: empty.
// With `stats` (the /proc samples): the loop thread's wait for a CPU
// around the step, where samples bracket it closely (an audit: slow steps
// of a healthy fit on a loaded machine were taken apart with no word of
// the machine's load).
std::string explain_step(const ActionsReport& rep, std::int64_t step, const DeviceStatsReport* stats = nullptr);

// The block `report --why-step N` prints after the findings:
// "Train step N (--why-step)\n  pid 7: ...\n", or a line saying no
// process recorded it.
std::string render_step_causes(const ActionsReport& rep, std::int64_t step, const DeviceStatsReport* stats = nullptr);

}  // namespace lt
