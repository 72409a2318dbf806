// Time waiting per rank and training step (reports/cluster/step_waits.h) on
// synthetic COMM calls and steps: known waits land in known cells, entries
// outside every step are counted apart, and the last-to-arrive finding
// keeps to its thresholds.
#include "reports/cluster/step_waits.h"

#include <gtest/gtest.h>

using namespace lt;

namespace {

constexpr std::int64_t ms = 1'000'000;

// Each rank's recording clock: common = mono + skew[r] (a different origin per rank).
const std::int64_t skew[3] = {0, 7'000 * ms, -3 * ms};

// Rank r's training steps on its own clock: step k spans common [k*100, k*100 + 80] ms.
ProcessSteps steps_of(int r, int n) {
  ProcessSteps s;
  for (int k = 0; k < n; ++k) {
    StepRecord x;
    x.index = static_cast<std::uint32_t>(k);
    x.begin_ns = static_cast<std::uint64_t>(k * 100 * ms + 1000 * ms - skew[r]);
    x.end_ns = x.begin_ns + static_cast<std::uint64_t>(80 * ms);
    s.train.push_back(x);
  }
  return s;
}

// One all_reduce per step at +20 ms (rank r: r ms later; `late(k)` adds to
// rank 2), one more at +90 ms (between steps: outside) every 4th step, and
// one at +79 ms at step 5: rank 1 enters at exactly the step's end (inside:
// [begin, end]), rank 2 (30 ms late) in the next step, where it waits 0.
ArrivalInput calls(int n, std::int64_t (*late)(int)) {
  ArrivalInput in(1);
  in[0].resize(3);
  std::uint64_t seq = 0;
  // Distinct sizes for the extra ones: otherwise time alone (rank 2 is 30 ms
  // late) cannot line them up, and the alignment rightly refuses.
  auto put = [&](std::int64_t base, int k, std::uint64_t bytes) {
    for (int r = 0; r < 3; ++r) {
      const std::int64_t t = base + r * ms + (r == 2 ? late(k) : 0);
      in[0][static_cast<std::size_t>(r)].push_back(
          {t, seq + static_cast<std::uint64_t>(r) * 50, 1, bytes, 10, static_cast<std::uint64_t>(t - skew[r])});
    }
    ++seq;
  };
  for (int k = 0; k < n; ++k) {
    const std::int64_t b = 1000 * ms + k * 100 * ms;
    put(b + 20 * ms, k, 4096);
    if (k % 4 == 0) put(b + 90 * ms, k, 64);
    if (k == 5) put(b + 79 * ms, k, 128);
  }
  return in;
}

std::int64_t always30(int) {
  return 30 * ms;
}

}  // namespace

TEST(StepWaits, KnownWaitsLandInKnownCells) {
  const int n = 12;
  const auto rep = analyze_arrivals(calls(n, always30), 3);
  ASSERT_TRUE(rep.groups[0].aligned) << rep.groups[0].why_not;
  std::vector<ProcessSteps> steps{steps_of(0, n), steps_of(1, n), steps_of(2, n)};
  const auto w = waits_per_step(rep, steps);
  ASSERT_EQ(w.size(), 3u);
  // Rank 2 arrives at +32 ms: rank 0 waits 32, rank 1 31, rank 2 0 per instance.
  for (int k = 0; k < n; ++k) {
    const std::int64_t extra = k == 5 ? 1 : 0;  // the instance at the step's end
    EXPECT_EQ(w[0].step_ns[k], (1 + extra) * 32 * ms) << k;
    EXPECT_EQ(w[1].step_ns[k], (1 + extra) * 31 * ms) << k;
    EXPECT_EQ(w[2].step_ns[k], 0) << k;
  }
  // +90 ms lies between steps k (ends +80) and k+1: outside, 3 of them (k = 0, 4, 8).
  EXPECT_EQ(w[0].outside, 3u);
  EXPECT_EQ(w[0].outside_ns, 3 * 32 * ms);
  EXPECT_EQ(w[1].outside_ns, 3 * 31 * ms);
  EXPECT_EQ(w[0].in_steps_ns, 13 * 32 * ms);
  EXPECT_EQ(w[0].instances, 16u);
  EXPECT_EQ(w[2].last, 16u);
  EXPECT_EQ(w[0].last, 0u);
  // The rows' totals are the arrivals' own waits (the cluster summary's "it waited").
  for (int r = 0; r < 3; ++r) {
    std::int64_t own = 0;
    for (const auto& st : rep.ranks[r]) own += st.own_wait_ns;
    EXPECT_EQ(w[r].in_steps_ns + w[r].outside_ns, own) << r;
  }
  const auto found = last_arrivals(rep, 3);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].rank, 2);
  EXPECT_EQ(found[0].last, 16u);
  EXPECT_EQ(found[0].instances, 16u);
  EXPECT_EQ(arrival_straggler(found, w), 2);
}

