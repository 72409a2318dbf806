// The whole path of "who arrived last": COMM records of two hosts' ranks
// through the CommAggregator, the merge plan, the cluster summary and the
// merged Chrome trace.  Rank 3 arrives 5 ms late at every all-reduce; rank 2
// attached two steps late (its seq starts over); every rank's seq counts
// from another origin.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/comm.h"
#include "reports/cluster/cluster_summary.h"
#include "reports/cluster/merge.h"
#include "reports/cluster/merged_html.h"
#include "reports/cluster/merged_trace.h"
#include "user/model/trace.h"

using namespace lt;

namespace {

constexpr std::uint64_t ms = 1'000'000, sec = 1'000'000'000;
constexpr int kSteps = 12;

struct Rank {
  int rank;
  std::uint32_t pid;
  int first_step;      // attached before this step
  std::uint64_t seq0;  // its seq at its first step
  std::uint64_t late;  // arrives this late at each all-reduce
};

template <typename R>
void put(Trace& t, R& r, std::uint16_t kind, std::uint32_t pid, std::uint64_t ts) {
  r.hdr = {kind, sizeof r, pid, pid, 0, ts};
  t.append(r);
}

void action(Trace& t, std::uint16_t kind, std::uint32_t pid, std::uint64_t key, const char* text, std::uint64_t ts) {
  lt_action_event e{};
  e.key = key;
  e.name_len = static_cast<std::uint32_t>(std::strlen(text));
  std::snprintf(e.name, sizeof e.name, "%s", text);
  put(t, e, kind, pid, ts);
}

Trace recording(const std::string& host, const std::vector<Rank>& ranks) {
  Trace t;
  const std::uint64_t mono = 1000 * sec;
  lt_window_event w{};
  w.begin = 1;
  put(t, w, LT_EV_WINDOW, 0, mono);
  lt_host_info_event hi{};
  hi.monotonic_ns = mono;
  hi.realtime_ns = 1'800'000'000ull * sec;
  std::snprintf(hi.hostname, sizeof hi.hostname, "%s", host.c_str());
  put(t, hi, LT_EV_HOST_INFO, 0, mono);
  for (const auto& k : ranks) {
    lt_proc_info_event p{};
    p.rank = k.rank;
    p.local_rank = k.rank % 2;
    p.world_size = 4;
    p.flags = LT_PROC_PYTHON;
    put(t, p, LT_EV_PROC_INFO, k.pid, mono);
  }
  for (int s = 0; s < kSteps; ++s) {
    const std::uint64_t b = mono + 10 * ms + static_cast<std::uint64_t>(s) * 100 * ms;
    for (const auto& k : ranks) {
      if (s < k.first_step) continue;
      action(t, LT_EV_ACTION_BEGIN, k.pid, s + 1, "run_training_batch", b);
      lt_comm_event c{};
      c.pg = 0x5000;
      c.seq = k.seq0 + static_cast<std::uint64_t>(s - k.first_step);
      c.kind = LT_COMM_ALLREDUCE;
      c.ntensors = 1;
      c.peer = -1;
      put(t, c, LT_EV_COMM, k.pid, b + 20 * ms + static_cast<std::uint64_t>(k.rank) * 100'000 + k.late);
      action(t, LT_EV_ACTION_END, k.pid, s + 1, "run_training_batch", b + 40 * ms);
    }
  }
  lt_window_event z{};
  put(t, z, LT_EV_WINDOW, 0, mono + 2 * sec);
  return t;
}

MergeInput aggregate(const std::string& file, const Trace& trace) {
  ActionAggregator actions(true);
  CommAggregator comm(actions, CommAggregatorOptions{true});
  trace.for_each([&](const lt_event_header& h, const std::byte* p) {
    actions.add(h, p);
    comm.add(h, p);
  });
  MergeInput in{file, actions.finish(), std::nullopt, std::nullopt};
  in.comm = comm.finish();
  return in;
}

}  // namespace

TEST(MergedArrivals, SlowRankIsLastAndCollectivesAreNamedAlike) {
  const Trace a = recording("node-a", {{0, 100, 0, 1, 0}, {1, 101, 0, 40, 0}});
  const Trace b = recording("node-b", {{2, 200, 2, 1, 0}, {3, 201, 0, 7, 5 * ms}});
  std::vector<MergeInput> in;
  in.push_back(aggregate("node-a.ltrace", a));
  in.push_back(aggregate("node-b.ltrace", b));
  const MergePlan plan = plan_merge(in);
  ASSERT_EQ(plan.ranks.size(), 4u);

  const std::string s = render_cluster_summary(plan);
  ASSERT_NE(s.find("Last to arrive at collectives"), std::string::npos) << s;
  EXPECT_NE(s.find("pg 0: 12 collectives on 4 ranks, 10 recorded by every one of them"), std::string::npos) << s;
  // rank 3: last at all 10 complete all-reduces; the others waited
  // (5.3 + 5.2 + 5.1) ms each time.
  EXPECT_NE(s.find("| rank 3 | all_reduce |        10 |   10 |     100.0% |"), std::string::npos) << s;
  EXPECT_NE(s.find("|                    15.600 |"), std::string::npos) << s;
  EXPECT_NE(s.find("| rank 0 | all_reduce |        10 |    0 |       0.0% |"), std::string::npos) << s;

  std::ostringstream out;
  write_merged_trace(plan, out);
  // Every instance on every rank that recorded it, under one name.
  std::map<std::string, std::set<std::string>> pids_of;
  std::istringstream lines(out.str());
  for (std::string line; std::getline(lines, line);) {
    if (line.find("\"cat\": \"collective\"") == std::string::npos) continue;
    const auto n = line.find("\"name\": \"") + 9;
    const auto p = line.find("\"pid\": ") + 7;
    pids_of[line.substr(n, line.find('"', n) - n)].insert(line.substr(p, line.find(',', p) - p));
  }
  ASSERT_EQ(pids_of.size(), 12u);
  EXPECT_EQ(pids_of["all_reduce #0 (pg 0)"], (std::set<std::string>{"0", "1", "3"}));
  EXPECT_EQ(pids_of["all_reduce #11 (pg 0)"], (std::set<std::string>{"0", "1", "2", "3"}));
}

TEST(MergedArrivals, MergedPageHasTheWaitingHeatMapAndTheFinding) {
  const Trace a = recording("node-a", {{0, 100, 0, 1, 0}, {1, 101, 0, 40, 0}});
  const Trace b = recording("node-b", {{2, 200, 2, 1, 0}, {3, 201, 0, 7, 5 * ms}});
  std::vector<MergeInput> in;
  in.push_back(aggregate("node-a.ltrace", a));
  in.push_back(aggregate("node-b.ltrace", b));
  const MergePlan plan = plan_merge(in);
  std::ostringstream out;
  write_merged_html(plan, "summary", out);
  const std::string html = out.str();
  // Rank 3 is last at all 10 complete instances: the finding, linked to the
  // waiting heat map, the clock corrections beside it.
  EXPECT_NE(html.find("<a href=\"#waitmap\">rank 3 is last to arrive in 100.0% of all_reduces (pg 0): 10 of 10"),
            std::string::npos)
      << html;
  // Its threshold for 4 ranks: halfway between chance (25%) and always.
  EXPECT_NE(html.find("(shown when &gt;= 62.5% of at least 10, for 4 ranks: halfway between chance, 1/4, and always;"),
            std::string::npos);
  EXPECT_NE(html.find("<a class=\"clock-note\" href=\"#hosts\">(clock corrections: node-a 0.000 ms (recorded)"),
            std::string::npos);
  EXPECT_NE(html.find("id=\"hosts\""), std::string::npos);
  EXPECT_NE(html.find("id=\"waitmap\""), std::string::npos);
  // Both heat maps highlight rank 3.
  EXPECT_NE(html.find("<svg class=\"chart heatmap\" data-ranks=\"4\" data-bucket=\"1\" data-straggler=\"3\""),
            std::string::npos);
  EXPECT_NE(html.find("<svg class=\"chart waitmap\" data-ranks=\"4\" data-bucket=\"1\" data-straggler=\"3\""),
            std::string::npos);
  // Rank 0 waits (20.3 + 5) - 20 = 5.3 ms at each complete instance, in its step.
  EXPECT_NE(html.find("<g class=\"wrow\" data-rank=\"0\" data-in-steps-ns=\"53000000\" data-outside-ns=\"0\" "
                      "data-instances=\"10\" data-outside=\"0\" data-last=\"0\">"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("data-instances=\"10\" data-outside=\"0\" data-last=\"10\" data-straggler=\"1\">"),
            std::string::npos);
  EXPECT_NE(html.find("data-rank=\"0\" data-i=\"5\" data-ns=\"5300000\""), std::string::npos);
  // Rank 2 attached two steps late: its first step (index 0) is the job's
  // step 2, and the page draws it in that column (the common numbering).
  EXPECT_NE(html.find("data-offsets=\"0,0,2,0\""), std::string::npos);
  EXPECT_NE(html.find("data-rank=\"2\" data-i=\"2\" data-ns=\"5100000\""), std::string::npos);
  EXPECT_EQ(html.find("data-rank=\"2\" data-i=\"0\""), std::string::npos);
  // Every rank's step timeline, in the container that keeps their chosen steps together.
  const auto sync = html.find("data-tl-sync");
  ASSERT_NE(sync, std::string::npos);
  std::size_t timelines = 0;
  for (auto p = html.find("<section class=\"steptl\"", sync); p != std::string::npos;
       p = html.find("<section class=\"steptl\"", p + 1))
    ++timelines;
  EXPECT_EQ(timelines, 4u);
}
