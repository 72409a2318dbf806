// The bound of a wait for a target's own progress, grown by the CPU the
// machine withheld (user/proc/withheld_bound.h): the op observer's
// handshake phases (2 s, 30 s) and the attach's wait for a bridge (3 s, 30 s).
#include "user/proc/withheld_bound.h"

#include <gtest/gtest.h>

#include <map>

using namespace lt::proc;

namespace {
constexpr std::uint64_t s = 1'000'000'000;
}

TEST(WithheldBound, BaseMoreTheWaitForACpuAtMostMax) {
  const std::uint64_t t0 = 100 * s;
  EXPECT_FALSE(withheld_bound_over(t0, t0 + s, 2 * s, 30 * s, 0));
  EXPECT_TRUE(withheld_bound_over(t0, t0 + 2 * s, 2 * s, 30 * s, 0));  // an idle machine: the base
  // Its threads waited 3 s for a CPU meanwhile: 5 s.
  EXPECT_FALSE(withheld_bound_over(t0, t0 + 4 * s, 2 * s, 30 * s, 3 * s));
  EXPECT_TRUE(withheld_bound_over(t0, t0 + 5 * s, 2 * s, 30 * s, 3 * s));
  // However long they waited, the max.
  EXPECT_FALSE(withheld_bound_over(t0, t0 + 29 * s, 2 * s, 30 * s, 100 * s));
  EXPECT_TRUE(withheld_bound_over(t0, t0 + 30 * s, 2 * s, 30 * s, 100 * s));
  EXPECT_FALSE(withheld_bound_over(t0, t0 - 1, 2 * s, 30 * s, 0));  // a clock read before the wait began
}

// The waits as the processes' schedstat would give them: only their growth
// since each was watched counts, the most of any of them; none read before
// the base is up.
TEST(WithheldBound, GrowsByTheLongestGrowthOfTheProcessesWaitedFor) {
  const std::uint64_t t0 = 100 * s;
  std::map<pid_t, std::uint64_t> waited = {{7, 50 * s}, {8, 0}};
  int reads = 0;
  WithheldBound b(t0, 3 * s, 30 * s, [&](pid_t pid) {
    ++reads;
    return waited[pid];
  });
  b.watch(7);
  b.watch(8);
  const int watched = reads;
  EXPECT_FALSE(b.over(t0 + 2 * s, {7, 8}));
  EXPECT_EQ(reads, watched);                // before the base: no /proc read
  EXPECT_TRUE(b.over(t0 + 3 * s, {7, 8}));  // 50 s of pid 7's wait was before: it does not count
  WithheldBound c(t0, 3 * s, 30 * s, [&](pid_t pid) { return waited[pid]; });
  c.watch(7);
  c.watch(8);
  waited[7] += 1 * s;
  waited[8] += 4 * s;  // the most withheld: 4 s -> 7 s
  EXPECT_FALSE(c.over(t0 + 3 * s, {7, 8}));
  EXPECT_FALSE(c.over(t0 + 6 * s, {7, 8}));
  EXPECT_TRUE(c.over(t0 + 7 * s, {7, 8}));
  // A process first seen in over() starts from its wait then.
  WithheldBound d(t0, 3 * s, 30 * s, [&](pid_t pid) { return waited[pid]; });
  EXPECT_TRUE(d.over(t0 + 3 * s, {7, 8}));
  // However long they wait, the max.
  WithheldBound e(t0, 3 * s, 30 * s, [&](pid_t pid) { return waited[pid]; });
  e.watch(8);
  waited[8] += 100 * s;
  EXPECT_FALSE(e.over(t0 + 29 * s, {8}));
  EXPECT_TRUE(e.over(t0 + 30 * s, {8}));
}
