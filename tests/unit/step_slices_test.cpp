// The step timeline's data: which steps the page embeds (priority and byte
// budget) and each step's slices (contained actions, depth per thread).
#include "reports/aggregate/step_slices.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <utility>

#include "bpf/events.h"
#include "reports/export/dashboard.h"
#include "reports/export/step_timeline.h"

using namespace lt;

namespace {

std::vector<StepRecord> steps_of(const std::vector<std::uint64_t>& durations) {
  std::vector<StepRecord> v;
  std::uint64_t t = 1000;
  for (std::size_t i = 0; i < durations.size(); ++i) {
    StepRecord r;
    r.index = static_cast<std::uint32_t>(i);
    r.begin_ns = t;
    r.end_ns = t + durations[i];
    t = r.end_ns + 10;
    v.push_back(r);
  }
  return v;
}

// Process 7 with one training step, [100, 200] on thread 1, its
// training_step action spanning it.
std::pair<ProcessActions, ProcessSteps> one_training_step() {
  ProcessActions p;
  p.meta.pid = 7;
  p.actions.emplace_back("[Strategy]S.training_step");
  p.intervals.push_back({0, 1, 100, 200, false});
  ProcessSteps steps;
  steps.pid = 7;
  steps.tid = 1;
  steps.train = steps_of({100});
  steps.train[0].begin_ns = 100;
  steps.train[0].end_ns = 200;
  return {p, steps};
}

}  // namespace

TEST(StepSlices, PrioritySlowestThenMedianFirstLast) {
  // 30 steps: duration 100 + (i * 7 % 30), all distinct; step 29 not among the slowest 3.
  std::vector<std::uint64_t> d;
  for (std::uint64_t i = 0; i < 30; ++i) d.push_back(100 + (i * 7 % 30));
  const auto steps = steps_of(d);
  const auto order = timeline_priority(steps, 3);
  std::vector<std::size_t> by_dur(30);
  for (std::size_t i = 0; i < 30; ++i) by_dur[i] = i;
  std::sort(by_dur.begin(), by_dur.end(), [&](auto a, auto b) { return d[a] > d[b]; });
  ASSERT_EQ(order.size(), 6u);
  EXPECT_EQ(order[0], by_dur[0]);
  EXPECT_EQ(order[1], by_dur[1]);
  EXPECT_EQ(order[2], by_dur[2]);
  // Median by nearest rank: the 15th shortest of 30.
  std::vector<std::uint64_t> sorted = d;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(d[order[3]], sorted[14]);
  EXPECT_EQ(order[4], 0u);
  EXPECT_EQ(order[5], 29u);
}

TEST(StepSlices, PriorityHasNoRepeats) {
  // One step: slowest, median, first and last are the same step.
  EXPECT_EQ(timeline_priority(steps_of({5}), 20), std::vector<std::size_t>{0});
  EXPECT_TRUE(timeline_priority({}, 20).empty());
}

