// The training loop thread's scheduling over a run of train steps, from the
// /proc schedstat samples (device stats: --device-stats, --report verdict,
// watch): how long it was runnable but waiting for a CPU. The verdict's cpu
// contention finding and diff's note on each side's wait read it.
#pragma once
#include <cstdint>
#include <vector>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/device_stats.h"
#include "reports/aggregate/steps.h"

namespace lt {

// The cumulative schedstat counters at the samples nearest inside the
// steps' span (the samples are of the main thread: the loop's when it runs
// there).
struct RunQueue {
  std::uint64_t from = 0, to = 0;      // the two samples' times
  double wall = 0, cpu = 0, wait = 0;  // ns between them: wall, on a CPU, on the run queue (wall 0: none)
  explicit operator bool() const { return wall > 0; }
  double share() const { return wall > 0 ? wait / wall : 0; }  // of the time, waiting for a CPU
  // Of its runnable time (on a CPU or waiting for one), waiting.
  double of_runnable() const { return cpu + wait > 0 ? wait / (cpu + wait) : 0; }
  // The steps of `t` wholly between the two samples.
  std::size_t steps_within(const std::vector<StepRecord>& t) const;
};

// The samples bracketing [begin_ns, end_ns] (the last at or before it, the
// first at or after it), each within `near_ns` of it: the wait around one
// step; none (wall 0) where no samples lie that close.
RunQueue run_queue_around(const ProcessDeviceStats& stats, std::uint64_t begin_ns, std::uint64_t end_ns,
                          std::uint64_t near_ns);

// `loop_tid`: the thread the loop ran on (none unless the main thread's).
RunQueue run_queue_in_steps(const ProcessActions& p, const std::vector<StepRecord>& t, std::uint32_t loop_tid,
                            const ProcessDeviceStats& stats);

}  // namespace lt
