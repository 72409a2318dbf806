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
  // 3 ranks: the finding needs (3 + 1) / 6 = 66.7% (halfway between chance, 1/3, and always).
  EXPECT_DOUBLE_EQ(last_arrival_threshold(2), 0.75);
  EXPECT_DOUBLE_EQ(last_arrival_threshold(4), 0.625);
  // Rank 2 late at some steps only: at the others rank 1 is last (it arrives +1 ms after rank 0).
  auto over = +[](int k) { return k < 8 ? 30 * ms : -5 * ms; };
  auto half = +[](int k) { return k < 6 ? 30 * ms : -5 * ms; };
  std::vector<ProcessSteps> steps{steps_of(0, 12), steps_of(1, 12), steps_of(2, 12)};
  {
    // late at k < 8: the +20 ones of k 0..7, +90 of k 0 and 4, +79 of k 5 = 11 of 16 (68.75%).
    const auto rep = analyze_arrivals(calls(12, over), 3);
    const auto found = last_arrivals(rep, 3);
    ASSERT_EQ(found.size(), 1u);
    EXPECT_EQ(found[0].rank, 2);
    EXPECT_EQ(found[0].last, 11u);
    EXPECT_EQ(found[0].instances, 16u);
    EXPECT_EQ(found[0].ranks, 3u);
    EXPECT_EQ(arrival_straggler(found, waits_per_step(rep, steps)), 2);
  }
  {
    // late at k < 6: 6 + 2 + 1 = 9 of 16 (56%: over half, under 66.7%); rank 1: 7 of 16.
    const auto rep = analyze_arrivals(calls(12, half), 3);
    const auto found = last_arrivals(rep, 3);
    EXPECT_TRUE(found.empty()) << found[0].rank << " " << found[0].last;
    EXPECT_EQ(arrival_straggler(found, waits_per_step(rep, steps)), -1);
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

namespace {

// Two ranks, one all_reduce every 100 ms; rank 1 arrives `late(k)` after rank 0 (< 0: before).
ArrivalInput two_ranks(int n, std::int64_t (*late)(int)) {
  ArrivalInput in(1);
  in[0].resize(2);
  for (int k = 0; k < n; ++k) {
    const std::int64_t t = 1000 * ms + k * 100 * ms;
    const auto u = static_cast<std::uint64_t>(k);
    in[0][0].push_back({t, u, 1, 4096, 10, static_cast<std::uint64_t>(t)});
    in[0][1].push_back({t + late(k), u + 9, 1, 4096, 10, static_cast<std::uint64_t>(t + late(k))});
  }
  return in;
}

}  // namespace

TEST(StepWaits, TwoRanksNeedMoreThanChance) {
  // Perfectly alternating: each rank last at 50%, which a flat 50% rule named both for.
  auto alternate = +[](int k) { return k % 2 ? 2 * ms : -2 * ms; };
  const auto rep = analyze_arrivals(two_ranks(20, alternate), 2);
  ASSERT_TRUE(rep.groups[0].aligned) << rep.groups[0].why_not;
  EXPECT_TRUE(last_arrivals(rep, 2).empty());
  // 14 of 20 (70%) is under 75%; 15 of 20 is enough.
  auto seventy = +[](int k) { return k < 14 ? 2 * ms : -2 * ms; };
  EXPECT_TRUE(last_arrivals(analyze_arrivals(two_ranks(20, seventy), 2), 2).empty());
  auto seventy_five = +[](int k) { return k < 15 ? 2 * ms : -2 * ms; };
  const auto found = last_arrivals(analyze_arrivals(two_ranks(20, seventy_five), 2), 2);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].rank, 1);
  EXPECT_EQ(found[0].last, 15u);
  EXPECT_EQ(found[0].ranks, 2u);
}

TEST(StepWaits, TiesAndGapsWithinTheClockBoundsAreNoRanksLast) {
  // Exact ties: no rank was last (the lower position used to get them all).
  auto tie = +[](int) { return std::int64_t{0}; };
  const auto rep = analyze_arrivals(two_ranks(20, tie), 2);
  ASSERT_TRUE(rep.groups[0].aligned) << rep.groups[0].why_not;
  EXPECT_TRUE(last_arrivals(rep, 2).empty());
  ASSERT_EQ(rep.ranks[0].size(), 1u);
  EXPECT_EQ(rep.ranks[0][0].instances, 20u);
  EXPECT_EQ(rep.ranks[0][0].last, 0u);
  EXPECT_EQ(rep.ranks[1][0].last, 0u);
  std::vector<ProcessSteps> none{ProcessSteps{}, ProcessSteps{}};
  const auto w = waits_per_step(rep, none);
  EXPECT_EQ(w[0].last + w[1].last, 0u);
  EXPECT_EQ(w[0].instances, 20u);

  // Rank 1 1.5 ms late: on one host (one clock) it is last; on two hosts
  // corrected within 1 ms each it is not known (1.5 <= 1 + 1); 3 ms late it is.
  auto late15 = +[](int) { return 1'500'000 * std::int64_t{1}; };
  auto late3 = +[](int) { return 3 * ms; };
  const ArrivalClocks one_host{{0, 0}, {1 * ms, 1 * ms}}, two_hosts{{0, 1}, {1 * ms, 1 * ms}};
  EXPECT_EQ(last_arrivals(analyze_arrivals(two_ranks(20, late15), 2, one_host), 2).size(), 1u);
  const auto close = analyze_arrivals(two_ranks(20, late15), 2, two_hosts);
  EXPECT_TRUE(last_arrivals(close, 2).empty());
  EXPECT_EQ(close.ranks[1][0].last, 0u);
  EXPECT_EQ(close.ranks[0][0].own_wait_ns, 20 * 1'500'000);  // the waits still count
  const auto apart = last_arrivals(analyze_arrivals(two_ranks(20, late3), 2, two_hosts), 2);
  ASSERT_EQ(apart.size(), 1u);
  EXPECT_EQ(apart[0].rank, 1);
  EXPECT_EQ(apart[0].last, 20u);
  // An unknown bound (-1) counts as 0.
  EXPECT_EQ(ArrivalClocks({{0, 1}, {-1, 2 * ms}}).margin_ns(0, 1), 2 * ms);
  EXPECT_EQ(ArrivalClocks{}.margin_ns(0, 1), 0);
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