TEST(StepSlices, BudgetKeepsPriorityOrderAndCountsLeftOut) {
  const auto steps = steps_of({10, 50, 40, 30, 20});  // priority (slowest 2): 1, 2, then median 3, first 0, last 4
  const std::vector<std::size_t> counts = {10, 10, 10, 1000, 10};
  // Room for 25 slices: steps 1 and 2 (20 slices); 3 (1000) does not fit; 0 does not fit either (30 > 25).
  const auto c = choose_timeline_steps(steps, counts, 25 * kTimelineSliceBytes, 2);
  EXPECT_EQ(c.default_step, 1u);
  EXPECT_EQ(c.steps, (std::vector<std::size_t>{1, 2}));
  EXPECT_EQ(c.left_out, 3u);
  EXPECT_EQ(c.slice_cap, 0u);
  // A smaller step later in priority still fits after a big one is skipped.
  const auto c2 = choose_timeline_steps(steps, counts, 35 * kTimelineSliceBytes, 2);
  EXPECT_EQ(c2.steps, (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_EQ(c2.left_out, 2u);
}

TEST(StepSlices, OtherRanksStepsAreTakenAfterItsOwnWhileTheyFit) {
  const auto steps = steps_of({10, 50, 40, 30, 20, 15, 12});  // own (slowest 1): 1, median 4, first 0, last 6
  const std::vector<std::size_t> counts = {10, 10, 10, 10, 10, 100, 10};
  // also: 5 (too big), 1 (already own), 9 (no such step), 3, then 2 (no room left).
  const auto c = choose_timeline_steps(steps, counts, 50 * kTimelineSliceBytes, 1, {5, 1, 9, 3, 2});
  EXPECT_EQ(c.default_step, 1u);
  EXPECT_EQ(c.steps, (std::vector<std::size_t>{0, 1, 3, 4, 6}));
  EXPECT_EQ(c.left_out, 2u);  // 5 and 2
}

TEST(StepSlices, SlowestStepAloneOverBudgetIsCut) {
  const auto steps = steps_of({10, 50});
  const auto c = choose_timeline_steps(steps, {10, 100}, 20 * kTimelineSliceBytes, 20);
  EXPECT_EQ(c.default_step, 1u);
  EXPECT_EQ(c.slice_cap, 20u);
  EXPECT_EQ(c.steps, std::vector<std::size_t>{1});  // nothing else fits after the cut step
  EXPECT_EQ(c.left_out, 1u);
}

TEST(StepSlices, ContainedActionsWithDepthPerThread) {
  ProcessActions p;
  p.actions.emplace_back("outer");   // 0
  p.actions.emplace_back("inner");   // 1
  p.actions.emplace_back("leaf");    // 2
  p.actions.emplace_back("fit");     // 3: straddles the step
  p.actions.emplace_back("worker");  // 4: another thread
  // Completion order (inner ones first), as the aggregator keeps them.
  p.intervals.push_back({2, 1, 130, 140, false});
  p.intervals.push_back({1, 1, 120, 150, false});
  p.intervals.push_back({1, 1, 160, 170, false});
  p.intervals.push_back({0, 1, 100, 200, false});
  p.intervals.push_back({4, 2, 110, 190, false});
  p.intervals.push_back({3, 1, 50, 500, false});
  p.intervals.push_back({1, 1, 195, 260, false});  // ends after the step
  const auto by_begin = sorted_by_begin(p);
  const auto s = step_slices(p, by_begin, 100, 200);
  ASSERT_EQ(s.size(), 5u);
  // Thread 1 first: outer (0), inner (1), leaf (2), inner (1); then thread 2.
  EXPECT_EQ(s[0].action, 0u);
  EXPECT_EQ(s[0].depth, 0u);
  EXPECT_EQ(s[0].begin_ns, 0u);
  EXPECT_EQ(s[0].end_ns, 100u);
  EXPECT_EQ(s[1].action, 1u);
  EXPECT_EQ(s[1].depth, 1u);
  EXPECT_EQ(s[2].action, 2u);
  EXPECT_EQ(s[2].depth, 2u);
  EXPECT_EQ(s[3].action, 1u);
  EXPECT_EQ(s[3].depth, 1u);
  EXPECT_EQ(s[3].begin_ns, 60u);
  EXPECT_EQ(s[4].tid, 2u);
  EXPECT_EQ(s[4].depth, 0u);
  EXPECT_EQ(s[4].begin_ns, 10u);
  EXPECT_EQ(s[4].end_ns, 90u);
}

TEST(StepSlices, PageEmbedsOnlyChosenStepsAndEscapesNames) {
  // 40 steps of one action each, named with a "</script>" to be escaped.
  ProcessActions p;
  p.meta.pid = 7;
  p.actions.emplace_back("</script><b>x");
  ProcessSteps s;
  s.pid = s.tid = 7;
  std::vector<std::uint64_t> d;
  for (std::uint64_t i = 0; i < 40; ++i) d.push_back(1000 + i);
  s.train = steps_of(d);
  for (auto& r : s.train) p.intervals.push_back({0, 7, r.begin_ns, r.end_ns, false});
  std::ostringstream out;
  write_step_timeline(p, s, "p7", out);
  const std::string html = out.str();
  EXPECT_EQ(html.find("</script><b>"), std::string::npos);
  EXPECT_NE(html.find("\\u003c/script>\\u003cb>x"), std::string::npos);
  // 20 slowest (steps 20..39) + median (19) + first (0): 22 steps, one slice each.
  std::size_t entries = 0;
  for (std::size_t at = html.find("{\"i\":"); at != std::string::npos; at = html.find("{\"i\":", at + 1)) ++entries;
  EXPECT_EQ(entries, 22u);
  EXPECT_NE(html.find("\"def\":39"), std::string::npos);
  EXPECT_NE(html.find("{\"i\":19,"), std::string::npos);
  EXPECT_EQ(html.find("{\"i\":18,"), std::string::npos);
  EXPECT_NE(html.find("<noscript>"), std::string::npos);
}

TEST(StepSlices, GpuWorkOverlappingTheStepOnStreamRows) {
  GpuReport gpu;
  gpu.names = {"gemm", "memcpy HtoD", "other_pid"};
  auto add = [&](std::uint32_t pid, std::uint16_t kind, std::uint32_t stream, std::uint64_t b, std::uint64_t e,
                 std::uint32_t name) {
    GpuSlice g;
    g.pid = pid;
    g.kind = kind;
    g.stream = stream;
    g.begin_ns = b;
    g.end_ns = e;
    g.name = name;
    gpu.slices.push_back(g);
  };
  add(7, LT_GPU_KERNEL, 3, 150, 180, 0);
  add(7, LT_GPU_MEMCPY, 2, 90, 120, 1);    // straddles the begin: clipped
  add(7, LT_GPU_KERNEL, 3, 190, 400, 0);   // straddles the end: clipped
  add(7, LT_GPU_KERNEL, 3, 10, 50, 0);     // before the step
  add(7, LT_GPU_RUNTIME, 0, 120, 130, 0);  // an API call: not drawn on a stream
  add(8, LT_GPU_KERNEL, 3, 150, 160, 2);   // another process
  const auto w = gpu_work_of(gpu, 7);
  EXPECT_EQ(w.longest, 210u);
  const auto s = step_gpu_slices(w, 100, 200);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].tid, 2u);  // stream 2 first
  EXPECT_EQ(s[0].begin_ns, 0u);
  EXPECT_EQ(s[0].end_ns, 20u);
  EXPECT_EQ(s[1].tid, 3u);
  EXPECT_EQ(s[1].begin_ns, 50u);
  EXPECT_EQ(s[1].end_ns, 80u);
  EXPECT_EQ(s[2].begin_ns, 90u);
  EXPECT_EQ(s[2].end_ns, 100u);
  EXPECT_EQ(s[2].depth, 0u);

  // On the page: a "g" array with the kernels' names.
  ProcessActions p;
  p.meta.pid = 7;
  p.actions.emplace_back("run_training_batch");
  p.intervals.push_back({0, 7, 100, 200, false});
  ProcessSteps steps;
  steps.pid = steps.tid = 7;
  steps.train = steps_of({100});
  steps.train[0].begin_ns = 100;
  steps.train[0].end_ns = 200;
  std::ostringstream out;
  write_step_timeline(p, steps, "p7", out, &gpu);
  const std::string html = out.str();
  EXPECT_NE(html.find("\"names\":[\"run_training_batch\",\"memcpy HtoD\",\"gemm\"]"), std::string::npos) << html;
  EXPECT_NE(html.find("\"s\":[[0,7,0,100,0]],\"g\":[[1,2,0,20,0],[2,3,50,80,0],[2,3,90,100,0]]"), std::string::npos)
      << html;
}

