// The clocks we read: CLOCK_MONOTONIC (the BPF records' ktime) and
// CLOCK_REALTIME (wall time: trace headers, the clock exchange, captures'
// names), in nanoseconds. One place, so that every reader converts alike.
#pragma once
#include <time.h>

#include <cstdint>

namespace lt {

inline std::uint64_t clock_ns(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

// CLOCK_REALTIME - CLOCK_MONOTONIC now: a record's ktime plus this is its
// wall time (NTP slews it; read it again for long runs).
inline std::int64_t realtime_minus_monotonic_ns() {
  timespec m{}, r{};
  clock_gettime(CLOCK_MONOTONIC, &m);
  clock_gettime(CLOCK_REALTIME, &r);
  return (static_cast<std::int64_t>(r.tv_sec) - m.tv_sec) * 1'000'000'000 + (r.tv_nsec - m.tv_nsec);
}

}  // namespace lt
