// The aggregator on synthetic event streams: pairing, nesting, threads,
// unmatched and open actions, fetch estimates, stage inference.
#include "reports/aggregate/actions.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace lt;

namespace {

struct Builder {
  lt::Trace trace;
  void window(std::uint64_t ts, bool begin) {
    lt_window_event w{};
    w.hdr = {LT_EV_WINDOW, sizeof w, 0, 0, 0, ts};
    w.begin = begin;
    trace.append(w);
  }
  void action(lt_event_kind kind, std::uint64_t ts, std::uint32_t pid, std::uint32_t tid, std::uint64_t key,
              const char* name = "") {
    lt_action_event e{};
    e.hdr = {static_cast<lt::u16>(kind), sizeof e, pid, tid, 0, ts};
    e.key = key;
    std::strncpy(e.name, name, sizeof e.name - 1);
    trace.append(e);
  }
  void info(std::uint32_t pid, int rank, int local_rank, int world) {
    lt_proc_info_event e{};
    e.hdr = {LT_EV_PROC_INFO, sizeof e, pid, pid, 0, 1};
    e.rank = rank;
    e.local_rank = local_rank;
    e.world_size = world;
    trace.append(e);
  }
};

const lt::ActionSeries* find(const lt::ProcessActions& p, const std::string& name) {
  for (auto& a : p.actions)
    if (a.name == name) return &a;
  return nullptr;
}

constexpr std::uint64_t ms = 1'000'000;

}  // namespace

TEST(Actions, NestedGeneratorsPairByFrame) {
  Builder b;
  b.window(0, true);
  b.action(LT_EV_ACTION_BEGIN, 1 * ms, 10, 10, 0xA, "outer");
  b.action(LT_EV_ACTION_BEGIN, 2 * ms, 10, 10, 0xB, "inner");
  b.action(LT_EV_ACTION_END, 5 * ms, 10, 10, 0xB);
  b.action(LT_EV_ACTION_END, 9 * ms, 10, 10, 0xA);
  b.window(10 * ms, false);
  auto rep = lt::aggregate_actions(b.trace);
  ASSERT_EQ(rep.processes.size(), 1u);
  auto& p = rep.processes[0];
  ASSERT_EQ(p.actions.size(), 2u);
  EXPECT_EQ(p.actions[0].name, "inner");  // first completed first
  EXPECT_DOUBLE_EQ(p.actions[0].running_total_s, 0.003);
  EXPECT_DOUBLE_EQ(p.actions[1].running_total_s, 0.008);
  EXPECT_DOUBLE_EQ(p.window_seconds(), 0.010);
  EXPECT_EQ(p.open_at_end, 0u);
}

TEST(Actions, ThreadsAndProcessesAreSeparate) {
  Builder b;
  b.window(0, true);
  b.action(LT_EV_ACTION_BEGIN, 1 * ms, 10, 10, 0xA, "x");
  b.action(LT_EV_ACTION_BEGIN, 2 * ms, 10, 11, 0xB, "x");  // same name, other thread
  b.action(LT_EV_ACTION_BEGIN, 2 * ms, 20, 20, 0xA, "x");  // same frame address, other process
  b.action(LT_EV_ACTION_END, 3 * ms, 10, 10, 0xA);
  b.action(LT_EV_ACTION_END, 6 * ms, 10, 11, 0xB);
  b.action(LT_EV_ACTION_END, 4 * ms, 20, 20, 0xA);
  b.window(10 * ms, false);
  auto rep = lt::aggregate_actions(b.trace);
  ASSERT_EQ(rep.processes.size(), 2u);
  EXPECT_EQ(find(rep.processes[0], "x")->calls, 2u);
  EXPECT_DOUBLE_EQ(find(rep.processes[1], "x")->running_total_s, 0.002);
}

TEST(Actions, OpenAndUnmatchedAreCountedNotRecorded) {
  Builder b;
  b.window(0, true);
  b.action(LT_EV_ACTION_END, 1 * ms, 10, 10, 0xF);  // began before attach
  b.action(LT_EV_ACTION_BEGIN, 2 * ms, 10, 10, 0xA, "never_ends");
  b.window(10 * ms, false);
  auto rep = lt::aggregate_actions(b.trace);
  auto& p = rep.processes[0];
  EXPECT_TRUE(p.actions.empty());
  EXPECT_EQ(p.open_at_end, 1u);
  EXPECT_EQ(p.unmatched_stops, 1u);
}

TEST(Actions, DirectStartStopPairByThreadAndName) {
  Builder b;
  b.window(0, true);
  b.action(LT_EV_DIRECT_START, 1 * ms, 10, 10, 0, "optimizer_step");
  b.action(LT_EV_DIRECT_START, 1 * ms, 10, 11, 0, "optimizer_step");
  b.action(LT_EV_DIRECT_STOP, 4 * ms, 10, 10, 0, "optimizer_step");
  b.action(LT_EV_DIRECT_STOP, 2 * ms, 10, 11, 0, "optimizer_step");
  b.window(10 * ms, false);
  auto rep = lt::aggregate_actions(b.trace);
  auto* a = find(rep.processes[0], "optimizer_step");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->calls, 2u);
  EXPECT_DOUBLE_EQ(a->running_total_s, 0.004);
}