namespace {

// Op calls of pid 7 as the op aggregator keeps them (entry order).
OpsReport ops_of(const std::vector<OpInterval>& v) {
  OpsReport r;
  r.names = {"aten::linear", "aten::addmm", "aten::relu", "aten::mse_loss", "aten::mm"};
  r.intervals = v;
  return r;
}

}  // namespace

TEST(StepSlices, OpsNestBelowTheActionTheyRunIn) {
  // Step [100, 200] on thread 1: training_step [110, 150] holding forward
  // ops, backward [150, 190]; thread 2 runs one op in no action.
  ProcessActions p;
  p.actions.emplace_back("training_step");  // 0
  p.actions.emplace_back("backward");       // 1
  p.actions.emplace_back("batch");          // 2
  p.intervals.push_back({2, 1, 100, 200, false});
  p.intervals.push_back({0, 1, 110, 150, false});
  p.intervals.push_back({1, 1, 150, 190, false});
  const auto by_begin = sorted_by_begin(p);
  const auto actions = step_slices(p, by_begin, 100, 200);
  ASSERT_EQ(actions.size(), 3u);  // batch (0), training_step (1), backward (1)
  const OpsReport ops = ops_of({
      {7, 1, 0, 1, 112, 130},  // linear, in training_step
      {7, 1, 1, 2, 113, 129},  // addmm inside linear
      {7, 1, 2, 1, 131, 170},  // relu: its end (an upper bound) lies in backward: clipped at training_step's end
      {7, 1, 4, 1, 155, 160},  // mm in backward
      {7, 1, 3, 1, 192, 195},  // after backward, in batch's own time
      {7, 2, 4, 1, 120, 125},  // another thread, no action there
      {8, 1, 4, 1, 120, 125},  // another process
  });
  const auto w = op_work_of(ops, 7);
  EXPECT_EQ(step_op_count(w, 100, 200), 6u);
  const auto s = step_op_slices(w, actions, 100, 200);
  ASSERT_EQ(s.size(), 6u);
  // Thread 1 by begin: linear, addmm, relu, mm, mse_loss; then thread 2.
  EXPECT_EQ(s[0].action, 0u);
  EXPECT_EQ(s[0].depth, 2u);  // below training_step (depth 1)
  EXPECT_EQ(s[0].level, 0u);
  EXPECT_EQ(s[1].action, 1u);
  EXPECT_EQ(s[1].depth, 3u);  // below linear
  EXPECT_EQ(s[1].level, 1u);
  EXPECT_EQ(s[2].action, 2u);
  EXPECT_EQ(s[2].begin_ns, 31u);
  EXPECT_EQ(s[2].end_ns, 50u);  // clipped to training_step's end
  EXPECT_EQ(s[2].depth, 2u);
  EXPECT_EQ(s[3].action, 4u);
  EXPECT_EQ(s[3].depth, 2u);  // below backward (depth 1)
  EXPECT_EQ(s[4].action, 3u);
  EXPECT_EQ(s[4].depth, 1u);  // below batch only
  EXPECT_EQ(s[5].tid, 2u);
  EXPECT_EQ(s[5].depth, 0u);
  // No op overlaps an action drawn on its own row.
  for (const auto& o : s)
    for (const auto& a : actions)
      if (a.tid == o.tid && a.depth == o.depth) {
        EXPECT_TRUE(a.end_ns <= o.begin_ns || o.end_ns <= a.begin_ns);
      }
}

