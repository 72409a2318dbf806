// Lining up COMM calls into collective instances across ranks
// (reports/cluster/arrivals.h) on synthetic calls: offsets, a late rank, a
// lost record, a refused ambiguous alignment.
#include "reports/cluster/arrivals.h"

#include <gtest/gtest.h>

using namespace lt;

namespace {

constexpr std::int64_t ms = 1'000'000;

// A job of n all_reduces (kind 1) every 100 ms; rank r arrives at
// r * skew_ms after the instance's start, `slow` arrives 30 ms late.
// Rank r's seq starts at first_seq[r]; it sees instances from first[r] on.
ArrivalInput job(int n, std::vector<std::uint64_t> first_seq, std::vector<int> first, int slow,
                 std::uint64_t bytes = 4096) {
  ArrivalInput in(1);
  in[0].resize(first_seq.size());
  for (std::size_t r = 0; r < first_seq.size(); ++r)
    for (int k = first[r]; k < n; ++k) {
      const std::int64_t t =
          k * 100 * ms + static_cast<std::int64_t>(r) * ms + (static_cast<int>(r) == slow ? 30 * ms : 0);
      in[0][r].push_back({t, first_seq[r] + static_cast<std::uint64_t>(k - first[r]), 1, bytes});
    }
  return in;
}

}  // namespace

TEST(Arrivals, OffsetsAndLateRankAlign) {
  // Rank 1 attached 5 instances late and its seq restarts at 0; rank 2's seq
  // starts at 1000 (another count entirely).
  const auto in = job(50, {0, 0, 1000}, {0, 5, 0}, 1);
  const auto rep = analyze_arrivals(in, 3);
  ASSERT_EQ(rep.groups.size(), 1u);
  ASSERT_TRUE(rep.groups[0].aligned) << rep.groups[0].why_not;
  EXPECT_EQ(rep.groups[0].instances, 50u);
  EXPECT_EQ(rep.groups[0].complete, 45u);  // rank 1 missed the first 5
  for (auto& x : rep.instances) {
    if (x.number < 5) {
      EXPECT_EQ(x.last, -1);
      continue;
    }
    EXPECT_EQ(x.last, 1) << x.number;
    EXPECT_EQ(x.arrival_ns[1] - x.arrival_ns[0], 31 * ms);
  }
  ASSERT_EQ(rep.ranks[1].size(), 1u);
  EXPECT_EQ(rep.ranks[1][0].last, 45u);
  EXPECT_EQ(rep.ranks[1][0].instances, 45u);
  // Others waited 31 ms (rank 0) + 29 ms (rank 2) each time.
  EXPECT_EQ(rep.ranks[1][0].median_waited_for_ns, 60 * ms);
  EXPECT_EQ(rep.ranks[1][0].waited_for_ns, 45 * 60 * ms);
  EXPECT_EQ(rep.ranks[0][0].last, 0u);
  EXPECT_EQ(rep.ranks[0][0].own_wait_ns, 45 * 31 * ms);
}

TEST(Arrivals, LostRecordLeavesItsInstanceIncomplete) {
  auto in = job(20, {7, 3}, {0, 0}, 0);
  in[0][1].erase(in[0][1].begin() + 10);  // instance 10's record of rank 1 lost
  const auto rep = analyze_arrivals(in, 2);
  ASSERT_TRUE(rep.groups[0].aligned) << rep.groups[0].why_not;
  EXPECT_EQ(rep.groups[0].offset[1] - rep.groups[0].offset[0], 4);
  EXPECT_EQ(rep.groups[0].complete, 19u);
  EXPECT_EQ(rep.instances[10].last, -1);
  EXPECT_EQ(rep.instances[10].arrival_ns[1], CollectiveInstance::kMissing);
  EXPECT_EQ(rep.ranks[0][0].last, 19u);
}

TEST(Arrivals, SizesDecideWhereTimesCannot) {
  // Alternating sizes: an offset of one would pair 4096 with 8192 bytes.
  auto in = job(20, {0, 0}, {0, 0}, -1);
  // Rank 1 arrives half a period late: offsets 0 and -1 are alike in time.
  for (auto& c : in[0][1]) c.t_ns += 49 * ms;
  for (auto& r : in[0])
    for (auto& c : r) c.bytes = (c.seq % 2) ? 8192 : 4096;
  const auto rep = analyze_arrivals(in, 2);
  ASSERT_TRUE(rep.groups[0].aligned) << rep.groups[0].why_not;
  EXPECT_EQ(rep.groups[0].offset[1], rep.groups[0].offset[0]);
  EXPECT_EQ(rep.ranks[1][0].last, 20u);
}

TEST(Arrivals, AmbiguousAlignmentIsRefused) {
  // Rank 1 arrives half a period (50 ms) after rank 0: offsets 0 and -1
  // are equally near in time, and every call is alike.
  ArrivalInput in(1);
  in[0].resize(2);
  for (int k = 0; k < 20; ++k) {
    in[0][0].push_back({k * 100 * ms, static_cast<std::uint64_t>(k), 1, 4096});
    in[0][1].push_back({k * 100 * ms + 50 * ms, static_cast<std::uint64_t>(k), 1, 4096});
  }
  const auto rep = analyze_arrivals(in, 2);
  EXPECT_FALSE(rep.groups[0].aligned);
  EXPECT_NE(rep.groups[0].why_not.find("ambiguous"), std::string::npos) << rep.groups[0].why_not;
  EXPECT_TRUE(rep.instances.empty());
}

TEST(Arrivals, DisagreeingKindsAreRefused) {
  auto in = job(10, {0, 0}, {0, 0}, -1);
  for (auto& c : in[0][1]) c.kind = 2;  // broadcast on one rank, all_reduce on the other
  const auto rep = analyze_arrivals(in, 2);
  EXPECT_FALSE(rep.groups[0].aligned);
  EXPECT_NE(rep.groups[0].why_not.find("not aligned"), std::string::npos);
}

TEST(Arrivals, InstanceName) {
  EXPECT_EQ(instance_name("all_reduce", 12, 0), "all_reduce #12 (pg 0)");
}
