// The multi-rank merge on synthetic jobs: event streams of a simulated DDP
// job (2 hosts x 2 ranks), fed through the real ActionAggregator, one per
// host with its own monotonic clock and a wall clock that may be off.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "reports/aggregate/actions.h"
#include "reports/cluster/cluster_summary.h"
#include "reports/cluster/merge.h"
#include "reports/cluster/merged_trace.h"
#include "user/cli/merge_output.h"
#include "user/cli/report_set.h"
#include "user/core/errors.h"
#include "user/tracefile/trace_writer.h"

using namespace lt;

namespace {

constexpr std::int64_t us = 1'000, ms = 1'000'000, sec = 1'000'000'000;
constexpr std::int64_t kBase = 1'800'000'000LL * sec;  // true time of the job's start (2027)

struct HostSpec {
  std::string name;
  std::int64_t boot;        // true time of its boot: monotonic = true - boot
  std::int64_t wall_error;  // its CLOCK_REALTIME reads true + this
  std::int64_t attach, detach;
  bool cut = false;  // recorder killed: no detach record, nothing after `detach`
};

struct RankSpec {
  int rank, local_rank, world;
  std::uint32_t pid;
  std::size_t host;
  double slow_ms = 0;     // extra compute in training_step
  double late_ms = 0;     // begins each step this late (a slow data loader)
  std::int64_t exit = 0;  // true time it exits; 0 = lives on
};

struct JobSpec {
  int steps = 100;
  double compute_ms = 50, backward_ms = 20, optimizer_ms = 1, fetch_ms = 2;
  std::int64_t end_jitter = 20 * us;  // +- on each rank's all-reduce end
  std::int64_t wake = 120 * us;       // a rank that waited > 1 ms leaves the all-reduce this much later
  bool with_backward = true;          // [Strategy]DDPStrategy.backward actions
  std::vector<HostSpec> hosts;
  std::vector<RankSpec> ranks;
};

// A deterministic jitter in [-a, a].
struct Jitter {
  std::uint64_t s = 0x9E3779B97F4A7C15ull;
  std::int64_t operator()(std::int64_t a) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    if (a <= 0) return 0;
    return static_cast<std::int64_t>((s >> 33) % static_cast<std::uint64_t>(2 * a + 1)) - a;
  }
};

struct Ev {
  std::int64_t t;  // true time
  std::vector<std::byte> rec;
};

struct HostStream {
  std::vector<Ev> evs;
  std::uint64_t key = 1;
  template <typename R>
  void put(std::int64_t t, const R& r) {
    Ev e{t, std::vector<std::byte>(sizeof r)};
    std::memcpy(e.rec.data(), &r, sizeof r);
    evs.push_back(std::move(e));
  }
  void action(std::int64_t b, std::int64_t e, std::uint32_t pid, const std::string& name) {
    lt_action_event a{};
    a.hdr = {LT_EV_ACTION_BEGIN, sizeof a, pid, pid, 0, 0};
    a.key = key++;
    std::strncpy(a.name, name.c_str(), sizeof a.name - 1);
    put(b, a);
    lt_action_event z{};
    z.hdr = {LT_EV_ACTION_END, sizeof z, pid, pid, 0, 0};
    z.key = a.key;
    put(e, z);
  }
};

// The event stream of each host, as its recorder would write it.
std::vector<std::pair<std::string, Trace>> simulate_traces(const JobSpec& job) {
  Jitter jit;
  std::vector<HostStream> streams(job.hosts.size());
  const auto alive = [&](const RankSpec& r, std::int64_t t) { return r.exit == 0 || t < r.exit; };
  const std::int64_t epoch_begin = kBase - 1 * ms;
  std::int64_t S = kBase;
  for (int k = 0; k < job.steps; ++k) {
    struct At {
      std::int64_t b, ts_b, ts_e, arrive;
    };
    std::vector<At> at(job.ranks.size());
    std::int64_t last_arrival = 0;
    for (std::size_t i = 0; i < job.ranks.size(); ++i) {
      auto& r = job.ranks[i];
      auto& a = at[i];
      a.b = S + static_cast<std::int64_t>(r.late_ms * ms) + jit(10 * us);
      a.ts_b = a.b + 100 * us;
      a.ts_e = a.ts_b + static_cast<std::int64_t>((job.compute_ms + r.slow_ms) * ms) + jit(50 * us);
      a.arrive = a.ts_e + 50 * us;
      if (alive(r, a.b)) last_arrival = std::max(last_arrival, a.arrive);
    }
    const std::int64_t E = last_arrival + static_cast<std::int64_t>(job.backward_ms * ms);
    std::int64_t last_end = S;
    for (std::size_t i = 0; i < job.ranks.size(); ++i) {
      auto& r = job.ranks[i];
      auto& a = at[i];
      if (!alive(r, a.b)) continue;
      auto& st = streams[r.host];
      const std::int64_t bwd_e = E + jit(job.end_jitter) + (last_arrival - a.arrive > 1 * ms ? job.wake : 0);
      const std::int64_t end = bwd_e + static_cast<std::int64_t>(job.optimizer_ms * ms) + jit(10 * us);
      st.action(a.b, end, r.pid, "run_training_batch");
      st.action(a.ts_b, a.ts_e, r.pid, "[Strategy]DDPStrategy.training_step");
      if (job.with_backward) st.action(a.arrive, bwd_e, r.pid, "[Strategy]DDPStrategy.backward");
      st.action(end + 20 * us, end + 120 * us, r.pid, "[Callback]TQDMProgressBar.on_train_batch_end");
      last_end = std::max(last_end, end + 120 * us);
    }
    S = last_end + 200 * us + static_cast<std::int64_t>(job.fetch_ms * ms);
  }
  for (auto& r : job.ranks) {
    auto& st = streams[r.host];
    if (alive(r, S)) {
      st.action(epoch_begin, S + 1 * ms, r.pid, "run_training_epoch");
      if (r.rank == 0) st.action(S + 2 * ms, S + 7 * ms, r.pid, "[Callback]ModelCheckpoint.on_train_epoch_end");
    }
    if (r.exit) {
      lt_proc_event e{};
      e.hdr = {LT_EV_PROC_EXIT, sizeof e, r.pid, r.pid, 0, 0};
      st.put(r.exit, e);
    }
  }

  std::vector<std::pair<std::string, Trace>> out;
  for (std::size_t h = 0; h < job.hosts.size(); ++h) {
    const auto& hs = job.hosts[h];
    auto mono = [&](std::int64_t t) { return static_cast<std::uint64_t>(t - hs.boot); };
    Trace trace;
    lt_window_event w{};
    w.hdr = {LT_EV_WINDOW, sizeof w, 0, 0, 0, mono(hs.attach)};
    w.begin = 1;
    trace.append(w);
    lt_host_info_event hi{};
    hi.hdr = {LT_EV_HOST_INFO, sizeof hi, 0, 0, 0, mono(hs.attach)};
    hi.monotonic_ns = mono(hs.attach);
    hi.realtime_ns = static_cast<std::uint64_t>(hs.attach + hs.wall_error);
    std::strncpy(hi.hostname, hs.name.c_str(), sizeof hi.hostname - 1);
    trace.append(hi);
    for (auto& r : job.ranks) {
      if (r.host != h) continue;
      lt_proc_info_event p{};
      p.hdr = {LT_EV_PROC_INFO, sizeof p, r.pid, r.pid, 0, mono(hs.attach)};
      p.rank = r.rank;
      p.local_rank = r.local_rank;
      p.world_size = r.world;
      p.flags = LT_PROC_PYTHON;
      std::strncpy(p.cmdline, "python train.py", sizeof p.cmdline - 1);
      trace.append(p);
    }
    auto& evs = streams[h].evs;
    std::stable_sort(evs.begin(), evs.end(), [](auto& a, auto& b) { return a.t < b.t; });
    for (auto& e : evs) {
      if (e.t < hs.attach || e.t > hs.detach) continue;
      lt_event_header hdr;
      std::memcpy(&hdr, e.rec.data(), sizeof hdr);
      bool gone = false;  // nothing of a process after its exit
      for (auto& r : job.ranks) gone = gone || (r.pid == hdr.pid && r.exit && e.t > r.exit);
      if (gone) continue;
      hdr.ts_ns = mono(e.t);
      std::memcpy(e.rec.data(), &hdr, sizeof hdr);
      trace.append(e.rec.data(), e.rec.size());
    }
    if (!hs.cut) {
      lt_window_event z{};
      z.hdr = {LT_EV_WINDOW, sizeof z, 0, 0, 0, mono(hs.detach)};
      trace.append(z);
    }
    out.push_back({hs.name + ".ltrace", std::move(trace)});
  }
  return out;
}