TEST(StepSlices, OpsStraddlingTheStepEdges) {
  ProcessActions p;
  const OpsReport ops = ops_of({
      {7, 1, 0, 1, 90, 150},   // begins before the step: the previous step's, not drawn
      {7, 1, 1, 2, 95, 120},   // ...and its child
      {7, 1, 2, 1, 180, 260},  // begins inside, ends (upper bound) after: clipped to the step's end
      {7, 1, 3, 1, 200, 210},  // begins at the step's end: not in it
  });
  const auto w = op_work_of(ops, 7);
  EXPECT_EQ(step_op_count(w, 100, 200), 1u);
  const auto s = step_op_slices(w, {}, 100, 200);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].action, 2u);
  EXPECT_EQ(s[0].begin_ns, 80u);
  EXPECT_EQ(s[0].end_ns, 100u);
  EXPECT_EQ(s[0].depth, 0u);
}

TEST(StepSlices, ThinningKeepsOutermostLongestFirst) {
  std::vector<StepSlice> ops = {
      {0, 1, 0, 10, 2, 0},   // outer, 10 long
      {1, 1, 1, 9, 3, 1},    // its child, 8
      {2, 1, 20, 60, 2, 0},  // outer, 40 long
      {3, 1, 21, 59, 3, 1},  // its child, 38
      {4, 1, 22, 23, 4, 2},  // grandchild
      {0, 1, 70, 71, 2, 0},  // outer, 1 long
  };
  EXPECT_EQ(thin_ops(ops, 10).size(), 6u);
  const auto t = thin_ops(ops, 4);
  ASSERT_EQ(t.size(), 4u);
  // The 3 outer calls, then the longest child; back in time order.
  EXPECT_EQ(t[0].begin_ns, 0u);
  EXPECT_EQ(t[1].begin_ns, 20u);
  EXPECT_EQ(t[2].begin_ns, 21u);
  EXPECT_EQ(t[3].begin_ns, 70u);
  EXPECT_TRUE(thin_ops(ops, 0).empty());
}

