#include "reports/diff/cpu_wait.h"

#include <cmath>
#include <cstdio>

#include "reports/aggregate/run_queue.h"
#include "reports/aggregate/steps.h"

namespace lt {

CpuWait cpu_wait_in_steps(const ActionsReport& rep, const DeviceStatsReport& stats) {
  CpuWait w;
  for (const auto& p : rep.processes) {
    const ProcessDeviceStats* mine = nullptr;
    for (const auto& s : stats.processes)
      if (s.pid == p.meta.pid) mine = &s;
    if (!mine) continue;
    const ProcessSteps s = step_records(p);
    const RunQueue rq = run_queue_in_steps(p, s.train, s.tid, *mine);
    const std::size_t n = rq ? rq.steps_within(s.train) : 0;
    if (!n) continue;
    w += CpuWait{rq.wait, rq.wall, n};
  }
  return w;
}

double shift_in_cpu_wait_ms(const CpuWait& a, const CpuWait& b, const StepDiff& d) {
  const DiffRow* step = d.step();
  if (!step || !a.known() || !b.known()) return 0;
  const double shift_ms = step->test.shift * 1e3, moved = b.per_step_ms() - a.per_step_ms();
  if (shift_ms == 0 || moved * shift_ms <= 0 || std::fabs(moved) < 0.5 * std::fabs(shift_ms)) return 0;
  return std::fabs(moved) > std::fabs(shift_ms) ? shift_ms : moved;
}

std::string render_cpu_wait(const CpuWait& a, const CpuWait& b, const StepDiff& d) {
  if (!a.known() && !b.known()) return "";
  auto side = [](const char* name, const CpuWait& w) {
    char s[160];
    if (!w.known())
      std::snprintf(s, sizeof s, "%s not known (no /proc samples in its steps: record with --report verdict)", name);
    else
      std::snprintf(s, sizeof s, "%s %.2f ms per train step (%.1f%% of its steps' time)", name, w.per_step_ms(),
                    100 * w.share());
    return std::string(s);
  };
  std::string out =
      "cpu wait (the training loop runnable but waiting for a CPU; /proc schedstat samples): " + side("A", a) + ", " +
      side("B", b) + "\n";
  if (const double in_wait = shift_in_cpu_wait_ms(a, b, d)) {
    const double shift_ms = d.step()->test.shift * 1e3, moved = b.per_step_ms() - a.per_step_ms();
    char s[480];
    if (in_wait == shift_ms)
      std::snprintf(s, sizeof s, "  all of B's step shift (%+.2f ms) is within that wait's change (%+.2f ms per step)",
                    shift_ms, moved);
    else
      std::snprintf(s, sizeof s, "  an estimated %+.2f ms of B's step shift (%+.2f ms) is that wait", in_wait,
                    shift_ms);
    out += std::string(s) +
           ", not time on a CPU: other processes, or the job's own threads, took its CPUs (`report --report "
           "verdict` on each side says which)\n";
  }
  return out;
}

}  // namespace lt