TEST(Actions, FetchEndsAtNextActionAndIsNamedByItsLoop) {
  Builder b;
  b.window(0, true);
  b.action(LT_EV_ACTION_BEGIN, 1 * ms, 10, 10, 0xA, "[Callback]X.on_test_start");
  b.action(LT_EV_ACTION_END, 2 * ms, 10, 10, 0xA);
  b.action(LT_EV_FETCH_BEGIN, 3 * ms, 10, 10, 0);
  b.action(LT_EV_ACTION_BEGIN, 5 * ms, 10, 10, 0xB, "[Strategy]S.test_step");
  b.action(LT_EV_ACTION_END, 6 * ms, 10, 10, 0xB);
  b.window(10 * ms, false);
  auto rep = lt::aggregate_actions(b.trace);
  auto& p = rep.processes[0];
  auto* f = find(p, "[_EvaluationLoop].test_next");
  ASSERT_NE(f, nullptr);
  EXPECT_DOUBLE_EQ(f->running_total_s, 0.002);
  EXPECT_EQ(p.estimated, 1u);
  EXPECT_EQ(p.stage, lt::Stage::test);
}

TEST(Actions, StageFitIsNotDemotedByValidation) {
  Builder b;
  b.window(0, true);
  const char* names[] = {"[LightningModule]M.configure_callbacks", "[Callback]C.on_fit_start",
                         "[Callback]C.on_validation_start", "[Strategy]S.validation_step"};
  std::uint64_t t = 1;
  for (auto* n : names) {
    const std::uint64_t key = t + 1;
    b.action(LT_EV_ACTION_BEGIN, t * ms, 10, 10, key, n);
    b.action(LT_EV_ACTION_END, (t + 1) * ms, 10, 10, key);
    t += 2;
  }
  b.window(20 * ms, false);
  EXPECT_EQ(lt::aggregate_actions(b.trace).processes[0].stage, lt::Stage::fit);

  Builder v;  // trainer.validate(): a new run, validation only
  v.window(0, true);
  v.action(LT_EV_ACTION_BEGIN, 1 * ms, 10, 10, 1, "[LightningModule]M.configure_callbacks");
  v.action(LT_EV_ACTION_END, 2 * ms, 10, 10, 1);
  v.action(LT_EV_ACTION_BEGIN, 3 * ms, 10, 10, 2, "[LightningModule]M.on_validation_start");
  v.action(LT_EV_ACTION_END, 4 * ms, 10, 10, 2);
  v.window(5 * ms, false);
  EXPECT_EQ(lt::aggregate_actions(v.trace).processes[0].stage, lt::Stage::validate);
}

TEST(Actions, ProcessInfoAndExitWindow) {
  Builder b;
  b.window(0, true);
  b.info(30, 1, 1, 2);
  b.action(LT_EV_ACTION_BEGIN, 2 * ms, 30, 30, 0xA, "x");
  b.action(LT_EV_ACTION_END, 3 * ms, 30, 30, 0xA);
  lt_proc_event e{};
  e.hdr = {LT_EV_PROC_EXIT, sizeof e, 30, 30, 0, 5 * ms};
  b.trace.append(e);
  b.window(10 * ms, false);
  auto rep = lt::aggregate_actions(b.trace);
  auto& p = rep.processes[0];
  EXPECT_EQ(p.meta.rank, 1);
  EXPECT_EQ(p.meta.world_size, 2);
  EXPECT_TRUE(p.exited);
  EXPECT_EQ(p.window_end_ns, 5 * ms);
}

TEST(Trace, MalformedSizeStopsTheWalk) {
  lt::Trace t;
  lt_window_event w{};
  w.hdr = {LT_EV_WINDOW, sizeof w, 0, 0, 0, 1};
  t.append(w);
  w.hdr.size = 4000;  // claims more than there is
  t.append(&w, sizeof w);
  int seen = 0;
  t.for_each([&](const lt_event_header&, const std::byte*) { ++seen; });
  EXPECT_EQ(seen, 1);
}

TEST(Actions, ManualOptimizerStepInferredFromItsHooks) {
  Builder b;
  b.window(0, true);
  // manual optimization: hooks with no [LightningModule]*.optimizer_step around them
  b.action(LT_EV_ACTION_BEGIN, 1 * ms, 10, 10, 1, "[Callback]C.on_before_optimizer_step");
  b.action(LT_EV_ACTION_END, 2 * ms, 10, 10, 1);
  b.action(LT_EV_ACTION_BEGIN, 2 * ms, 10, 10, 2, "[LightningModule]M.on_before_optimizer_step");
  b.action(LT_EV_ACTION_END, 3 * ms, 10, 10, 2);
  b.action(LT_EV_ACTION_BEGIN, 7 * ms, 10, 10, 3, "[LightningModule]M.on_train_batch_end");
  b.action(LT_EV_ACTION_END, 8 * ms, 10, 10, 3);
  // automatic optimization: the same hooks inside the module's optimizer_step
  b.action(LT_EV_ACTION_BEGIN, 10 * ms, 10, 10, 4, "[LightningModule]M.optimizer_step");
  b.action(LT_EV_ACTION_BEGIN, 11 * ms, 10, 10, 5, "[LightningModule]M.on_before_optimizer_step");
  b.action(LT_EV_ACTION_END, 12 * ms, 10, 10, 5);
  b.action(LT_EV_ACTION_END, 13 * ms, 10, 10, 4);
  b.window(20 * ms, false);
  auto rep = lt::aggregate_actions(b.trace);
  auto* a = find(rep.processes[0], "optimizer_step");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->calls, 1u);
  EXPECT_DOUBLE_EQ(a->running_total_s, 0.006);
  EXPECT_EQ(rep.processes[0].estimated, 1u);
}