TEST(StepSlices, OpCapsShareWhatTheActionsLeftInPriority) {
  const auto steps = steps_of({10, 50, 40});  // priority: 1, 2, then 0 (median 2, first 0, last 2)
  const auto c = choose_timeline_steps(steps, {5, 5, 5}, 100 * kTimelineSliceBytes, 2);
  EXPECT_EQ(c.used_bytes, 15 * kTimelineSliceBytes);
  EXPECT_EQ(c.priority, (std::vector<std::size_t>{1, 2, 0}));
  // 85 slices left: the slowest keeps its 60 ops, the next 25 of 60, the last none.
  EXPECT_EQ(timeline_op_caps(c, {60, 60, 60}, 100 * kTimelineSliceBytes), (std::vector<std::size_t>{0, 60, 25}));
  EXPECT_EQ(timeline_op_caps(c, {1, 2, 3}, 100 * kTimelineSliceBytes), (std::vector<std::size_t>{1, 2, 3}));
}

TEST(StepSlices, PageMarksOpsAndSaysWhenThinned) {
  // One step of one action holding 3 ops (two nested): all fit, nothing thinned.
  ProcessActions p;
  p.meta.pid = 7;
  p.actions.emplace_back("[Strategy]S.training_step");
  p.intervals.push_back({0, 7, 100, 200, false});
  ProcessSteps steps;
  steps.pid = steps.tid = 7;
  steps.train = steps_of({100});
  steps.train[0].begin_ns = 100;
  steps.train[0].end_ns = 200;
  const OpsReport ops = ops_of({{7, 7, 0, 1, 110, 150}, {7, 7, 1, 2, 111, 149}, {7, 7, 4, 1, 160, 170}});
  std::ostringstream out;
  write_step_timeline(p, steps, "p7", out, nullptr, &ops);
  const std::string html = out.str();
  EXPECT_NE(html.find("\"names\":[\"[Strategy]S.training_step\",\"aten::linear\",\"aten::addmm\",\"aten::mm\"]"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("\"s\":[[0,7,0,100,0]],\"o\":[[1,7,10,50,1],[2,7,11,49,2],[3,7,60,70,1]]}"), std::string::npos)
      << html;
  EXPECT_EQ(html.find("\"ot\""), std::string::npos);
  EXPECT_EQ(html.find("ops thinned"), std::string::npos);
  std::ostringstream head;
  write_step_timeline_head(head);
  EXPECT_NE(head.str().find("'sl op'"), std::string::npos);  // the script draws them as op slices
}

TEST(StepSlices, PageSaysOpsWereThinned) {
  // 2 steps of one action; the slowest holds 60,000 ops: over the 2 MiB budget (52,428 slices).
  ProcessActions p;
  p.meta.pid = 7;
  p.actions.emplace_back("[Strategy]S.training_step");
  ProcessSteps steps;
  steps.pid = steps.tid = 7;
  steps.train = steps_of({100, 10'000'000});
  for (auto& r : steps.train) p.intervals.push_back({0, 7, r.begin_ns, r.end_ns, false});
  std::vector<OpInterval> v;
  for (std::uint64_t k = 0; k < 60000; ++k)
    v.push_back({7, 7, 4, 1, steps.train[1].begin_ns + 1 + k * 100, steps.train[1].begin_ns + 50 + k * 100});
  const OpsReport ops = ops_of(v);
  std::ostringstream out;
  write_step_timeline(p, steps, "p7", out, nullptr, &ops);
  const std::string html = out.str();
  const std::size_t kept = kTimelineBudgetBytes / kTimelineSliceBytes - 2;  // the two steps' actions first
  EXPECT_NE(html.find("\"ot\":" + std::to_string(60000 - kept)), std::string::npos);
  EXPECT_NE(html.find("ops thinned in 1 of the 1 steps with ops"), std::string::npos);
  EXPECT_LT(html.size(), 2 * kTimelineBudgetBytes);
}

TEST(StepSlices, OneTimelinePerStageSharingTheBudget) {
  ProcessActions p;
  p.meta.pid = 7;
  p.actions.emplace_back("[Strategy]S.training_step");
  p.actions.emplace_back("[Strategy]S.predict_step");
  ProcessSteps steps;
  steps.pid = steps.tid = 7;
  steps.train = steps_of({100, 200});
  steps.predict = steps_of({50, 60, 70});
  for (auto& r : steps.predict) r.begin_ns += 10000, r.end_ns += 10000;
  for (auto& r : steps.train) p.intervals.push_back({0, 7, r.begin_ns, r.end_ns, false});
  for (auto& r : steps.predict) p.intervals.push_back({1, 7, r.begin_ns, r.end_ns, false});
  std::ostringstream out;
  write_step_timeline(p, steps, "p7", out);
  const std::string html = out.str();
  EXPECT_NE(html.find("id=\"p7-timeline\" data-stage=\"train\""), std::string::npos);
  EXPECT_NE(html.find("id=\"p7-timeline-predict\" data-stage=\"predict\""), std::string::npos);
  EXPECT_NE(html.find("{\"stage\":\"predict\",\"tid\":7,\"charts\":\"p7-steps\",\"def\":2,\"cmd\":\"\""),
            std::string::npos)
      << html;
  // Train first, with half the budget; predict gets what train left.
  EXPECT_NE(html.find("within " + std::to_string(kTimelineBudgetBytes / 2 / 1024) + " KiB"), std::string::npos);
  EXPECT_NE(html.find("within " + std::to_string((kTimelineBudgetBytes - 2 * kTimelineSliceBytes) / 1024) + " KiB"),
            std::string::npos);
}

TEST(StepSlices, MemoryEventsAsMarkersLargestFirstWhenThinned) {
  MemoryReport mem;
  mem.processes.push_back({});
  mem.processes[0].pid = 7;
  auto ev = [&](std::uint64_t ts, std::uint32_t tid, std::int64_t bytes, bool cuda = false, bool oom = false) {
    MemEvent e;
    e.ts_ns = ts;
    e.tid = tid;
    e.bytes = bytes;
    e.device.type = cuda ? 1 : 0;
    e.oom = oom;
    mem.processes[0].events.push_back(e);
  };
  ev(90, 1, 64);  // before the step
  ev(120, 1, 4096);
  ev(130, 1, -4096);
  ev(140, 2, 16, true);
  ev(150, 1, 1 << 20, true, true);
  ev(160, 1, 8);
  ev(200, 1, 8);  // at the step's end: not in it
  const auto w = mem_work_of(mem, 7);
  EXPECT_EQ(step_mem_count(w, 100, 200), 5u);
  const auto all = step_mem_marks(w, 100, 200, 100);
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[0].t_ns, 20u);
  EXPECT_EQ(all[1].bytes, -4096);
  EXPECT_EQ(all[2].flags, kMarkCuda | kMarkOom);
  EXPECT_EQ(all[4].tid, 2u);  // thread 2 last
  EXPECT_EQ(all[4].flags, kMarkCuda);
  // Cut to 3: the OOM, then the two 4096-byte events; back in time order.
  const auto cut = step_mem_marks(w, 100, 200, 3);
  ASSERT_EQ(cut.size(), 3u);
  EXPECT_EQ(cut[0].bytes, 4096);
  EXPECT_EQ(cut[1].bytes, -4096);
  EXPECT_EQ(cut[2].flags, kMarkCuda | kMarkOom);

  // On the page: the step's "m", after what the actions and ops took.
  const auto [p, steps] = one_training_step();
  std::ostringstream out;
  write_step_timeline(p, steps, "p7", out, nullptr, nullptr, &mem);
  EXPECT_NE(out.str().find("\"m\":[[1,20,4096,0],[1,30,-4096,0],[1,50,1048576,3],[1,60,8,0],[2,40,16,1]]"),
            std::string::npos)
      << out.str();
  EXPECT_EQ(out.str().find("\"mt\""), std::string::npos);
}

