#include "reports/aggregate/run_queue.h"

namespace lt {

std::size_t RunQueue::steps_within(const std::vector<StepRecord>& t) const {
  std::size_t n = 0;
  for (const auto& r : t) n += r.begin_ns >= from && r.end_ns <= to;
  return n;
}

RunQueue run_queue_around(const ProcessDeviceStats& stats, std::uint64_t begin_ns, std::uint64_t end_ns,
                          std::uint64_t near_ns) {
  const ProcessDeviceStats::Sched* a = nullptr;
  const ProcessDeviceStats::Sched* b = nullptr;
  for (const auto& x : stats.sched) {
    if (x.ts <= begin_ns) a = &x;
    if (x.ts >= end_ns && !b) b = &x;
  }
  if (!a || !b || begin_ns - a->ts > near_ns || b->ts - end_ns > near_ns || b->ts <= a->ts || b->runq_ns < a->runq_ns ||
      b->cpu_ns < a->cpu_ns)
    return {};
  return RunQueue{a->ts, b->ts, static_cast<double>(b->ts - a->ts), static_cast<double>(b->cpu_ns - a->cpu_ns),
                  static_cast<double>(b->runq_ns - a->runq_ns)};
}

RunQueue run_queue_in_steps(const ProcessActions& p, const std::vector<StepRecord>& t, std::uint32_t loop_tid,
                            const ProcessDeviceStats& stats) {
  if (loop_tid != p.meta.pid || stats.sched.size() < 2 || t.size() < 2) return {};
  const std::uint64_t from = t.front().begin_ns, to = t.back().end_ns;
  const ProcessDeviceStats::Sched* a = nullptr;
  const ProcessDeviceStats::Sched* b = nullptr;
  for (const auto& x : stats.sched) {
    if (x.ts < from || x.ts > to) continue;
    if (!a) a = &x;
    b = &x;
  }
  if (!a || !b || b->ts <= a->ts || b->runq_ns < a->runq_ns || b->cpu_ns < a->cpu_ns) return {};
  return RunQueue{a->ts, b->ts, static_cast<double>(b->ts - a->ts), static_cast<double>(b->cpu_ns - a->cpu_ns),
                  static_cast<double>(b->runq_ns - a->runq_ns)};
}

}  // namespace lt
