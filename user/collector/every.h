// A chore of the drain loop that is due once per period (the loop's own
// clock, CLOCK_MONOTONIC ns).
#pragma once
#include <cstdint>

namespace lt {

struct Every {
  std::uint64_t period_ns = 0;
  std::uint64_t last_ns = 0;
  // True (and counted from `now`) once more than a period has passed.
  bool due(std::uint64_t now) {
    if (now - last_ns <= period_ns) return false;
    last_ns = now;
    return true;
  }
};

}  // namespace lt