TEST(StepSlices, StepsPastTheKeptOpCallsAreMarked) {
  // The op aggregator kept calls up to t = 1105 (between the steps) and
  // dropped 5 after: the second step is marked, not drawn as a step
  // without ops; the first, wholly before, is not.
  ProcessActions p;
  p.meta.pid = 7;
  p.actions.emplace_back("[Strategy]S.training_step");
  ProcessSteps steps;
  steps.pid = steps.tid = 7;
  steps.train = steps_of({100, 200});  // [1000, 1100], [1110, 1310]
  for (auto& r : steps.train) p.intervals.push_back({0, 7, r.begin_ns, r.end_ns, false});
  OpsReport ops = ops_of({{7, 7, 0, 1, 1010, 1020}, {7, 7, 1, 1, 1105, 1106}});
  ops.intervals_dropped = 5;
  std::ostringstream out;
  write_step_timeline(p, steps, "p7", out, nullptr, &ops);
  const std::string html = out.str();
  EXPECT_NE(html.find("{\"i\":1,\"b\":0,\"e\":200,\"s\":[[0,7,0,200,0]],\"ox\":1}"), std::string::npos) << html;
  EXPECT_NE(html.find("{\"i\":0,\"b\":0,\"e\":100,\"s\":[[0,7,0,100,0]],\"o\":[[1,7,10,20,1]]}"), std::string::npos)
      << html;
  EXPECT_NE(html.find("1 embedded steps end after the last op call kept"), std::string::npos);
}

