// The op observer's handshake bound: 2 s a phase, more what a loaded
// machine kept the job's threads waiting for a CPU, 30 s at most.
#include <gtest/gtest.h>

#include "user/collector/op_observer.h"

using namespace lt;

namespace {
constexpr std::uint64_t s = 1'000'000'000;
}

TEST(OpObserverHandshake, TwoSecondsMoreTheJobsWaitForACpuAtMostThirty) {
  const std::uint64_t t0 = 100 * s;
  EXPECT_FALSE(handshake_phase_over(t0, t0 + s, 0));
  EXPECT_TRUE(handshake_phase_over(t0, t0 + 2 * s, 0));  // an idle machine: 2 s, as before
  // Its threads waited 3 s for a CPU meanwhile: 5 s.
  EXPECT_FALSE(handshake_phase_over(t0, t0 + 4 * s, 3 * s));
  EXPECT_TRUE(handshake_phase_over(t0, t0 + 5 * s, 3 * s));
  // However long they waited, 30 s.
  EXPECT_FALSE(handshake_phase_over(t0, t0 + 29 * s, 100 * s));
  EXPECT_TRUE(handshake_phase_over(t0, t0 + 30 * s, 100 * s));
  EXPECT_FALSE(handshake_phase_over(t0, t0 - 1, 0));  // a clock read before the phase began
}
