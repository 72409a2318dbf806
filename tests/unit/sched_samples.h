// /proc schedstat samples of a built process's loop thread (its first
// process), every ms over its train steps, `waiting` of each interval on
// the run queue: what the verdict's cpu contention and diff's cpu wait
// read (reports/aggregate/run_queue.h).
#pragma once
#include <cstdint>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/device_stats.h"
#include "reports/aggregate/steps.h"

namespace lt::testing_support {

inline DeviceStatsReport waiting_for_a_cpu(const ActionsReport& r, double waiting) {
  const auto& p = r.processes[0];
  const auto steps = step_records(p).train;
  DeviceStatsReport s;
  ProcessDeviceStats ps;
  ps.pid = p.meta.pid;
  std::uint64_t cpu = 0, runq = 0, last = steps.front().begin_ns;
  for (std::uint64_t ts = steps.front().begin_ns; ts <= steps.back().end_ns; ts += 1'000'000) {
    runq += static_cast<std::uint64_t>(waiting * static_cast<double>(ts - last));
    cpu += static_cast<std::uint64_t>((1 - waiting) * static_cast<double>(ts - last));
    last = ts;
    ps.sched.push_back({ts, cpu, runq});
  }
  s.processes.push_back(ps);
  return s;
}

}  // namespace lt::testing_support