TEST(StepSlices, CollectivesAsTicksAtTheirEntry) {
  ProcessComm comm;
  comm.pid = 7;
  auto call = [&](std::uint64_t ts, std::uint32_t tid, std::uint8_t kind, std::uint64_t seq, std::uint64_t bytes) {
    CommCall c;
    c.ts_ns = ts;
    c.tid = tid;
    c.kind = kind;
    c.seq = seq;
    c.bytes = bytes;
    comm.calls_kept.push_back(c);
  };
  call(150, 1, LT_COMM_ALLREDUCE, 2, 4000);
  call(90, 1, LT_COMM_BROADCAST, 1, 8);  // before the step (kept out of order: sorted by time)
  call(160, 3, LT_COMM_BARRIER, 3, 0);
  call(200, 1, LT_COMM_ALLREDUCE, 4, 4000);  // at the step's end: not in it
  const auto w = comm_work_of(comm);
  EXPECT_EQ(step_comm_count(w, 100, 200), 2u);
  const auto first = step_comm_marks(w, 100, 200, 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0]->seq, 2u);

  const auto [p, steps] = one_training_step();
  std::ostringstream out;
  write_step_timeline(p, steps, "p7", out, nullptr, nullptr, nullptr, &comm);
  EXPECT_NE(out.str().find("\"c\":[[1,50,\"all_reduce\",2,0,4000],[3,60,\"barrier\",3,0,0]]"), std::string::npos)
      << out.str();
  EXPECT_EQ(out.str().find("\"ct\""), std::string::npos);
}

TEST(StepSlices, OtherStagesStepsCarryTheirExportWindow) {
  ProcessActions p;
  p.meta.pid = 7;
  p.actions.emplace_back("[Strategy]S.validation_step");
  ProcessSteps steps;
  steps.pid = steps.tid = 7;
  steps.validation = steps_of({100});
  steps.validation[0].begin_ns = 1'000'100'000;  // 100 us after the attach
  steps.validation[0].end_ns = 1'000'200'500;    // 200.5 us: rounded out to 201
  p.intervals.push_back({0, 7, steps.validation[0].begin_ns, steps.validation[0].end_ns, false});
  std::ostringstream with, without;
  write_step_timeline(p, steps, "p7", with, nullptr, nullptr, nullptr, nullptr, {}, kTimelineBudgetBytes,
                      1'000'000'000);
  EXPECT_NE(with.str().find(",\"w\":[\"0.000100\",\"0.000201\"]"), std::string::npos) << with.str();
  write_step_timeline(p, steps, "p7", without);  // the origin unknown: no window
  EXPECT_EQ(without.str().find("\"w\":"), std::string::npos);
}