TEST(StepWaits, LastArrivalFindingKeepsItsThresholds) {
  // Rank 2 late at some steps only: at the others rank 1 is last (it arrives +1 ms after rank 0).
  auto half = +[](int k) { return k < 6 ? 30 * ms : -5 * ms; };
  auto under = +[](int k) { return k < 5 ? 30 * ms : -5 * ms; };
  std::vector<ProcessSteps> steps{steps_of(0, 12), steps_of(1, 12), steps_of(2, 12)};
  // 12 steps: 16 instances; late at k < 6: the +20 ones of k 0..5, +90 of k 0 and 4, +78 of k 5 = 9 of 16.
  {
    const auto rep = analyze_arrivals(calls(12, half), 3);
    const auto found = last_arrivals(rep, 3);
    ASSERT_EQ(found.size(), 1u);
    EXPECT_EQ(found[0].rank, 2);
    EXPECT_EQ(found[0].last, 9u);
    EXPECT_EQ(found[0].instances, 16u);
    EXPECT_EQ(arrival_straggler(found, waits_per_step(rep, steps)), 2);
  }
  {
    // late at k < 5: 5 + 2 = 7 of 16 (< 50%); rank 1: 9 of 16.
    const auto rep = analyze_arrivals(calls(12, under), 3);
    const auto found = last_arrivals(rep, 3);
    ASSERT_EQ(found.size(), 1u);
    EXPECT_EQ(found[0].rank, 1);
    EXPECT_EQ(found[0].last, 9u);
  }
  {
    // Too few instances (5 steps: 5 + 2 = 7 < 10): no finding, no straggler.
    const auto rep = analyze_arrivals(calls(5, always30), 3);
    const auto found = last_arrivals(rep, 3);
    EXPECT_TRUE(found.empty());
    std::vector<ProcessSteps> s5{steps_of(0, 5), steps_of(1, 5), steps_of(2, 5)};
    EXPECT_EQ(arrival_straggler(found, waits_per_step(rep, s5)), -1);
  }
}

TEST(StepWaits, IncompleteInstancesAndNoArrivalsCountNothing) {
  auto in = calls(12, always30);
  in[0][0].erase(in[0][0].begin() + 3);  // rank 0 lost one record: that instance is incomplete
  const auto rep = analyze_arrivals(in, 3);
  ASSERT_TRUE(rep.groups[0].aligned);
  std::vector<ProcessSteps> steps{steps_of(0, 12), steps_of(1, 12), steps_of(2, 12)};
  const auto w = waits_per_step(rep, steps);
  EXPECT_EQ(w[1].instances, 15u);
  const auto none = waits_per_step(ArrivalReport{}, steps);
  ASSERT_EQ(none.size(), 3u);
  EXPECT_EQ(none[0].instances, 0u);
  EXPECT_EQ(none[0].step_ns.size(), 12u);
}
