// Each side's wait for a CPU inside its train steps (the loop thread
// runnable but not running: reports/aggregate/run_queue.h, from the /proc
// schedstat samples of --device-stats or --report verdict), and the note
// diff prints under its table: one run against one run on a shared machine
// differs by the load as much as by the code (an audit: the same job, B's
// loop waiting 30 % of its steps against A's 0.4 %, read as a +25 %
// regression with nothing said of the wait).
#pragma once
#include <cstddef>
#include <string>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/device_stats.h"
#include "reports/diff/step_diff.h"

namespace lt {

struct CpuWait {
  double wait_ns = 0, wall_ns = 0;  // between each process's two samples inside its steps
  std::size_t steps = 0;            // the steps between them
  bool known() const { return steps > 0 && wall_ns > 0; }
  double per_step_ms() const { return steps ? wait_ns / 1e6 / static_cast<double>(steps) : 0; }
  double share() const { return wall_ns > 0 ? wait_ns / wall_ns : 0; }
  CpuWait& operator+=(const CpuWait& o) {
    wait_ns += o.wait_ns, wall_ns += o.wall_ns, steps += o.steps;
    return *this;
  }
};

// Over every process of `rep` whose loop ran on its main thread and has
// schedstat samples inside its train steps.
CpuWait cpu_wait_in_steps(const ActionsReport& rep, const DeviceStatsReport& stats);

// The lines under diff's table ("" when neither side has samples). Where
// B's step moved and the wait moved the same way by at least half as much,
// says that this much of the shift is the wait: an estimate, and not
// necessarily another process's (the job's own threads can take its CPUs).
std::string render_cpu_wait(const CpuWait& a, const CpuWait& b, const StepDiff& d);

// The estimated share of B's step shift that is its extra wait for a CPU,
// in ms per step (0 when not known or not the same way).
double shift_in_cpu_wait_ms(const CpuWait& a, const CpuWait& b, const StepDiff& d);

}  // namespace lt