std::vector<MergeInput> simulate(const JobSpec& job) {
  std::vector<MergeInput> out;
  for (auto& [file, trace] : simulate_traces(job)) out.push_back({file, aggregate_actions(trace, true), std::nullopt});
  return out;
}

// Two hosts, two ranks each; node-b's wall clock is 3.7 ms ahead; rank 3
// computes 30 ms longer per step.
JobSpec two_by_two() {
  JobSpec j;
  j.hosts = {{"node-a", kBase - 1000 * sec, 0, kBase - 5 * ms, kBase + 60 * sec},
             {"node-b", kBase - 5000 * sec, 3'700 * us, kBase + 250 * ms, kBase + 60 * sec}};
  j.ranks = {{0, 0, 4, 100, 0}, {1, 1, 4, 101, 0}, {2, 0, 4, 200, 1}, {3, 1, 4, 201, 1, 30.0}};
  return j;
}

const RankRun& rank(const MergePlan& p, int r) {
  const RankRun* x = p.find_rank(r);
  EXPECT_NE(x, nullptr) << "rank " << r;
  return *x;
}

bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

}  // namespace

TEST(Cluster, PlanFindsRanksHostsAndLabels) {
  auto in = simulate(two_by_two());
  MergePlan plan = plan_merge(in);
  ASSERT_EQ(plan.ranks.size(), 4u);
  ASSERT_EQ(plan.hosts.size(), 2u);
  EXPECT_EQ(plan.world_size, 4);
  EXPECT_EQ(plan.local_world_size, 2);
  EXPECT_TRUE(plan.missing_ranks.empty());
  EXPECT_TRUE(plan.missing_nodes.empty());
  EXPECT_EQ(plan.reference_host, 0u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(plan.ranks[r].rank, r);
    EXPECT_EQ(plan.ranks[r].index, r);
    EXPECT_EQ(plan.ranks[r].label, "rank " + std::to_string(r));
    EXPECT_EQ(plan.ranks[r].host, r < 2 ? "node-a" : "node-b");
    EXPECT_FALSE(plan.ranks[r].ended_early);
  }
  // Recorded clocks: node-b reads 3.7 ms ahead of node-a.
  const auto& r2 = rank(plan, 2);
  const auto& iv = r2.proc->intervals.front();
  EXPECT_EQ(r2.common_ns(iv.begin_ns) - (static_cast<std::int64_t>(iv.begin_ns) + (kBase - 5000 * sec)), 3'700 * us);
}

TEST(Cluster, EstimatorRecoversAHostClockOffset) {
  auto in = simulate(two_by_two());
  MergePlan plan = plan_merge(in);
  const StepSkew before = analyze_steps(plan);
  ClockEstimate est = estimate_offsets_from_collectives(plan);
  EXPECT_EQ(est.action, "[Strategy]DDPStrategy.backward");
  EXPECT_EQ(est.reference_host, 0u);
  ASSERT_EQ(est.hosts.size(), 2u);
  EXPECT_FALSE(est.hosts[0].estimated);
  const auto& b = est.hosts[1];
  ASSERT_TRUE(b.estimated) << b.why_not;
  // The stated bound: all-reduce ends jittered by +-20 us per rank -> the
  // median over ~200 pairs is within 25 us of the injected -3.7 ms.  Only
  // rank 2 waited like node-a's ranks (rank 3, the straggler, leaves the
  // all-reduce 120 us before the ranks that waited for it): its pairs only.
  EXPECT_LE(std::llabs(b.offset_ns - (-3'700 * us)), 25 * us) << b.offset_ns;
  EXPECT_GT(b.pairs, 150u);
  EXPECT_EQ(b.alike_pairs, b.pairs);
  EXPECT_FALSE(b.wake_corrected || b.role_bias);
  EXPECT_LE(b.mad_ns, 25 * us);
  EXPECT_GT(b.stderr_ns, 0);
  EXPECT_LE(b.stderr_ns, 5 * us);
  EXPECT_LE(b.p95_ns, 45 * us);

  apply_clock_estimate(plan, est);
  EXPECT_EQ(plan.hosts[1].source, ClockSource::estimated);
  EXPECT_EQ(rank(plan, 3).clock_offset_ns, b.offset_ns);
  const StepSkew after = analyze_steps(plan);
  // Steps begin together in this job: the cross-host skew was the clock.
  EXPECT_GT(before.median_skew_ns, 3 * ms);
  EXPECT_LT(after.median_skew_ns, 100 * us);
  // The ends still differ by the straggler's early leave (120 us) and jitter.
  EXPECT_LT(after.median_sync_spread_ns, 180 * us);
}

TEST(Cluster, EstimatorUsesStepEndsWithoutABackwardAction) {
  JobSpec j = two_by_two();
  j.with_backward = false;
  // Step times are alike on every rank (all wait for the straggler), so who
  // waited cannot be seen: a wake-up latency would bias this estimate.
  j.wake = 0;
  auto in = simulate(j);
  MergePlan plan = plan_merge(in);
  ClockEstimate est = estimate_offsets_from_collectives(plan);
  EXPECT_EQ(est.action, "run_training_batch");
  ASSERT_TRUE(est.hosts[1].estimated);
  EXPECT_LE(std::llabs(est.hosts[1].offset_ns - (-3'700 * us)), 30 * us);
}

TEST(Cluster, EstimatorCorrectsUnlikeWaitsByTheWakeUpLatencySeenOnOneHost) {
  // node-a: two ranks that wait; node-b (3.7 ms ahead): a slow node, both
  // ranks stragglers; node-c (1.2 ms behind): one straggler, one waiter.
  JobSpec j;
  j.hosts = {{"node-a", kBase - 1000 * sec, 0, kBase - 5 * ms, kBase + 20 * sec},
             {"node-b", kBase - 5000 * sec, 3'700 * us, kBase - 5 * ms, kBase + 20 * sec},
             {"node-c", kBase - 7000 * sec, -1'200 * us, kBase - 5 * ms, kBase + 20 * sec}};
  j.ranks = {{0, 0, 6, 100, 0},       {1, 1, 6, 101, 0},       {2, 0, 6, 200, 1, 30.0},
             {3, 1, 6, 201, 1, 30.0}, {4, 0, 6, 300, 2, 30.0}, {5, 1, 6, 301, 2}};
  auto in = simulate(j);
  MergePlan plan = plan_merge(in);
  ClockEstimate est = estimate_offsets_from_collectives(plan);
  EXPECT_NEAR(est.wake_latency_ns, 120 * us, 10 * us);
  const auto& b = est.hosts[1];
  ASSERT_TRUE(b.estimated);
  EXPECT_EQ(b.alike_pairs, 0u);
  EXPECT_TRUE(b.wake_corrected);
  EXPECT_LE(std::llabs(b.offset_ns - (-3'700 * us)), 25 * us) << b.offset_ns;
  const auto& c = est.hosts[2];
  ASSERT_TRUE(c.estimated);
  EXPECT_FALSE(c.wake_corrected || c.role_bias);
  EXPECT_LE(std::llabs(c.offset_ns - 1'200 * us), 25 * us) << c.offset_ns;
  apply_clock_estimate(plan, est);
  EXPECT_TRUE(contains(render_cluster_summary(plan, &est), "never waited alike with node-a's: corrected by the 0.1"));
}

TEST(Cluster, EstimatorFlagsAStragglerAloneOnItsHost) {
  // One rank per host, the straggler on node-b: no pair waited alike and
  // no host shows the wake-up latency.  The estimate is off by about it.
  JobSpec j = two_by_two();
  j.ranks = {{0, 0, 2, 100, 0}, {1, 0, 2, 200, 1, 30.0}};
  auto in = simulate(j);
  MergePlan plan = plan_merge(in);
  ClockEstimate est = estimate_offsets_from_collectives(plan);
  EXPECT_EQ(est.wake_latency_ns, -1);
  const auto& b = est.hosts[1];
  ASSERT_TRUE(b.estimated);
  EXPECT_TRUE(b.role_bias);
  EXPECT_LE(std::llabs(b.offset_ns - (-3'700 * us + 120 * us)), 25 * us) << b.offset_ns;
  apply_clock_estimate(plan, est);
  EXPECT_TRUE(contains(render_cluster_summary(plan, &est), "(a straggler): off by about the time a waiting rank"));
}

TEST(Cluster, MeasuredOffsetsAreKeptAndChecked) {
  auto in = simulate(two_by_two());
  MergePlan plan = plan_merge(in, {{"node-b", -3'700 * us}});
  EXPECT_EQ(plan.hosts[1].source, ClockSource::measured);
  EXPECT_EQ(rank(plan, 2).clock_offset_ns, -3'700 * us);
  ClockEstimate est = estimate_offsets_from_collectives(plan);
  ASSERT_TRUE(est.hosts[1].estimated);
  EXPECT_LE(std::llabs(est.hosts[1].change_ns), 25 * us);
  apply_clock_estimate(plan, est, /*keep_measured=*/true);
  EXPECT_EQ(plan.hosts[1].source, ClockSource::measured);
  EXPECT_EQ(plan.hosts[1].clock_offset_ns, -3'700 * us);
  const std::string text = render_cluster_summary(plan, &est);
  EXPECT_TRUE(contains(text, "node-b: -3.700 ms, measured; the [Strategy]DDPStrategy.backward ends suggest")) << text;
}

TEST(Cluster, SlowedRankIsTheStraggler) {
  auto in = simulate(two_by_two());
  MergePlan plan = plan_merge(in);
  apply_clock_estimate(plan, estimate_offsets_from_collectives(plan));
  const StepSkew sk = analyze_steps(plan);
  EXPECT_EQ(sk.steps.step_action, "run_training_batch");
  EXPECT_EQ(sk.steps.sync_action, "[Strategy]DDPStrategy.backward");
  ASSERT_GE(sk.straggler, 0);
  EXPECT_EQ(plan.ranks[sk.straggler].rank, 3);
  EXPECT_NEAR(sk.straggler_excess, 30.0 / 71.3, 0.05);
  // Everyone's step takes the straggler's time: the step times alone would
  // not name it.  The others wait ~30 ms a step at the all-reduce.
  for (int r = 0; r < 3; ++r) {
    EXPECT_NEAR(sk.ranks[r].mean_step_s, sk.ranks[3].mean_step_s, 0.5e-3);
    EXPECT_NEAR(sk.ranks[r].mean_wait_s, 30e-3, 0.5e-3);
  }
  EXPECT_LT(sk.ranks[3].mean_wait_s, 0.1e-3);
  // node-b attached 250 ms late: its first steps are the others' later ones.
  EXPECT_GT(sk.cluster.size(), sk.common_steps);
  EXPECT_EQ(sk.cluster.size(), sk.steps.per_rank[0].size());
  EXPECT_EQ(sk.common_steps, sk.steps.per_rank[2].size());
  int first_b = -1;
  for (auto& c : sk.cluster)
    if (c.at[2] >= 0) {
      first_b = static_cast<int>(c.index);
      break;
    }
  ASSERT_GT(first_b, 0);
  const auto& a0 = sk.steps.per_rank[0][sk.cluster[first_b].at[0]];
  const auto& b0 = sk.steps.per_rank[2][0];
  EXPECT_LT(std::llabs(a0.begin_ns - b0.begin_ns), 200 * us);
}

TEST(Cluster, SlowDataLoaderRankIsTheStraggler) {
  JobSpec j = two_by_two();
  j.ranks[3].slow_ms = 0;
  j.ranks[1].late_ms = 15;  // its steps begin 15 ms after the others'
  auto in = simulate(j);
  MergePlan plan = plan_merge(in);
  apply_clock_estimate(plan, estimate_offsets_from_collectives(plan));
  const StepSkew sk = analyze_steps(plan);
  ASSERT_GE(sk.straggler, 0);
  EXPECT_EQ(plan.ranks[sk.straggler].rank, 1);
  EXPECT_NEAR(sk.median_skew_ns / 1e6, 15.0, 0.2);
}

TEST(Cluster, NoStragglerWhenRanksAreEven) {
  JobSpec j = two_by_two();
  j.ranks[3].slow_ms = 1;  // 1.4%: below the 5% threshold
  auto in = simulate(j);
  MergePlan plan = plan_merge(in);
  apply_clock_estimate(plan, estimate_offsets_from_collectives(plan));
  const StepSkew sk = analyze_steps(plan);
  EXPECT_EQ(sk.straggler, -1);
  EXPECT_TRUE(contains(render_cluster_summary(plan), "Straggler: none"));
}

TEST(Cluster, RankThatExitedMidCaptureIsUsedAndFlagged) {
  JobSpec j = two_by_two();
  j.ranks[1].exit = kBase + 4 * sec;  // ~55 steps in
  auto in = simulate(j);
  MergePlan plan = plan_merge(in);
  apply_clock_estimate(plan, estimate_offsets_from_collectives(plan));
  const auto& r1 = rank(plan, 1);
  EXPECT_TRUE(r1.exited);
  EXPECT_TRUE(r1.ended_early);
  EXPECT_FALSE(rank(plan, 0).ended_early);
  EXPECT_GT(r1.proc->actions.size(), 0u);
  const StepSkew sk = analyze_steps(plan);
  EXPECT_GT(sk.ranks[1].seen, 30u);
  EXPECT_LT(sk.ranks[1].seen, sk.ranks[0].seen);
  // Steps compared: those of every rank that did not end early; rank 1 has
  // a part of them.
  EXPECT_EQ(sk.ranks[0].steps, sk.common_steps);
  EXPECT_EQ(sk.common_steps, sk.ranks[2].seen);
  EXPECT_LT(sk.ranks[1].steps, sk.common_steps);
  EXPECT_GT(sk.ranks[1].steps, 30u);
  EXPECT_EQ(plan.ranks[sk.straggler].rank, 3);
  const std::string text = render_cluster_summary(plan);
  EXPECT_TRUE(contains(text, "Ended early:\n  rank 1 (pid 101@node-a): exited ")) << text;
  // The others compare over their shared window; rank 1 is marked.
  EXPECT_TRUE(contains(text, "recorded on every rank that did not end early: 59.7")) << text;
  EXPECT_TRUE(contains(text, "| rank 0 | rank 1* | rank 2 |")) << text;
  EXPECT_TRUE(contains(text, "(*: ended early: its calls only up to its end; slowest and spread leave it out)\n"))
      << text;
  // training_step: (7.76 - 4.85) / mean of ranks 0, 2, 3 = 2.91 / 5.82
  EXPECT_TRUE(contains(text, " rank 3 |  50.0% |")) << text;
}

TEST(Cluster, JobEndIsNotAnEarlyExit) {
  JobSpec j = two_by_two();
  j.steps = 20;
  for (auto& r : j.ranks) r.exit = kBase + 3 * sec + r.rank * 100 * ms;  // after the last step
  auto in = simulate(j);
  MergePlan plan = plan_merge(in);
  for (auto& r : plan.ranks) {
    EXPECT_TRUE(r.exited);
    EXPECT_FALSE(r.ended_early) << r.label;
  }
}

TEST(Cluster, CutRecordingIsUsedAndFlagged) {
  JobSpec j = two_by_two();
  j.hosts[1].cut = true;
  j.hosts[1].detach = kBase + 3 * sec;
  auto in = simulate(j);
  EXPECT_FALSE(in[1].actions.complete);
  MergePlan plan = plan_merge(in);
  EXPECT_TRUE(rank(plan, 2).file_cut && rank(plan, 2).ended_early);
  EXPECT_TRUE(rank(plan, 3).file_cut && rank(plan, 3).ended_early);
  EXPECT_FALSE(rank(plan, 0).file_cut);
  const std::string text = render_cluster_summary(plan);
  EXPECT_TRUE(contains(text, "Recording ended abruptly: node-b.ltrace (node-b): no detach record")) << text;
  EXPECT_TRUE(contains(text, "rank 2 (pid 200@node-b): its recording ended ")) << text;
}

TEST(Cluster, MissingRankAndMissingNode) {
  JobSpec j = two_by_two();
  for (auto& r : j.ranks) r.world = 6;
  auto plan_in = simulate(j);
  MergePlan plan = plan_merge(plan_in);
  EXPECT_EQ(plan.world_size, 6);
  EXPECT_EQ(plan.missing_ranks, (std::vector<int>{4, 5}));
  ASSERT_EQ(plan.missing_nodes.size(), 1u);
  EXPECT_EQ(plan.missing_nodes[0].node, 2);
  const std::string text = render_cluster_summary(plan);
  EXPECT_TRUE(contains(text, "Ranks: 4 of world size 6, on 2 host(s)")) << text;
  EXPECT_TRUE(contains(text, "Missing: ranks 4, 5 (no trace); by 2 ranks per node, no trace of node 2 (ranks 4-5)"))
      << text;

  // One rank of a present node missing: no node is.
  JobSpec k = two_by_two();
  k.ranks.pop_back();
  auto in2 = simulate(k);
  MergePlan p2 = plan_merge(in2);
  EXPECT_EQ(p2.missing_ranks, (std::vector<int>{3}));
  EXPECT_TRUE(p2.missing_nodes.empty());
  EXPECT_TRUE(contains(render_cluster_summary(p2), "Missing: rank 3 (no trace)\n"));
}

TEST(Cluster, ActionTableRowsColumnsSlowestAndSpread) {
  auto in = simulate(two_by_two());
  MergePlan plan = plan_merge(in);
  const std::string text = render_cluster_summary(plan);
  // Over the window all ranks share (node-b attached 3 steps late): the
  // epoch began before it, so no rank has it; rows by the largest total.
  EXPECT_FALSE(contains(text, "| run_training_epoch ")) << text;
  EXPECT_TRUE(contains(text, "calls inside the 59.746 s recorded on every rank;")) << text;
  const auto batch = text.find("| run_training_batch ");
  const auto step = text.find("| [Strategy]DDPStrategy.training_step ");
  ASSERT_NE(batch, std::string::npos) << text;
  EXPECT_LT(batch, step);
  // training_step: 97 calls each; rank 3 is slowest; spread = (max - min) /
  // mean = (97 x 80 ms - 97 x 50 ms) / (97 x 57.5 ms) = 52.2%.
  const std::string row = text.substr(step, text.find('\n', step) - step);
  EXPECT_TRUE(contains(row, "| 4.85")) << row;
  EXPECT_TRUE(contains(row, "| 7.76")) << row;
  EXPECT_TRUE(contains(row, " rank 3 |  52.2% |")) << row;
  // An action of rank 0 only: "-" for the others.
  const auto ck = text.find("| [Callback]ModelCheckpoint.on_train_epoch_end ");
  ASSERT_NE(ck, std::string::npos);
  const std::string ckrow = text.substr(ck, text.find('\n', ck) - ck);
  EXPECT_EQ(std::count(ckrow.begin(), ckrow.end(), '-'), 3) << ckrow;
  EXPECT_TRUE(contains(text, "| Action "));
  EXPECT_TRUE(contains(text, "| rank 0 | rank 1 | rank 2 | rank 3 | slowest | spread |")) << text;
}

namespace {
// One file, many ranks, built directly.
std::vector<MergeInput> many_ranks(int n) {
  MergeInput in;
  in.file = "big.ltrace";
  in.actions.host = {"node-x", 1000 * sec, static_cast<std::uint64_t>(kBase)};
  for (int r = 0; r < n; ++r) {
    ProcessActions p;
    p.meta.pid = 1000 + r;
    p.meta.rank = r;
    p.meta.local_rank = r;
    p.meta.world_size = n;
    p.actions.push_back({"run_training_batch", {0.1 + r * 0.001, 0.1}});
    p.window_begin_ns = 1000 * sec;
    p.window_end_ns = 1010 * sec;
    in.actions.processes.push_back(std::move(p));
  }
  std::vector<MergeInput> v;
  v.push_back(std::move(in));
  return v;
}
}  // namespace

TEST(Cluster, RankColumnsAreTruncatedTo16) {
  auto in = many_ranks(20);
  MergePlan plan = plan_merge(in);
  const std::string text = render_cluster_summary(plan);
  EXPECT_TRUE(contains(text, "| rank 15 | slowest | spread |")) << text;
  EXPECT_FALSE(contains(text, "| rank 16 |"));
  EXPECT_TRUE(contains(text, "(4 more rank(s) not shown: rank 16 to rank 19; slowest and spread count them)"));
  // The slowest is past the shown columns.
  EXPECT_TRUE(contains(text, "| rank 19 |")) << text;
}

TEST(Cluster, UnrankedAndDuplicateProcesses) {
  auto in = many_ranks(2);
  // An unlabelled process, and a second rank 1 (a restarted worker).
  ProcessActions u;
  u.meta.pid = 77;
  u.actions.push_back({"x", {1.0}});
  in[0].actions.processes.push_back(u);
  ProcessActions d;
  d.meta.pid = 78;
  d.meta.rank = 1;
  d.meta.world_size = 2;
  d.actions.push_back({"x", {1.0}});
  in[0].actions.processes.push_back(d);
  MergePlan plan = plan_merge(in);
  ASSERT_EQ(plan.ranks.size(), 4u);
  EXPECT_EQ(plan.ranks[1].proc->meta.pid, 1001u);  // the one with more actions keeps the rank
  EXPECT_EQ(plan.ranks[2].label, "pid 77@node-x");
  EXPECT_EQ(plan.ranks[2].index, 2);
  EXPECT_EQ(plan.ranks[3].label, "pid 78@node-x (rank 1 again)");
  EXPECT_EQ(plan.ranks[3].rank, -1);
  EXPECT_TRUE(plan.missing_ranks.empty());
  ASSERT_EQ(plan.notes.size(), 1u);
  EXPECT_TRUE(contains(plan.notes[0], "rank 1 appears twice"));
}

TEST(Cluster, LightningLauncherParentIsRankZero) {
  auto in = many_ranks(2);
  auto& ps = in[0].actions.processes;
  ps[0].meta.rank = ps[0].meta.local_rank = ps[0].meta.world_size = -1;  // os.environ set at run time
  ps[1].meta.ppid = ps[0].meta.pid;
  MergePlan plan = plan_merge(in);
  EXPECT_EQ(plan.ranks[0].rank, 0);
  EXPECT_EQ(plan.ranks[0].proc->meta.pid, 1000u);
  EXPECT_TRUE(plan.missing_ranks.empty());
}

TEST(Cluster, NodeAndJobFromTheProcessEnvironment) {
  auto in = many_ranks(2);
  auto& ps = in[0].actions.processes;
  ps[0].meta.hostname = "node-x";      // as recorded on its own host
  ps[1].meta.hostname = "sim-node-1";  // a simulated node (UTS namespace) recorded from node-x
  ps[0].meta.slurm_job_id = "4242";
  ps[1].meta.slurm_job_id = "4243";
  MergePlan plan = plan_merge(in);
  EXPECT_EQ(plan.ranks[0].host, "node-x");
  EXPECT_EQ(plan.ranks[1].host, "sim-node-1");
  EXPECT_EQ(plan.hosts.size(), 1u);  // one clock
  const std::string text = render_cluster_summary(plan);
  EXPECT_TRUE(contains(text, "  node-x: rank 0 (pid 1000), rank 1 (pid 1001, node sim-node-1)\n")) << text;
  EXPECT_TRUE(contains(text, "Note: the ranks belong to different Slurm jobs (4242, 4243)")) << text;
  std::ostringstream o;
  write_merged_trace(plan, o);
  EXPECT_TRUE(contains(o.str(), "\"rank 1 (sim-node-1, pid 1001)\""));
  EXPECT_TRUE(contains(o.str(), "host sim-node-1 (recorded on node-x), pid 1001"));
}

TEST(Cluster, OneHostNameWithTwoClocksIsTwoHosts) {
  auto in = many_ranks(1);
  auto more = many_ranks(1);
  more[0].file = "other.ltrace";
  more[0].actions.processes[0].meta.rank = 1;
  more[0].actions.processes[0].meta.pid = 5;
  more[0].actions.host.monotonic_ns += 3600 * sec;  // booted an hour earlier
  in.push_back(std::move(more[0]));
  for (auto& x : in) x.actions.processes[0].meta.world_size = 2;
  MergePlan plan = plan_merge(in);
  ASSERT_EQ(plan.hosts.size(), 2u);
  EXPECT_EQ(plan.hosts[1].host, "node-x (2)");
  EXPECT_EQ(plan.ranks[1].host, "node-x (2)");
  ASSERT_FALSE(plan.notes.empty());
  EXPECT_TRUE(contains(plan.notes[0], "other.ltrace: host node-x again, with another clock")) << plan.notes[0];
  // A second file of the same machine (same mapping) shares its clock.
  auto same = many_ranks(1);
  in[1].actions.host = same[0].actions.host;
  EXPECT_EQ(plan_merge(in).hosts.size(), 1u);
}

TEST(Cluster, SummaryHeaderAndWaitSection) {
  auto in = simulate(two_by_two());
  MergePlan plan = plan_merge(in);
  ClockEstimate est = estimate_offsets_from_collectives(plan);
  apply_clock_estimate(plan, est);
  const std::string text = render_cluster_summary(plan, &est);
  EXPECT_EQ(text.rfind("Cluster Summary\n\nRanks: 4 of world size 4, on 2 host(s)\n"
                       "  node-a: rank 0 (pid 100), rank 1 (pid 101)\n"
                       "  node-b: rank 2 (pid 200), rank 3 (pid 201)\n"
                       "Window: 2027-01-15 07:59:59.995 UTC, ",
                       0),
            0u)
      << text;
  EXPECT_TRUE(contains(text, "Missing: none\nEnded early: none\n")) << text;
  EXPECT_TRUE(contains(text,
                       "Clock: the common clock is node-a's wall clock; corrections added to each host's:\n"
                       "  node-b: -3.69") ||
              contains(text, "  node-b: -3.70"))
      << text;
  EXPECT_TRUE(contains(text, ", estimated from ")) << text;
  EXPECT_TRUE(contains(text, "Straggler: rank 3 (pid 201@node-b): mean load ")) << text;
  EXPECT_TRUE(contains(text,
                       "Time waiting in collectives (estimate: per step, a rank's [Strategy]DDPStrategy.backward "
                       "time minus the fastest rank's"))
      << text;
  EXPECT_TRUE(contains(text, "Steps with the largest start skew"));
}

TEST(Merge, MergedTraceHasOneProcessGroupPerRankOnTheCommonClock) {
  auto in = simulate(two_by_two());
  MergePlan plan = plan_merge(in);
  apply_clock_estimate(plan, estimate_offsets_from_collectives(plan));
  std::ostringstream o;
  write_merged_trace(plan, o);
  const std::string t = o.str();
  // HTA reads the rank from the first line that names one.
  const auto first_rank = t.find("\"rank\": ");
  EXPECT_EQ(t.substr(0, first_rank), "{\n\"distributedInfo\": {\"backend\": \"unknown\", ");
  EXPECT_TRUE(contains(t, "\"rank\": 0, \"world_size\": 4},\n"));
  EXPECT_TRUE(contains(t,
                       "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 2, \"tid\": 0, \"args\": {\"name\": "
                       "\"rank 2 (node-b, pid 200)\"}}"))
      << t.substr(0, 3000);
  EXPECT_TRUE(contains(t,
                       "{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": 3, \"tid\": 0, \"args\": "
                       "{\"sort_index\": 3}}"));
  // rank 2's first training batch, at its corrected wall time.
  const RankRun& r2 = rank(plan, 2);
  const ActionInterval* first = nullptr;
  for (auto& iv : r2.proc->intervals)
    if (r2.proc->actions[iv.action].name == "run_training_batch" && (!first || iv.begin_ns < first->begin_ns))
      first = &iv;
  ASSERT_NE(first, nullptr);
  const std::int64_t wall = r2.common_ns(first->begin_ns);
  char ts[64];
  std::snprintf(ts, sizeof ts, "\"pid\": 2, \"tid\": 200, \"ts\": %lld.%03lld,", static_cast<long long>(wall / 1000),
                static_cast<long long>(wall % 1000));
  EXPECT_TRUE(contains(t, ts)) << ts;
  // ...which is the true time within the estimator's bound.
  const std::int64_t true_begin = static_cast<std::int64_t>(first->begin_ns) + (kBase - 5000 * sec);
  EXPECT_LE(std::llabs(wall - true_begin), 25 * us);
  EXPECT_TRUE(contains(t, "\"baseTimeNanoseconds\": 0,"));
  EXPECT_TRUE(contains(t, "{\"host\": \"node-b\", \"clock_offset_ns\": "));
  EXPECT_EQ(t.substr(t.size() - 32), "\n],\n\"traceName\": \"ltrace-bpf\"\n}\n");
}

TEST(Merge, RankTracesCarryTheirOwnRank) {
  auto in = simulate(two_by_two());
  MergePlan plan = plan_merge(in);
  for (std::size_t i = 0; i < plan.ranks.size(); ++i) {
    std::ostringstream o;
    write_rank_trace(plan, i, o);
    const std::string t = o.str();
    const auto nl = t.find('\n', 2);
    const std::string line2 = t.substr(2, nl - 2);
    EXPECT_EQ(line2, "\"distributedInfo\": {\"backend\": \"unknown\", \"rank\": " + std::to_string(i) +
                         ", \"world_size\": 4},");
    EXPECT_EQ(t.find("\"rank\": "), t.find("\"rank\": " + std::to_string(i) + ","));
    EXPECT_EQ(rank_trace_filename(plan.ranks[i]), "rank-" + std::to_string(i) + ".json");
    // kineto: the OS pid
    const std::string pid = std::to_string(plan.ranks[i].proc->meta.pid);
    EXPECT_TRUE(contains(t, "\"name\": \"process_name\", \"pid\": " + pid + ",")) << t.substr(0, 2000);
    EXPECT_TRUE(contains(t, "\"hostname\": \"" + plan.ranks[i].host + "\""));
    EXPECT_FALSE(contains(t, "\"pid\": " + std::to_string(plan.ranks[(i + 1) % 4].proc->meta.pid) + ","));
  }
}

TEST(Merge, OpSlicesOfEachRankAreOnTheCommonClock) {
  auto in = simulate(two_by_two());
  OpsReport ops;
  ops.names = {"aten::mm"};
  const auto& p = in[1].actions.processes[0];  // rank 2 (pid 200)
  const auto b = p.intervals.front().begin_ns;
  ops.intervals.push_back({p.meta.pid, p.meta.pid, 0, 0, b + 10 * us, b + 30 * us});
  in[1].ops = ops;
  MergePlan plan = plan_merge(in);
  std::ostringstream o;
  write_merged_trace(plan, o);
  const std::string t = o.str();
  const std::int64_t wall = rank(plan, 2).common_ns(b + 10 * us);
  char ev[160];
  std::snprintf(ev, sizeof ev,
                "\"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"pid\": 2, \"tid\": 200, \"ts\": %lld.%03lld",
                static_cast<long long>(wall / 1000), static_cast<long long>(wall % 1000));
  EXPECT_TRUE(contains(t, ev)) << ev;
}

TEST(Merge, OneHostNeedsNoEstimate) {
  auto in = many_ranks(3);
  MergePlan plan = plan_merge(in);
  ClockEstimate est = estimate_offsets_from_collectives(plan);
  EXPECT_EQ(est.hosts.size(), 1u);
  EXPECT_FALSE(est.hosts[0].estimated);
  const std::string text = render_cluster_summary(plan, &est);
  EXPECT_FALSE(contains(text, "Clock:"));
}

TEST(Merge, NoRanksAtAll) {
  std::vector<MergeInput> in(1);
  in[0].file = "empty.ltrace";
  MergePlan plan = plan_merge(in);
  EXPECT_TRUE(plan.ranks.empty());
  const std::string text = render_cluster_summary(plan);
  EXPECT_TRUE(contains(text, "No process in these traces ran Lightning actions.")) << text;
  EXPECT_TRUE(contains(text, "Note: empty.ltrace: no HOST_INFO clock pair")) << text;
  std::ostringstream o;
  write_merged_trace(plan, o);
  EXPECT_TRUE(contains(o.str(), "\"traceEvents\": [\n],"));
}

// The I/O layer of `report DIR --merge`: a directory of trace files in,
// per-rank reports, the summary and the traces out.
TEST(MergeFiles, ReadsADirectoryOfTraceFilesAndWritesEverything) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("lt-merge-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "traces" / "sub");
  auto traces = simulate_traces(two_by_two());
  for (std::size_t i = 0; i < traces.size(); ++i) {
    tracefile::TraceWriter w((dir / "traces" / (i ? "sub" : "") / traces[i].first).string());
    traces[i].second.for_each([&](const lt_event_header& h, const std::byte* p) { w.append(p, h.size); });
    w.close();
  }
  std::ofstream(dir / "traces" / "notes.txt") << "not a trace\n";

  auto inputs = read_merge_inputs((dir / "traces").string(), false);
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(fs::path(inputs[0].file).filename(), "node-a.ltrace");
  EXPECT_EQ(fs::path(inputs[1].file).filename(), "node-b.ltrace");
  EXPECT_EQ(inputs[1].actions.host.hostname, "node-b");

  MergeOptions mo;
  const Options defaults;  // each rank's recorded reports: Simple here
  mo.rank_reports = [&](const std::string& file, const OutputOptions& out) {
    return write_rank_reports(defaults, file, out);
  };
  mo.reports.dirpath = (dir / "reports").string();
  mo.reports.filename = "perf";
  mo.chrome_path = (dir / "merged.json").string();
  mo.chrome_dir = (dir / "ranks").string();
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  const int n = write_merged_reports(inputs, mo);
  const std::string out = testing::internal::GetCapturedStdout();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(n, 4);
  EXPECT_TRUE(contains(out, "Cluster Summary\n")) << out;
  EXPECT_TRUE(contains(out, "Straggler: rank 3")) << out;
  EXPECT_TRUE(contains(err, "wrote " + (dir / "merged.json").string())) << err;
  // Lightning's per-rank file names, one directory per host (local ranks repeat).
  for (const char* f :
       {"node-a/fit-perf-0.txt", "node-a/fit-perf-1.txt", "node-b/fit-perf-0.txt", "node-b/fit-perf-1.txt"})
    EXPECT_TRUE(fs::exists(dir / "reports" / f)) << f << "\n" << err;
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(fs::exists(dir / "ranks" / ("rank-" + std::to_string(r) + ".json")));
  EXPECT_GT(fs::file_size(dir / "merged.json"), 10000u);

  EXPECT_THROW(read_merge_inputs((dir / "ranks").string(), false), Error);
  fs::remove_all(dir);
}

// The cluster agents' CLOCK_SYNC records: every host measured against the
// coordinator, whose wall clock reads true + 1.2 ms.  node-a's reads true,
// node-b's true + 3.7 ms: the corrections are +1.2 ms and -2.5 ms.
namespace {
std::vector<MergeInput> simulate_measured(std::int64_t coordinator_error, std::int64_t measurement_error_b) {
  JobSpec j = two_by_two();
  std::vector<MergeInput> out;
  std::size_t h = 0;
  for (auto& [file, trace] : simulate_traces(j)) {
    const auto& hs = j.hosts[h++];
    for (std::uint32_t phase = 0; phase < 2; ++phase) {
      lt_clock_sync_event c{};
      c.hdr = {
          LT_EV_CLOCK_SYNC, sizeof c, 0, 0, 0, static_cast<std::uint64_t>((phase ? hs.detach : hs.attach) - hs.boot)};
      c.offset_ns = coordinator_error - hs.wall_error + (h == 2 ? measurement_error_b * (phase ? 1 : -1) : 0);
      c.delay_ns = 60 * us;
      c.samples = 32;
      c.phase = phase;
      std::strncpy(c.reference, "login1", sizeof c.reference - 1);
      trace.append(c);
    }
    out.push_back({file, aggregate_actions(trace, true), std::nullopt});
  }
  return out;
}
}  // namespace

TEST(Cluster, ClockSyncRecordsAreMeasuredCorrections) {
  auto in = simulate_measured(1'200 * us, 10 * us);
  ASSERT_EQ(in[0].actions.host.clock_syncs.size(), 2u);
  EXPECT_EQ(in[0].actions.host.clock_syncs[0].reference, "login1");
  EXPECT_TRUE(in[0].actions.host.clock_syncs[1].at_detach);
  MergePlan plan = plan_merge(in);
  ASSERT_EQ(plan.hosts.size(), 2u);
  for (auto& hc : plan.hosts) {
    EXPECT_EQ(hc.source, ClockSource::measured) << hc.host;
    EXPECT_EQ(hc.measured_against, "login1");
    EXPECT_EQ(hc.measurements, 2u);
  }
  EXPECT_EQ(plan.hosts[0].clock_offset_ns, 1'200 * us);
  EXPECT_EQ(plan.hosts[0].residual_ns, 30 * us);  // half the round trip, no drift
  // node-b: the mean of -2.51 and -2.49 ms; bound 30 us + half of 20 us drift.
  EXPECT_EQ(plan.hosts[1].clock_offset_ns, -2'500 * us);
  EXPECT_EQ(plan.hosts[1].drift_ns, 20 * us);
  EXPECT_EQ(plan.hosts[1].residual_ns, 40 * us);
  // The same instant on both hosts reads the same on the common clock.
  const auto& r0 = rank(plan, 0);
  const auto& r2 = rank(plan, 2);
  const std::int64_t t = kBase + 10 * sec;
  EXPECT_EQ(r0.common_ns(static_cast<std::uint64_t>(t - (kBase - 1000 * sec))) - (t + 1'200 * us), 0);
  EXPECT_EQ(r2.common_ns(static_cast<std::uint64_t>(t - (kBase - 5000 * sec))) - (t + 1'200 * us), 0);
  // The collectives agree with the measurement: the estimate only checks it.
  ClockEstimate est = estimate_offsets_from_collectives(plan);
  apply_clock_estimate(plan, est, true);
  EXPECT_EQ(plan.hosts[1].source, ClockSource::measured);
  ASSERT_TRUE(est.hosts[1].estimated) << est.hosts[1].why_not;
  EXPECT_LE(std::llabs(est.hosts[1].change_ns), 30 * us);
  const std::string text = render_cluster_summary(plan, &est);
  EXPECT_TRUE(contains(text, "Clock: the common clock is login1's wall clock (the cluster coordinator")) << text;
  EXPECT_TRUE(contains(text,
                       "node-a: +1.200 ms, measured against login1, within 0.030 ms (2 measurements, drift "
                       "+0.000 ms)"))
      << text;
  EXPECT_TRUE(contains(text,
                       "node-b: -2.500 ms, measured against login1, within 0.040 ms (2 measurements, drift "
                       "+0.020 ms)"))
      << text;
}

TEST(Cluster, MeasuredOffsetOfNoRecordsIsNone) {
  EXPECT_FALSE(measured_offset({}).has_value());
  auto m = measured_offset({{0, -100, 41, 8, false, "c"}});
  ASSERT_TRUE(m);
  EXPECT_EQ(m->offset_ns, -100);
  EXPECT_EQ(m->bound_ns, 21);  // half of 41, rounded up
  EXPECT_EQ(m->drift_ns, 0);
}

// node-a (rank 0's host) lost its clock exchange; node-b was measured: the
// common clock stays the coordinator's, with node-b the reference, and
// node-a is estimated against it from the collectives.
TEST(Cluster, UnmeasuredRankZeroHostIsEstimatedAgainstAMeasuredOne) {
  auto in = simulate_measured(1'200 * us, 0);
  in[0].actions.host.clock_syncs.clear();
  MergePlan plan = plan_merge(in);
  EXPECT_EQ(plan.hosts[0].source, ClockSource::recorded);
  EXPECT_EQ(plan.hosts[1].source, ClockSource::measured);
  EXPECT_EQ(plan.reference_host, 1u);
  ClockEstimate est = estimate_offsets_from_collectives(plan);
  apply_clock_estimate(plan, est, true);
  ASSERT_EQ(plan.hosts[0].source, ClockSource::estimated) << est.hosts[0].why_not;
  // node-a reads true time: its correction is the coordinator's +1.2 ms.
  EXPECT_LE(std::llabs(plan.hosts[0].clock_offset_ns - 1'200 * us), 25 * us) << plan.hosts[0].clock_offset_ns;
  EXPECT_EQ(plan.hosts[1].clock_offset_ns, -2'500 * us);
  const std::string text = render_cluster_summary(plan, &est);
  EXPECT_TRUE(contains(text, "Clock: the common clock is login1's wall clock")) << text;
  EXPECT_TRUE(contains(text, "node-a: +1.2")) << text;
}
