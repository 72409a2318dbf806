// The op aggregator on synthetic event streams: exact call counts, sampled
// self/total, torch's same-name merge, step-function windows, Lightning's
// default schedule, timeline intervals and damaged records.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/ops.h"

using namespace lt;

namespace {

constexpr std::uint64_t ms = 1'000'000;
constexpr std::uint32_t kPid = 10;
constexpr const char* kTrain = "[Strategy]SingleDeviceStrategy.training_step";
constexpr const char* kVal = "[Strategy]SingleDeviceStrategy.validation_step";

// Every record goes to the action aggregator first, then to the op one.
struct Stream {
  ActionAggregator actions;
  OpAggregator ops;
  std::uint64_t next_key = 0x1000;

  explicit Stream(OpAggregatorOptions opts = {}) : ops(actions, opts) {}

  template <typename R>
  void feed(const R& r) {
    actions.add(r.hdr, reinterpret_cast<const std::byte*>(&r));
    ops.add(r.hdr, reinterpret_cast<const std::byte*>(&r));
  }
  // A record of exactly h.size bytes (a short one must not be read past).
  void feed_raw(const lt_event_header& h, const void* full) {
    std::vector<std::byte> bytes(h.size);
    std::memcpy(bytes.data(), full, h.size);
    std::memcpy(bytes.data(), &h, std::min<std::size_t>(sizeof h, h.size));
    actions.add(h, bytes.data());
    ops.add(h, bytes.data());
  }
  void sampler(std::uint64_t period) {
    lt_sampler_info_event e{};
    e.hdr = {LT_EV_SAMPLER_INFO, sizeof e, 0, 0, 0, 1};
    e.period_ns = period;
    e.rate_hz = static_cast<std::uint32_t>(1'000'000'000 / period);
    e.flags = LT_SAMPLER_ON_CPU;
    feed(e);
  }
  void name(std::uint32_t op, const char* n, const char* overload = "") {
    lt_op_name_event e{};
    e.hdr = {LT_EV_OP_NAME, sizeof e, 0, 0, 0, 1};
    e.op = op;
    std::strncpy(e.name, n, sizeof e.name - 1);
    std::strncpy(e.overload, overload, sizeof e.overload - 1);
    feed(e);
  }
  void op(std::uint64_t ts, std::uint32_t op, std::uint16_t depth, std::uint32_t tid = kPid, std::uint32_t pid = kPid) {
    lt_op_event e{};
    e.hdr = {LT_EV_OP, sizeof e, pid, tid, 0, ts};
    e.op = op;
    e.depth = depth;
    feed(e);
  }
  // The op observer records this process's ops (OP_OBSERVER, as the tracer
  // writes it at the attach).
  void observer() {
    lt_op_observer_event o{};
    o.hdr = {LT_EV_OP_OBSERVER, sizeof o, kPid, kPid, 0, 1};
    o.how = LT_OP_TIMES_OBSERVER;
    feed(o);
  }
  // One call as the op observer measured it (OP_SPAN): it comes in when it
  // ends, after the calls it made.
  void span(std::uint64_t start, std::uint64_t end, std::uint64_t self, std::uint32_t op, std::uint16_t depth,
            std::uint32_t tid = kPid) {
    lt_op_span_event e{};
    e.hdr = {LT_EV_OP_SPAN, sizeof e, kPid, tid, 0, start};
    e.end_ns = end;
    e.self_ns = self;
    e.op = op;
    e.depth = depth;
    feed(e);
  }
  // The observer's watermark: no call to come starts before `ts`.
  void watermark(std::uint64_t ts) {
    lt_op_span_event e{};
    e.hdr = {LT_EV_OP_SPAN, sizeof e, kPid, kPid, 0, ts};
    e.end_ns = ts;
    e.op = UINT32_MAX;
    e.flags = LT_OP_SPAN_WATERMARK;
    feed(e);
  }
  // ops: outermost first
  void sample(std::uint64_t ts, std::initializer_list<std::uint32_t> ops_running, std::uint16_t flags = 0,
              std::uint32_t tid = kPid, std::uint32_t pid = kPid) {
    lt_py_sample_event e{};
    e.hdr = {LT_EV_PY_SAMPLE, sizeof e, pid, tid, 0, ts};
    e.flags = flags;
    e.nops = static_cast<u16>(ops_running.size());
    std::size_t i = 0;
    for (auto o : ops_running) e.ops[i++] = o;
    feed(e);
  }
  void action(lt_event_kind kind, std::uint64_t ts, std::uint64_t key, const char* n = "", std::uint32_t pid = kPid,
              std::uint32_t tid = kPid) {
    lt_action_event e{};
    e.hdr = {static_cast<u16>(kind), sizeof e, pid, tid, 0, ts};
    e.key = key;
    std::strncpy(e.name, n, sizeof e.name - 1);
    feed(e);
  }
  // A whole action: begin at `begin`, end at `end`.
  void step(std::uint64_t begin, std::uint64_t end, const char* n = kTrain, std::uint32_t pid = kPid) {
    const std::uint64_t key = next_key++;
    action(LT_EV_ACTION_BEGIN, begin, key, n, pid);
    action(LT_EV_ACTION_END, end, key, "", pid);
  }
  void exit(std::uint64_t ts, std::uint32_t pid = kPid) {
    lt_proc_event e{};
    e.hdr = {LT_EV_PROC_EXIT, sizeof e, pid, pid, 0, ts};
    feed(e);
  }
  OpsReport finish() {
    actions.finish();
    return ops.finish();
  }
};

const OpRowData* row(const OpTableData& t, const std::string& name) {
  for (auto& r : t.rows)
    if (r.name == name) return &r;
  return nullptr;
}

std::uint64_t calls(const OpTableData& t, const std::string& name) {
  auto* r = row(t, name);
  return r ? r->calls : 0;
}

bool action_row(const OpRowData& r) {
  return r.name.rfind("[pl][profile]", 0) == 0;
}

// The op rows (not the [pl][profile] action rows), in table order.
std::vector<std::string> row_names(const OpTableData& t) {
  std::vector<std::string> out;
  for (auto& r : t.rows)
    if (!action_row(r)) out.push_back(r.name);
  return out;
}

const ProcessOps* process(const OpsReport& rep, std::uint32_t pid) {
  for (auto& p : rep.processes)
    if (p.pid == pid) return &p;
  return nullptr;
}

const OpTableData* table(const ProcessOps& p, const std::string& title) {
  for (auto& t : p.tables)
    if (t.title == title) return &t;
  return nullptr;
}

// The only table of the only process.
const OpTableData& only_table(const OpsReport& rep) {
  EXPECT_EQ(rep.processes.size(), 1u);
  EXPECT_EQ(rep.processes.at(0).tables.size(), 1u);
  return rep.processes.at(0).tables.at(0);
}

}  // namespace

// ---------------------------------------------------------------- calls

TEST(OpsCalls, CountPerNameOverloadsMergeFirstCallOrder) {
  Stream s;
  s.name(0, "aten::add", "Tensor");
  s.name(1, "aten::mul");
  s.name(2, "aten::add", "Scalar");
  s.name(3, "aten::empty");  // named, never called: no row
  s.op(1 * ms, 1, 1);
  s.op(2 * ms, 0, 1);
  s.op(3 * ms, 2, 1);
  s.op(4 * ms, 1, 1);
  s.op(5 * ms, 0, 1);
  auto rep = s.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  const auto& p = rep.processes[0];
  EXPECT_EQ(p.pid, kPid);
  EXPECT_EQ(p.calls, 5u);
  EXPECT_EQ(p.too_deep, 0u);
  const auto& t = only_table(rep);
  EXPECT_EQ(t.title, "records");
  EXPECT_EQ(t.steps, 1u);
  EXPECT_EQ(row_names(t), (std::vector<std::string>{"aten::mul", "aten::add"}));
  EXPECT_EQ(calls(t, "aten::mul"), 2u);
  EXPECT_EQ(calls(t, "aten::add"), 3u);
  ASSERT_EQ(rep.names.size(), 4u);
  EXPECT_EQ(rep.names[0], "aten::add");
  EXPECT_EQ(rep.names[2], "aten::add");
  EXPECT_EQ(rep.period_ns, 0u);  // no sampler: no times
}

TEST(OpsCalls, ThreadsOfAProcessShareItsTable) {
  Stream s;
  s.name(0, "aten::add");
  s.op(1 * ms, 0, 1, /*tid=*/10);
  s.op(1 * ms, 0, 1, /*tid=*/11);
  s.op(2 * ms, 0, 2, /*tid=*/12);  // its parent is unknown (records lost): counted
  auto rep = s.finish();
  EXPECT_EQ(calls(only_table(rep), "aten::add"), 3u);
  EXPECT_EQ(rep.processes[0].calls, 3u);
}

// ---------------------------------------------------------------- samples

TEST(OpsSamples, InnermostGetsSelfEveryOpInTheSampleTotal) {
  Stream s;
  s.sampler(ms);
  s.name(0, "aten::linear");
  s.name(1, "aten::addmm");
  s.op(1 * ms, 0, 1);
  s.op(2 * ms, 1, 2);
  s.sample(3 * ms, {0, 1});
  s.sample(4 * ms, {0});
  auto rep = s.finish();
  EXPECT_EQ(rep.period_ns, ms);
  EXPECT_EQ(rep.rate_hz, 1000u);
  const auto& t = only_table(rep);
  EXPECT_EQ(t.samples, 2u);
  EXPECT_EQ(t.in_probe, 0u);
  auto* linear = row(t, "aten::linear");
  auto* addmm = row(t, "aten::addmm");
  ASSERT_TRUE(linear && addmm);
  EXPECT_EQ(addmm->self_samples, 1u);
  EXPECT_EQ(addmm->total_samples, 1u);
  EXPECT_EQ(linear->self_samples, 1u);
  EXPECT_EQ(linear->total_samples, 2u);
}

TEST(OpsSamples, RecursionCountsOnceTowardTotal) {
  Stream s;
  s.name(0, "aten::linear");
  s.name(1, "aten::matmul");
  s.name(2, "aten::linear", "other");  // same name, other index: the same op for torch
  s.op(1 * ms, 0, 1);
  s.op(2 * ms, 1, 2);
  s.op(3 * ms, 2, 3);
  s.sample(4 * ms, {0, 1, 2});
  s.sample(5 * ms, {0, 1, 0});
  auto rep = s.finish();
  const auto& t = only_table(rep);
  auto* linear = row(t, "aten::linear");
  auto* matmul = row(t, "aten::matmul");
  ASSERT_TRUE(linear && matmul);
  EXPECT_EQ(linear->total_samples, 2u);
  EXPECT_EQ(linear->self_samples, 2u);
  EXPECT_EQ(matmul->total_samples, 2u);
  EXPECT_EQ(matmul->self_samples, 0u);
}

TEST(OpsSamples, NoOpAndInProbeSamplesAreCountedButChargedToNoOp) {
  Stream s;
  s.name(0, "aten::add");
  s.name(1, "aten::mul");
  s.op(1 * ms, 0, 1);
  s.sample(2 * ms, {});  // outside any op
  s.op(3 * ms, 1, 1);
  s.sample(4 * ms, {1}, LT_SAMPLE_IN_PROBE);  // our probe's own time
  s.sample(5 * ms, {1});
  auto rep = s.finish();
  const auto& t = only_table(rep);
  EXPECT_EQ(t.samples, 3u);
  EXPECT_EQ(t.in_probe, 1u);
  EXPECT_EQ(row(t, "aten::add")->total_samples, 0u);
  EXPECT_EQ(row(t, "aten::mul")->self_samples, 1u);
  EXPECT_EQ(row(t, "aten::mul")->total_samples, 1u);
}

TEST(OpsSamples, AnOpSeenOnlyInSamplesGetsARowWithoutCalls) {
  Stream s;
  s.name(0, "aten::add");
  s.name(1, "aten::mul");
  s.op(1 * ms, 0, 1);
  s.sample(2 * ms, {1});  // its entry was lost
  auto rep = s.finish();
  const auto& t = only_table(rep);
  auto* mul = row(t, "aten::mul");
  ASSERT_TRUE(mul);
  EXPECT_EQ(mul->calls, 0u);
  EXPECT_EQ(mul->self_samples, 1u);
  EXPECT_EQ(rep.processes[0].calls, 1u);
}

// ---------------------------------------------------------------- torch's same-name merge

TEST(OpsMerge, OnlyChildWithItsParentsNameIsOneCall) {
  Stream s;
  s.name(0, "aten::sum");
  s.name(1, "aten::sum", "dim_IntList");
  s.op(1 * ms, 0, 1);
  s.op(2 * ms, 1, 2);
  s.op(5 * ms, 0, 1);  // the next top-level op: the first one had one child
  auto rep = s.finish();
  EXPECT_EQ(calls(only_table(rep), "aten::sum"), 2u);
  EXPECT_EQ(rep.processes[0].calls, 3u);  // every record is still a call seen
}

TEST(OpsMerge, ChainsOfSameNameCollapseToOne) {
  Stream s;
  s.name(0, "aten::sum");
  s.op(1 * ms, 0, 1);
  s.op(2 * ms, 0, 2);
  s.op(3 * ms, 0, 3);
  auto rep = s.finish();
  EXPECT_EQ(calls(only_table(rep), "aten::sum"), 1u);
}

TEST(OpsMerge, ASecondChildShowsTheFirstWasNotAlone) {
  Stream s;
  s.name(0, "aten::sum");
  s.name(1, "aten::sum", "dim_IntList");
  s.name(2, "aten::fill_");
  s.op(1 * ms, 0, 1);
  s.op(2 * ms, 1, 2);  // only child so far: merged
  s.op(3 * ms, 2, 2);  // a sibling: the first child is counted after all
  s.op(4 * ms, 2, 2);  // a third child changes nothing more
  auto rep = s.finish();
  const auto& t = only_table(rep);
  EXPECT_EQ(calls(t, "aten::sum"), 2u);
  EXPECT_EQ(calls(t, "aten::fill_"), 2u);
}

TEST(OpsMerge, SecondChildAfterTheFirstEndedStillCounts) {
  Stream s;
  s.name(0, "aten::sum");
  s.name(1, "aten::fill_");
  s.op(1 * ms, 0, 1);
  s.op(2 * ms, 0, 2);
  s.sample(3 * ms, {0});  // the child has returned
  s.op(4 * ms, 1, 2);
  auto rep = s.finish();
  EXPECT_EQ(calls(only_table(rep), "aten::sum"), 2u);
}

TEST(OpsMerge, SameNameChildThatIsNotTheFirstCountsNormally) {
  Stream s;
  s.name(0, "aten::sum");
  s.name(1, "aten::fill_");
  s.op(1 * ms, 0, 1);
  s.op(2 * ms, 1, 2);
  s.op(3 * ms, 0, 2);
  auto rep = s.finish();
  const auto& t = only_table(rep);
  EXPECT_EQ(calls(t, "aten::sum"), 2u);
  EXPECT_EQ(calls(t, "aten::fill_"), 1u);
  EXPECT_EQ(row_names(t), (std::vector<std::string>{"aten::sum", "aten::fill_"}));
}

TEST(OpsMerge, OtherThreadsAndGrandchildrenAreNotSiblings) {
  Stream s;
  s.name(0, "aten::sum");
  s.name(1, "aten::fill_");
  s.op(1 * ms, 0, 1);
  s.op(2 * ms, 0, 2);      // merged into its parent
  s.op(3 * ms, 1, 3);      // a child of the merged op, not of the parent
  s.op(4 * ms, 1, 2, 11);  // another thread's depth-2 op
  auto rep = s.finish();
  const auto& t = only_table(rep);
  EXPECT_EQ(calls(t, "aten::sum"), 1u);
  EXPECT_EQ(calls(t, "aten::fill_"), 2u);
}

TEST(OpsMerge, TooDeepRecordsAreCountedNotNested) {
  Stream s;
  s.name(0, "aten::sum");
  s.name(1, "aten::add");
  s.op(1 * ms, 0, 1);
  s.op(2 * ms, 0, 0);  // deeper than LT_OPS_DEPTH: not a child, not merged
  s.op(3 * ms, 1, 0);
  s.op(4 * ms, 0, 2);  // still the parent's only child: merged
  auto rep = s.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  EXPECT_EQ(rep.processes[0].too_deep, 2u);
  EXPECT_EQ(rep.processes[0].calls, 4u);
  const auto& t = only_table(rep);
  EXPECT_EQ(calls(t, "aten::sum"), 2u);
  EXPECT_EQ(calls(t, "aten::add"), 1u);
}

// ---------------------------------------------------------------- step windows

namespace {

constexpr const char* kTest = "[Strategy]SingleDeviceStrategy.test_step";
constexpr const char* kOutside = "outside step functions";

// Lightning's batches (lightning-profilers-spec.md): fetch, transfer, the
// batch start hooks, the step (training: inside run_training_batch, with
// backward and the optimizer step), the batch end hooks of the callbacks and
// then of the LightningModule.  `body` runs inside the step's batch after
// the step function ended (training: backward, optimizer).
struct Lightning {
  Stream& s;
  std::uint64_t t = 1 * ms;
  std::uint64_t key = 500;
  void begin(const char* n) { s.action(LT_EV_ACTION_BEGIN, t++, key++, n); }
  void end() { s.action(LT_EV_ACTION_END, t++, --key); }  // innermost first
  void whole(const char* n) {
    begin(n);
    end();
  }
  void op(std::uint32_t op) { s.op(t++, op, 1); }
  void train_batch(std::uint32_t fwd, std::uint32_t bwd, std::uint32_t opt) {
    whole("[_TrainingEpochLoop].train_dataloader_next");
    whole("[Strategy]SingleDeviceStrategy.batch_to_device");
    whole("[Callback]Cb.on_train_batch_start");
    whole("[LightningModule]M.on_train_batch_start");
    begin("run_training_batch");
    begin("[LightningModule]M.optimizer_step");
    begin(kTrain);
    op(fwd);
    end();
    begin("[Strategy]SingleDeviceStrategy.backward");
    op(bwd);
    end();
    op(opt);
    end();
    end();
    whole("[Callback]Cb.on_train_batch_end");
    whole("[LightningModule]M.on_train_batch_end");
  }
  void eval_batch(const char* next, const char* step, const char* hook, std::uint32_t fwd, std::uint32_t in_hook,
                  std::uint32_t between_hooks) {
    whole(next);
    whole((std::string("[Callback]Cb.on_") + hook + "_batch_start").c_str());
    begin(step);
    op(fwd);
    end();
    begin((std::string("[Callback]Cb.on_") + hook + "_batch_end").c_str());
    op(in_hook);
    end();
    op(between_hooks);  // between the callbacks' end hook and the module's: still the batch
    whole((std::string("[LightningModule]M.on_") + hook + "_batch_end").c_str());
  }
};

}  // namespace

TEST(OpsWindows, ValidationTablesHoldNoTrainingBackwardOrOptimizer) {
  // The defect: the window of the first validation step after training
  // began at the last training step's end, so the validation table held
  // that step's backward and optimizer update.
  Stream s;
  for (std::uint32_t i = 0; i < 9; ++i) s.name(i, ("aten::op" + std::to_string(i)).c_str());
  Lightning l{s};
  l.train_batch(0, 1, 2);
  l.train_batch(0, 1, 2);
  l.op(3);  // after the end hooks: the loop's own work (logging, checkpoint)
  l.whole("[Callback]Cb.on_validation_start");
  l.eval_batch("[_EvaluationLoop].val_next", kVal, "validation", 4, 5, 6);
  l.eval_batch("[_EvaluationLoop].val_next", kVal, "validation", 4, 5, 6);
  l.whole("[_EvaluationLoop].val_next");  // the fetch that ends the loop: no step, no batch
  l.op(7);
  l.whole("[LightningModule]M.on_validation_epoch_end");
  l.op(8);
  l.train_batch(0, 1, 2);
  l.eval_batch("[_EvaluationLoop].test_next", kTest, "test", 4, 5, 6);
  auto rep = s.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  const auto& p = rep.processes[0];
  ASSERT_EQ(p.tables.size(), 4u);
  const auto* train = table(p, kTrain);
  const auto* val = table(p, kVal);
  const auto* test = table(p, kTest);
  const auto* outside = table(p, kOutside);
  ASSERT_TRUE(train && val && test && outside);
  EXPECT_EQ(p.tables[3].title, kOutside);  // after the step tables
  EXPECT_EQ(train->steps, 3u);
  EXPECT_EQ(row_names(*train), (std::vector<std::string>{"aten::op0", "aten::op1", "aten::op2"}));
  EXPECT_EQ(calls(*train, "aten::op1"), 3u);
  EXPECT_EQ(val->steps, 2u);
  EXPECT_EQ(row_names(*val), (std::vector<std::string>{"aten::op4", "aten::op5", "aten::op6"}));
  EXPECT_EQ(calls(*val, "aten::op4"), 2u);
  EXPECT_EQ(test->steps, 1u);
  EXPECT_EQ(row_names(*test), (std::vector<std::string>{"aten::op4", "aten::op5", "aten::op6"}));
  EXPECT_EQ(row_names(*outside), (std::vector<std::string>{"aten::op3", "aten::op7", "aten::op8"}));
  // The tables add up to every call.
  std::uint64_t sum = 0;
  for (auto& t : p.tables)
    for (auto& r : t.rows) sum += action_row(r) ? 0 : r.calls;
  EXPECT_EQ(sum, p.calls);
}

TEST(OpsWindows, TheFetchRecordStartsTheBatch) {
  // A real fetch is one FETCH_BEGIN record (builtins.next on CombinedLoader,
  // no end probe): the ops it runs (collate; torch 1.13's DataLoader
  // record_function allocates a tensor) and the batch transfer's are the
  // batch's, not outside.  The fetch that finds the loader exhausted runs
  // no step: its ops are outside.
  Stream s;
  for (std::uint32_t i = 0; i < 6; ++i) s.name(i, ("aten::op" + std::to_string(i)).c_str());
  Lightning l{s};
  auto batch = [&](const char* start_hook, const char* step, const char* end_hook) {
    s.action(LT_EV_FETCH_BEGIN, l.t++, 900);
    l.op(0);  // in the fetch
    l.begin("[Strategy]SingleDeviceStrategy.batch_to_device");
    l.op(1);  // the transfer
    l.end();
    l.whole(start_hook);
    l.begin(step);
    l.op(2);
    l.end();
    l.whole(end_hook);
  };
  l.whole("[Callback]Cb.on_train_epoch_start");
  batch("[Callback]Cb.on_train_batch_start", kTrain, "[LightningModule]M.on_train_batch_end");
  batch("[Callback]Cb.on_train_batch_start", kTrain, "[LightningModule]M.on_train_batch_end");
  l.whole("[Callback]Cb.on_validation_start");  // the next fetches are val_next
  batch("[Callback]Cb.on_validation_batch_start", kVal, "[LightningModule]M.on_validation_batch_end");
  s.action(LT_EV_FETCH_BEGIN, l.t++, 900);  // exhausted
  l.op(3);
  l.whole("[LightningModule]M.on_validation_epoch_end");
  auto rep = s.finish();
  const auto& p = rep.processes.at(0);
  ASSERT_EQ(p.tables.size(), 3u);
  const auto* train = table(p, kTrain);
  const auto* val = table(p, kVal);
  const auto* outside = table(p, kOutside);
  ASSERT_TRUE(train && val && outside);
  EXPECT_EQ(train->steps, 2u);
  EXPECT_EQ(calls(*train, "aten::op0"), 2u);
  EXPECT_EQ(calls(*train, "aten::op1"), 2u);
  EXPECT_EQ(val->steps, 1u);
  EXPECT_EQ(calls(*val, "aten::op0"), 1u);
  EXPECT_EQ(calls(*val, "aten::op1"), 1u);
  EXPECT_EQ(row_names(*outside), (std::vector<std::string>{"aten::op3"}));
}

TEST(OpsWindows, AttachedMidBatchTheFirstBoundaryTellsWhichBatch) {
  Stream s;
  s.name(0, "aten::a");
  s.name(1, "aten::b");
  s.op(1 * ms, 0, 1);                      // a training step already running
  s.action(LT_EV_ACTION_END, 2 * ms, 77);  // its end (start not seen): completes nothing, says nothing
  s.op(3 * ms, 1, 1);
  s.step(4 * ms, 5 * ms, "[Callback]Cb.on_train_batch_end");  // an end hook: we were in a training batch
  auto rep = s.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  const auto& p = rep.processes[0];
  // No training step ended in it: its ops are not charged to a step table.
  ASSERT_EQ(p.tables.size(), 1u);
  EXPECT_EQ(p.tables[0].title, "records");
  EXPECT_EQ(row_names(p.tables[0]), (std::vector<std::string>{"aten::a", "aten::b"}));

  Stream s2;
  s2.name(0, "aten::a");
  s2.op(1 * ms, 0, 1);
  s2.step(2 * ms, 2 * ms + 1, "[_EvaluationLoop].val_next");  // a batch begins: the op before was outside it
  s2.action(LT_EV_ACTION_BEGIN, 2 * ms + 2, 5, kVal);
  s2.op(3 * ms, 0, 1);
  s2.action(LT_EV_ACTION_END, 4 * ms, 5);
  auto rep2 = s2.finish();
  const auto& p2 = rep2.processes.at(0);
  ASSERT_EQ(p2.tables.size(), 2u);
  EXPECT_EQ(calls(*table(p2, kVal), "aten::a"), 1u);
  EXPECT_EQ(calls(*table(p2, kOutside), "aten::a"), 1u);

  Stream s3;  // a step first: everything before was in a training batch
  s3.name(0, "aten::a");
  s3.op(1 * ms, 0, 1);
  s3.action(LT_EV_ACTION_BEGIN, 2 * ms, 5, "[Strategy]SingleDeviceStrategy.backward");
  s3.op(3 * ms, 0, 1);
  s3.action(LT_EV_ACTION_END, 4 * ms, 5);
  s3.action(LT_EV_ACTION_END, 5 * ms, 6);  // training_step's end, its start before the attach: unmatched
  s3.step(6 * ms, 7 * ms, kTrain);
  auto rep3 = s3.finish();
  const auto& p3 = rep3.processes.at(0);
  ASSERT_EQ(p3.tables.size(), 1u);
  EXPECT_EQ(p3.tables[0].title, kTrain);
  EXPECT_EQ(calls(p3.tables[0], "aten::a"), 2u);
}

TEST(OpsWindows, StepsWithoutBatchHooksEachStartABatch) {
  // profiler.profile("training_step") in a hand-written loop: a step's
  // batch runs from its start to the next step's start (its backward and
  // update are after its end); what ran before the first step seen was a
  // training batch too (the previous step's backward).
  Stream s;
  s.name(0, "aten::before");
  s.name(1, "aten::fwd");
  s.name(2, "aten::bwd");
  s.op(1 * ms, 0, 1);
  for (std::uint64_t i = 0; i < 3; ++i) {
    s.action(LT_EV_ACTION_BEGIN, (10 + 10 * i) * ms, 100 + i, "training_step");
    s.op((11 + 10 * i) * ms, 1, 1);
    s.action(LT_EV_ACTION_END, (12 + 10 * i) * ms, 100 + i);
    s.op((13 + 10 * i) * ms, 2, 1);
  }
  auto rep = s.finish();
  const auto& t = only_table(rep);
  EXPECT_EQ(t.title, "training_step");
  EXPECT_EQ(t.steps, 3u);
  EXPECT_EQ(calls(t, "aten::fwd"), 3u);
  EXPECT_EQ(calls(t, "aten::bwd"), 3u);
  EXPECT_EQ(calls(t, "aten::before"), 1u);
}

TEST(OpsWindows, EmptyStepWindowsStillCountAsSteps) {
  Stream s;
  s.name(0, "aten::a");
  s.step(2 * ms, 3 * ms);
  s.op(3 * ms + 1, 0, 1);
  s.step(4 * ms, 5 * ms);  // no op in it
  auto rep = s.finish();
  const auto& t = only_table(rep);
  EXPECT_EQ(t.title, kTrain);
  EXPECT_EQ(t.steps, 2u);
  EXPECT_EQ(calls(t, "aten::a"), 1u);
}

TEST(OpsWindows, TablesPerProcess) {
  Stream s;
  s.name(0, "aten::a");
  s.name(1, "aten::b");
  s.op(1 * ms, 0, 1, 20, 20);  // pid 20 first seen first
  s.step(2 * ms, 3 * ms, kTrain, kPid);
  s.op(3 * ms + 1, 0, 1);
  s.step(3 * ms + 2, 4 * ms, "[Callback]C.on_train_start", 20);  // not a step function
  s.op(5 * ms, 1, 1, 20, 20);
  s.step(6 * ms, 8 * ms, kTrain, kPid);
  s.op(8 * ms + 1, 1, 1);
  auto rep = s.finish();
  ASSERT_EQ(rep.processes.size(), 2u);
  EXPECT_EQ(rep.processes[0].pid, 20u);
  EXPECT_EQ(rep.processes[1].pid, kPid);
  const auto& other = rep.processes[0];
  ASSERT_EQ(other.tables.size(), 1u);
  EXPECT_EQ(other.tables[0].title, "records");
  EXPECT_EQ(row_names(other.tables[0]), (std::vector<std::string>{"aten::a", "aten::b"}));
  const auto& mine = rep.processes[1];
  ASSERT_EQ(mine.tables.size(), 1u);
  EXPECT_EQ(mine.tables[0].title, kTrain);
  EXPECT_EQ(mine.tables[0].steps, 2u);
  EXPECT_EQ(mine.calls, 2u);
  EXPECT_EQ(other.calls, 2u);
}

TEST(OpsWindows, AnotherProcessesStepsDoNotCloseOurBatch) {
  Stream s;
  s.name(0, "aten::a");
  s.step(1 * ms, 2 * ms, kTrain, kPid);
  s.op(3 * ms, 0, 1);
  s.step(4 * ms, 5 * ms, kTrain, 20);
  s.step(4 * ms, 5 * ms, kVal, 20);
  s.op(6 * ms, 0, 1);
  auto rep = s.finish();
  auto* mine = process(rep, kPid);
  ASSERT_TRUE(mine);
  ASSERT_EQ(mine->tables.size(), 1u);
  EXPECT_EQ(mine->tables[0].steps, 1u);
  EXPECT_EQ(calls(mine->tables[0], "aten::a"), 2u);
}

TEST(OpsWindows, GpuRecordsAfterTheBatchClosedJoinItsTable) {
  Stream s;
  s.name(0, "aten::mm");
  Lightning l{s};
  l.whole("[_EvaluationLoop].val_next");
  l.begin(kVal);
  l.op(0);
  lt_gpu_launch_event launch{};
  launch.hdr = {LT_EV_GPU_LAUNCH, sizeof launch, kPid, kPid, 0, l.t++};
  launch.source = LT_LAUNCH_CUPTI;
  launch.correlation = 9;
  launch.nops = 1;
  launch.ops[0] = 0;
  s.feed(launch);
  l.end();
  l.whole("[LightningModule]M.on_validation_batch_end");
  l.whole("[LightningModule]M.on_validation_epoch_end");  // the batch is closed, its window merged
  lt_gpu_activity_event k{};
  k.hdr = {LT_EV_GPU_ACTIVITY, sizeof k, kPid, kPid, 0, l.t++};
  k.a.kind = LT_GPU_MEMCPY;
  k.a.copy_kind = 1;
  k.a.correlation = 9;
  k.a.start_ns = 100;
  k.a.end_ns = 350;
  s.feed(k);
  auto rep = s.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  ASSERT_TRUE(table(rep.processes[0], kVal));
  const auto& t = *table(rep.processes[0], kVal);  // the epoch-end hook's [pl][profile] row is outside it
  EXPECT_TRUE(t.has_cuda);
  ASSERT_TRUE(row(t, "Memcpy HtoD"));
  EXPECT_EQ(row(t, "aten::mm")->cuda_total_ns, 250u);
}

TEST(OpsWindows, SamplesBeforeTheFirstOpAreNotCounted) {
  Stream s;
  s.name(0, "aten::a");
  s.sample(1 * ms, {});  // the process has no op yet
  s.op(2 * ms, 0, 1);
  s.sample(3 * ms, {});
  auto rep = s.finish();
  EXPECT_EQ(only_table(rep).samples, 1u);
}

// ---------------------------------------------------------------- --schedule

namespace {

// `n` training steps, op "aten::w<i>" in step i, optionally one op after the last.
OpsReport run_steps(int n, bool schedule, bool trailing_op = false, int first_op_step = 0) {
  Stream s({schedule, false});
  for (int i = 0; i <= n; ++i) s.name(static_cast<std::uint32_t>(i), ("aten::w" + std::to_string(i)).c_str());
  std::uint64_t t = 1 * ms;
  for (int i = 0; i < n; ++i) {
    s.action(LT_EV_ACTION_BEGIN, t++, 100 + i, kTrain);
    if (i >= first_op_step) s.op(t++, static_cast<std::uint32_t>(i), 1);
    s.action(LT_EV_ACTION_END, t++, 100 + i);
  }
  if (trailing_op) s.op(t++, static_cast<std::uint32_t>(n), 1);
  return s.finish();
}

}  // namespace

TEST(OpsSchedule, WaitAndWarmupWindowsAreSkipped) {
  auto rep = run_steps(10, true);
  ASSERT_EQ(rep.processes.size(), 1u);
  const auto& p = rep.processes[0];
  EXPECT_EQ(p.skipped_steps, 4u);
  EXPECT_EQ(p.calls, 10u);  // every call is still seen
  ASSERT_EQ(p.tables.size(), 1u);
  EXPECT_EQ(p.tables[0].steps, 6u);
  EXPECT_EQ(row_names(p.tables[0]),
            (std::vector<std::string>{"aten::w2", "aten::w3", "aten::w4", "aten::w7", "aten::w8", "aten::w9"}));
  EXPECT_TRUE(rep.notes.empty());
}

TEST(OpsSchedule, WithoutScheduleEveryWindowIsKept) {
  auto rep = run_steps(10, false);
  const auto& t = only_table(rep);
  EXPECT_EQ(t.steps, 10u);
  EXPECT_EQ(row_names(t).size(), 10u);
  EXPECT_EQ(rep.processes[0].skipped_steps, 0u);
  EXPECT_TRUE(rep.notes.empty());
}

TEST(OpsSchedule, StepsBeforeTheFirstOpAreNumberedToo) {
  auto rep = run_steps(10, true, false, /*first_op_step=*/3);
  ASSERT_EQ(rep.processes.size(), 1u);
  const auto& p = rep.processes[0];
  EXPECT_EQ(p.skipped_steps, 4u);  // windows 0, 1, 5, 6: the first two had no op
  ASSERT_EQ(p.tables.size(), 1u);
  EXPECT_EQ(row_names(p.tables[0]),
            (std::vector<std::string>{"aten::w3", "aten::w4", "aten::w7", "aten::w8", "aten::w9"}));
}

TEST(OpsSchedule, OpsAfterTheLastStepsEndAreItsBatch) {
  auto rep = run_steps(10, true, true);  // its backward: step 9, an active one
  const auto& p = rep.processes.at(0);
  EXPECT_EQ(p.skipped_steps, 4u);
  EXPECT_EQ(calls(p.tables.at(0), "aten::w10"), 1u);
}

TEST(OpsSchedule, FewerThanFiveStepsKeepEveryWindowAndWarn) {
  auto rep = run_steps(3, true);
  const auto& t = only_table(rep);
  EXPECT_EQ(t.steps, 3u);
  EXPECT_EQ(row_names(t).size(), 3u);
  EXPECT_EQ(rep.processes[0].skipped_steps, 0u);
  ASSERT_EQ(rep.notes.size(), 1u);
  EXPECT_NE(rep.notes[0].find("default schedule will be overridden"), std::string::npos);
}

TEST(OpsSchedule, FourStepsWithTheLastStepsBackwardAfterItKeepEveryWindow) {
  // The ops after the last step end (in training, always the last step's
  // backward and optimizer step) are that step's: 4 steps keep every
  // window and warn (num_training_batches = 4 < 5).
  auto rep = run_steps(4, true, true);
  const auto& t = only_table(rep);
  EXPECT_EQ(rep.processes[0].skipped_steps, 0u);
  EXPECT_EQ(row_names(t).size(), 5u);
  EXPECT_EQ(rep.notes.size(), 1u);
}

TEST(OpsSchedule, StepFunctionsAreNumberedSeparately) {
  Stream s({true, false});
  s.name(0, "aten::t");
  s.name(1, "aten::v");
  std::uint64_t t = 1;
  std::uint64_t key = 1;
  auto step = [&](const char* n, std::uint32_t op) {
    s.action(LT_EV_ACTION_BEGIN, t++, key, n);
    s.op(t++, op, 1);
    s.action(LT_EV_ACTION_END, t++, key++);
  };
  for (int i = 0; i < 10; ++i) {
    step(kTrain, 0);
    if (i % 4 == 3) step(kVal, 1);  // validation after steps 3 and 7: two windows only
  }
  auto rep = s.finish();
  const auto& p = rep.processes.at(0);
  EXPECT_EQ(p.skipped_steps, 4u);  // training only
  ASSERT_EQ(p.tables.size(), 2u);
  EXPECT_EQ(table(p, kTrain)->steps, 6u);
  EXPECT_EQ(table(p, kVal)->steps, 2u);
  EXPECT_EQ(calls(*table(p, kVal), "aten::v"), 2u);
  EXPECT_EQ(rep.notes.size(), 1u);  // validation had fewer than 5 steps
}

// ---------------------------------------------------------------- intervals

namespace {

const OpInterval* interval(const OpsReport& rep, std::uint32_t tid, std::uint64_t begin) {
  for (auto& i : rep.intervals)
    if (i.tid == tid && i.begin_ns == begin) return &i;
  return nullptr;
}

}  // namespace

TEST(OpsIntervals, NotKeptUnlessAsked) {
  Stream s;
  s.name(0, "aten::a");
  s.op(1 * ms, 0, 1);
  EXPECT_TRUE(s.finish().intervals.empty());
}

TEST(OpsIntervals, EndAtTheFirstRecordShowingTheOpOver) {
  Stream s({false, true});
  s.name(0, "aten::a");
  s.name(1, "aten::b");
  s.name(2, "aten::c");
  s.op(1 * ms, 0, 1);      // A
  s.op(2 * ms, 1, 2);      // B in A
  s.op(3 * ms, 2, 3);      // C in B
  s.op(3 * ms, 2, 1, 11);  // another thread: closes nothing here
  s.sample(4 * ms, {0, 1, 2});
  s.sample(5 * ms, {0});  // B and C are over
  s.op(6 * ms, 1, 2);     // B' in A
  s.op(7 * ms, 2, 2);     // C' in A: B' is over
  s.op(8 * ms, 1, 1);     // a new top-level op: A and C' are over
  s.sample(9 * ms, {1});  // still running at the end
  auto rep = s.finish();
  ASSERT_EQ(rep.intervals.size(), 7u);
  for (auto& i : rep.intervals) {
    EXPECT_EQ(i.pid, kPid);
    EXPECT_LE(i.begin_ns, i.end_ns);
  }
  auto* a = interval(rep, 10, 1 * ms);
  auto* b = interval(rep, 10, 2 * ms);
  auto* c = interval(rep, 10, 3 * ms);
  auto* b2 = interval(rep, 10, 6 * ms);
  auto* c2 = interval(rep, 10, 7 * ms);
  auto* last = interval(rep, 10, 8 * ms);
  auto* other = interval(rep, 11, 3 * ms);
  ASSERT_TRUE(a && b && c && b2 && c2 && last && other);
  EXPECT_EQ(a->op, 0u);
  EXPECT_EQ(a->depth, 1u);
  EXPECT_EQ(c->depth, 3u);
  EXPECT_EQ(a->end_ns, 8 * ms);
  EXPECT_EQ(b->end_ns, 5 * ms);
  EXPECT_EQ(c->end_ns, 5 * ms);
  EXPECT_EQ(b2->end_ns, 7 * ms);
  EXPECT_EQ(c2->end_ns, 8 * ms);
  EXPECT_EQ(last->end_ns, 9 * ms);   // never seen over: the process's last record
  EXPECT_EQ(other->end_ns, 9 * ms);  // likewise
  // Children end no later than their parents.
  EXPECT_LE(b->end_ns, a->end_ns);
  EXPECT_LE(c->end_ns, b->end_ns);
  EXPECT_LE(c2->end_ns, a->end_ns);
}

TEST(OpsIntervals, ExitClosesEveryOpOfTheProcess) {
  Stream s({false, true});
  s.name(0, "aten::a");
  s.op(1 * ms, 0, 1);
  s.op(2 * ms, 0, 2);
  s.op(3 * ms, 0, 1, 20, 20);
  s.exit(4 * ms);
  s.sample(6 * ms, {0}, 0, 20, 20);
  auto rep = s.finish();
  ASSERT_EQ(rep.intervals.size(), 3u);
  EXPECT_EQ(interval(rep, 10, 1 * ms)->end_ns, 4 * ms);
  EXPECT_EQ(interval(rep, 10, 2 * ms)->end_ns, 4 * ms);
  EXPECT_EQ(interval(rep, 20, 3 * ms)->end_ns, 6 * ms);
}

TEST(OpsIntervals, OutOfOrderTimestampsNeverEndBeforeTheBegin) {
  // A record older than the op's entry (a damaged or merged trace; found by
  // fuzzing raw record streams) must not end it before it began: the
  // Chrome trace's unsigned end - begin would become a ~584-year "dur".
  Stream s({false, true});
  s.name(0, "aten::a");
  s.op(5 * ms, 0, 1);
  s.op(6 * ms, 0, 2);
  s.sample(3 * ms, {});  // older than both entries
  s.op(4 * ms, 0, 1);    // likewise, for the next top-level op
  auto rep = s.finish();
  ASSERT_EQ(rep.intervals.size(), 3u);
  for (auto& i : rep.intervals) EXPECT_GE(i.end_ns, i.begin_ns) << "op entered at " << i.begin_ns;
}

TEST(OpsIntervals, TooDeepAndUnnestedOpsHaveNone) {
  Stream s({false, true});
  s.name(0, "aten::a");
  s.op(1 * ms, 0, 0);  // deeper than LT_OPS_DEPTH
  s.op(2 * ms, 0, 3);  // its parents were lost
  s.op(3 * ms, 0, 1);
  auto rep = s.finish();
  ASSERT_EQ(rep.intervals.size(), 1u);
  EXPECT_EQ(rep.intervals[0].begin_ns, 3 * ms);
  EXPECT_EQ(calls(only_table(rep), "aten::a"), 3u);
}

// ---------------------------------------------------------------- damaged records

TEST(OpsRobustness, TruncatedRecordsAreIgnored) {
  Stream s;
  s.name(0, "aten::a");
  s.op(1 * ms, 0, 1);
  s.sampler(ms);

  lt_op_event op{};
  op.hdr = {LT_EV_OP, sizeof(lt_event_header) + 2, kPid, kPid, 0, 2 * ms};
  op.op = 0;
  op.depth = 1;
  s.feed_raw(op.hdr, &op);

  lt_op_name_event nm{};
  nm.hdr = {LT_EV_OP_NAME, sizeof(lt_event_header) + 8, 0, 0, 0, 2 * ms};
  nm.op = 0;
  std::strcpy(nm.name, "aten::renamed");
  s.feed_raw(nm.hdr, &nm);

  lt_py_sample_event smp{};
  smp.hdr = {LT_EV_PY_SAMPLE, sizeof smp - 4, kPid, kPid, 0, 3 * ms};
  smp.nops = 1;
  s.feed_raw(smp.hdr, &smp);

  lt_sampler_info_event si{};
  si.hdr = {LT_EV_SAMPLER_INFO, sizeof si - 1, 0, 0, 0, 3 * ms};
  si.period_ns = 5;
  s.feed_raw(si.hdr, &si);

  lt_action_event end{};
  end.hdr = {LT_EV_ACTION_END, sizeof(lt_event_header), kPid, kPid, 0, 4 * ms};
  s.feed_raw(end.hdr, &end);

  auto rep = s.finish();
  const auto& t = only_table(rep);
  EXPECT_EQ(row_names(t), std::vector<std::string>{"aten::a"});
  EXPECT_EQ(calls(t, "aten::a"), 1u);
  EXPECT_EQ(t.samples, 0u);
  EXPECT_EQ(rep.period_ns, ms);
}

TEST(OpsRobustness, HugeOrUnknownOpIndexes) {
  Stream s;
  s.name(0, "aten::a");
  s.name(0xFFFFFFFFu, "aten::huge");  // not a table size: ignored
  s.name(20'000'000u, "aten::big");
  s.op(1 * ms, 0, 1);
  s.op(2 * ms, 7, 1);            // no name record
  s.op(3 * ms, 0xFFFFFFFFu, 2);  // nor here
  s.op(4 * ms, 7, 60000);        // an impossible depth: counted, not nested
  s.sample(5 * ms, {7, 0xFFFFFFFFu});
  lt_py_sample_event e{};  // nops beyond ops[]: clamped
  e.hdr = {LT_EV_PY_SAMPLE, sizeof e, kPid, kPid, 0, 6 * ms};
  e.nops = 0xFFFF;
  for (auto& o : e.ops) o = 0;
  s.feed(e);
  auto rep = s.finish();
  EXPECT_LT(rep.names.size(), 100u);
  const auto& t = only_table(rep);
  EXPECT_EQ(row_names(t), (std::vector<std::string>{"aten::a", "op#7", "op#4294967295"}));
  EXPECT_EQ(calls(t, "op#7"), 2u);
  EXPECT_EQ(calls(t, "op#4294967295"), 1u);
  EXPECT_EQ(row(t, "op#4294967295")->self_samples, 1u);
  EXPECT_EQ(row(t, "op#7")->total_samples, 1u);
  EXPECT_EQ(row(t, "aten::a")->self_samples, 1u);
  EXPECT_EQ(row(t, "aten::a")->total_samples, 1u);  // 16 times aten::a: once
  EXPECT_EQ(rep.processes[0].calls, 4u);
}

TEST(OpsRobustness, NamesAreBoundedAndMayComeLate) {
  Stream s;
  lt_op_name_event e{};
  e.hdr = {LT_EV_OP_NAME, sizeof e, 0, 0, 0, 1};
  e.op = 1;
  std::memset(e.name, 'x', sizeof e.name);  // no terminating NUL
  std::memset(e.overload, 'y', sizeof e.overload);
  s.feed(e);
  s.op(1 * ms, 1, 1);
  s.op(2 * ms, 3, 1);  // its name comes after it
  s.name(3, "aten::late");
  s.op(3 * ms, 3, 1);
  auto rep = s.finish();
  const auto& t = only_table(rep);
  EXPECT_EQ(row_names(t), (std::vector<std::string>{std::string(LT_OP_NAME_MAX, 'x'), "op#3", "aten::late"}));
  ASSERT_EQ(rep.names.size(), 4u);
  EXPECT_EQ(rep.names[0], "");
  EXPECT_EQ(rep.names[3], "aten::late");
}

TEST(OpsRobustness, EmptyStreamAndStepsWithoutOps) {
  {
    Stream s;
    auto rep = s.finish();
    EXPECT_TRUE(rep.processes.empty());
    EXPECT_TRUE(rep.intervals.empty());
  }
  Stream s;
  s.step(1 * ms, 2 * ms);
  s.sample(3 * ms, {});
  auto rep = s.finish();  // no crash; whatever it shows has no calls
  for (auto& p : rep.processes) {
    EXPECT_EQ(p.calls, 0u);
    for (auto& t : p.tables) EXPECT_TRUE(row_names(t).empty());  // the step's [pl][profile] row only
  }
}

// Windows are folded into their table as their step ends (memory stays
// flat over a long attach); a kernel's CUPTI record often arrives after
// that.  Its row must land where it would had every window been kept to
// the end: after the rows its own window had, before a later window's.
TEST(OpsGpu, LateKernelsOfAFoldedWindowKeepFirstAppearanceOrder) {
  for (bool schedule : {false, true}) {
    Stream s({schedule, false, false});
    s.name(0, "aten::mm");
    s.name(1, "aten::relu");
    s.name(2, "aten::add");
    auto launch = [&](std::uint64_t ts, std::uint32_t corr, std::uint32_t op) {
      lt_gpu_launch_event e{};
      e.hdr = {LT_EV_GPU_LAUNCH, sizeof e, kPid, kPid, 0, ts};
      e.correlation = corr;
      e.source = LT_LAUNCH_CUPTI;
      e.nops = 1;
      e.ops[0] = op;
      s.feed(e);
    };
    auto kernel = [&](std::uint64_t ts, std::uint32_t corr, std::uint64_t dur) {
      lt_gpu_activity_event e{};
      e.hdr = {LT_EV_GPU_ACTIVITY, sizeof e, kPid, kPid, 0, ts};
      e.a.kind = LT_GPU_KERNEL;
      e.a.correlation = corr;
      e.a.name_id = 7;
      e.a.start_ns = ts;
      e.a.end_ns = ts + dur;
      s.feed(e);
    };
    std::uint64_t t = 1 * ms;
    // 10 steps: each runs mm (launching kernel#7, whose record comes one
    // step later) and, from step 1 on, relu; step 5 also add.
    for (std::uint32_t i = 0; i < 10; ++i) {
      s.action(LT_EV_ACTION_BEGIN, t += ms, 300 + i, kTrain);  // the step's batch holds its ops
      s.op(t += ms, 0, 1);
      launch(t += ms, 100 + i, 0);
      if (i > 0) {
        kernel(t += ms, 100 + i - 1, 1000);  // the previous step's kernel
        s.op(t += ms, 1, 1);
      }
      if (i == 5) s.op(t += ms, 2, 1);
      s.action(LT_EV_ACTION_END, t += ms, 300 + i);
    }
    kernel(t += ms, 109, 1000);
    auto rep = s.finish();
    const auto& tb = only_table(rep);
    // Step 0 (every window): mm, then (late) kernel#7, then relu from step
    // 1.  Scheduled (steps 2-4, 7-9): step 2's own window has mm, then the
    // kernel of step 1 (a skipped step: not counted), relu, then its own
    // late kernel.
    const std::vector<std::string> want =
        schedule ? std::vector<std::string>{"aten::mm", "aten::relu", "kernel#7"}
                 : std::vector<std::string>{"aten::mm", "kernel#7", "aten::relu", "aten::add"};
    EXPECT_EQ(row_names(tb), want) << "schedule " << schedule;
    auto* k = row(tb, "kernel#7");
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(k->calls, schedule ? 6u : 10u);
    EXPECT_EQ(k->self_cuda_ns, k->calls * 1000);
    auto* mm = row(tb, "aten::mm");
    ASSERT_NE(mm, nullptr);
    EXPECT_EQ(mm->self_cuda_ns, k->calls * 1000);  // the op that launched it
    EXPECT_TRUE(tb.has_cuda);
  }
}

// --profile-memory: MEM records charged to the ops running on their thread.
namespace {
void mem(Stream& s, std::uint64_t ts, std::uint8_t what, std::uint64_t ptr, std::int64_t bytes, std::uint16_t depth,
         std::uint8_t device_type = 0, std::uint16_t flags = LT_MEM_OPS_KNOWN, std::uint32_t tid = kPid) {
  lt_mem_event e{};
  e.hdr = {LT_EV_MEM, sizeof e, kPid, tid, 0, ts};
  e.what = what;
  e.ptr = ptr;
  e.bytes = bytes;
  e.depth = depth;
  e.device_type = device_type;
  e.device_index = device_type ? 0 : -1;
  e.flags = flags;
  s.feed(e);
}
}  // namespace

// Nesting: an allocation inside aten::empty (inside aten::zeros) is empty's
// self and both totals; a free inside median itself is its self only; the
// depth of a MEM record closes the ops that returned (as an OP entry does).
TEST(OpsMemory, NestingSelfAndTotal) {
  Stream s;
  s.name(0, "aten::zeros");
  s.name(1, "aten::empty");
  s.name(2, "aten::median");
  s.name(3, "aten::clone");
  s.op(1 * ms, 0, 1);
  s.op(2 * ms, 1, 2);
  mem(s, 3 * ms, LT_MEM_ALLOC, 0xa0, 400, 2);  // in empty in zeros
  s.op(4 * ms, 2, 1);                          // zeros returned: median at depth 1
  s.op(5 * ms, 3, 2);
  mem(s, 6 * ms, LT_MEM_ALLOC, 0xb0, 1000, 2);  // in clone in median
  mem(s, 7 * ms, LT_MEM_FREE, 0xb0, 0, 1);      // clone returned; median frees the copy (size from the alloc)
  mem(s, 8 * ms, LT_MEM_FREE, 0xa0, 0, 0);      // outside every op: torch's [memory] row
  auto rep = s.finish();
  const auto& t = only_table(rep);
  EXPECT_TRUE(t.has_memory);
  EXPECT_FALSE(t.has_cuda_memory);
  auto* zeros = row(t, "aten::zeros");
  auto* empty = row(t, "aten::empty");
  auto* median = row(t, "aten::median");
  auto* clone = row(t, "aten::clone");
  auto* memory = row(t, "[memory]");
  ASSERT_TRUE(zeros && empty && median && clone && memory);
  EXPECT_EQ(zeros->cpu_mem, 400);
  EXPECT_EQ(zeros->self_cpu_mem, 0);
  EXPECT_EQ(empty->cpu_mem, 400);
  EXPECT_EQ(empty->self_cpu_mem, 400);
  EXPECT_EQ(clone->cpu_mem, 1000);
  EXPECT_EQ(clone->self_cpu_mem, 1000);
  EXPECT_EQ(median->cpu_mem, 0);
  EXPECT_EQ(median->self_cpu_mem, -1000);
  EXPECT_EQ(memory->cpu_mem, -400);
  EXPECT_EQ(memory->self_cpu_mem, -400);
  EXPECT_EQ(memory->calls, 1u);
  EXPECT_EQ(zeros->calls, 1u);  // MEM records are no calls of the ops
  EXPECT_EQ(rep.processes[0].mem_events, 4u);
  EXPECT_EQ(rep.processes[0].frees_unknown, 0u);
}

// A free of an allocation made before the attach: counted, charged nothing;
// an OOM is counted; records without op stacks are counted, not charged.
TEST(OpsMemory, FreesOfUnknownSizeAndOom) {
  Stream s;
  s.name(0, "aten::add");
  s.op(1 * ms, 0, 1);
  mem(s, 2 * ms, LT_MEM_FREE, 0xdead, 0, 1);
  mem(s, 3 * ms, LT_MEM_OOM, 0, 1ll << 62, 1);
  mem(s, 4 * ms, LT_MEM_ALLOC, 0xc0, 64, 0, 0, 0);  // no LT_MEM_OPS_KNOWN
  auto rep = s.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  const auto& p = rep.processes[0];
  EXPECT_EQ(p.frees_unknown, 1u);
  EXPECT_EQ(p.ooms, 1u);
  EXPECT_EQ(p.mem_without_ops, 1u);
  const auto* add = row(only_table(rep), "aten::add");
  ASSERT_TRUE(add);
  EXPECT_EQ(add->cpu_mem, 0);
  EXPECT_EQ(add->self_cpu_mem, 0);
  EXPECT_EQ(row(only_table(rep), "[memory]"), nullptr);
}

// CUDA: signed sizes from the caching allocator go to the CUDA columns (no
// size lookup), CPU columns untouched; recursion counts once toward total.
TEST(OpsMemory, CudaColumnsAndRecursion) {
  Stream s;
  s.name(0, "aten::to");
  s.name(1, "aten::_to_copy");
  s.op(1 * ms, 0, 1);
  s.op(2 * ms, 1, 2);
  s.op(3 * ms, 0, 3);  // aten::to again, inside
  mem(s, 4 * ms, LT_MEM_ALLOC, 0x7f00, 4096, 3, 1);
  mem(s, 5 * ms, LT_MEM_FREE, 0x7f00, -1024, 3, 1);  // a CUDA free carries its size
  auto rep = s.finish();
  const auto& t = only_table(rep);
  EXPECT_TRUE(t.has_cuda_memory);
  auto* to = row(t, "aten::to");
  auto* copy = row(t, "aten::_to_copy");
  ASSERT_TRUE(to && copy);
  EXPECT_EQ(to->cuda_mem, 3072);  // once, though it runs twice on the stack
  EXPECT_EQ(to->self_cuda_mem, 3072);
  EXPECT_EQ(copy->cuda_mem, 3072);
  EXPECT_EQ(copy->self_cuda_mem, 0);
  EXPECT_EQ(to->cpu_mem, 0);
  EXPECT_EQ(to->self_cpu_mem, 0);
}

// ---------------------------------------------------------------- [pl][profile] rows

namespace {
const OpRowData* any_row(const OpsReport& rep, const std::string& name) {
  for (auto& p : rep.processes)
    for (auto& t : p.tables)
      if (auto* r = row(t, name)) return r;
  return nullptr;
}
}  // namespace

TEST(OpsActionRows, MeasuredTotalSelfLessNestedActionsAndSampledOps) {
  Stream s;
  s.sampler(1 * ms);
  s.name(0, "aten::mm");
  s.op(ms / 2, 0, 1);  // the process has an op table from here on
  s.action(LT_EV_ACTION_BEGIN, 1 * ms, 0xA, "run_training_batch");
  s.action(LT_EV_ACTION_BEGIN, 2 * ms, 0xB, kTrain);
  s.op(3 * ms, 0, 1);
  s.sample(4 * ms, {0});  // an op runs: not the step's own time
  s.sample(5 * ms, {});   // the step's own Python
  s.action(LT_EV_ACTION_END, 6 * ms, 0xB);
  s.action(LT_EV_ACTION_END, 10 * ms, 0xA);
  s.step(11 * ms, 12 * ms);  // a second step, alone
  auto rep = s.finish();
  const auto* step = any_row(rep, std::string("[pl][profile]") + kTrain);
  const auto* batch = any_row(rep, "[pl][profile]run_training_batch");
  ASSERT_TRUE(step && batch);
  EXPECT_EQ(step->calls, 2u);
  EXPECT_EQ(step->record_total_ns, 4 * ms + 1 * ms);
  EXPECT_EQ(step->record_self_ns, 3 * ms + 1 * ms);  // less the one sample with an op (1 ms)
  EXPECT_EQ(batch->calls, 1u);
  EXPECT_EQ(batch->record_total_ns, 9 * ms);
  EXPECT_EQ(batch->record_self_ns, 5 * ms);  // less the step inside it (4 ms, measured)
  // The action rows add no op calls and no samples.
  EXPECT_EQ(rep.processes.at(0).calls, 2u);
}

TEST(OpsActionRows, NoRowsBeforeTheProcessHasAnOpTable) {
  Stream s;
  s.name(0, "aten::mm");
  s.action(LT_EV_ACTION_BEGIN, 1 * ms, 0xA, "[LightningModule]M.setup");
  s.action(LT_EV_ACTION_END, 2 * ms, 0xA);
  s.op(3 * ms, 0, 1);
  s.action(LT_EV_ACTION_BEGIN, 4 * ms, 0xB, "[LightningModule]M.teardown");
  s.action(LT_EV_ACTION_END, 5 * ms, 0xB);
  auto rep = s.finish();
  EXPECT_EQ(any_row(rep, "[pl][profile][LightningModule]M.setup"), nullptr);
  ASSERT_NE(any_row(rep, "[pl][profile][LightningModule]M.teardown"), nullptr);
  EXPECT_EQ(any_row(rep, "[pl][profile][LightningModule]M.teardown")->record_total_ns, 1 * ms);
}

// ---------------------------------------------------------------- [pl][module] rows

namespace {

void module_call(Stream& s, std::uint64_t ts, std::uint64_t self, std::uint32_t depth) {
  lt_module_call_event e{};
  e.hdr = {LT_EV_MODULE_CALL, sizeof e, kPid, kPid, 0, ts};
  e.self = self;
  e.code = 0xc0de;  // _call_impl
  e.depth = depth;
  s.feed(e);
}

void module_name(Stream& s, std::uint64_t addr, const char* type, const char* name) {
  lt_module_name_event e{};
  e.hdr = {LT_EV_MODULE_NAME, sizeof e, kPid, kPid, 0, 1};
  e.module = addr;
  std::strncpy(e.type, type, sizeof e.type - 1);
  std::strncpy(e.name, name, sizeof e.name - 1);
  s.feed(e);
}

// A sample whose stack (root first) has `codes` (0xc0de = a _call_impl frame).
void stack_sample(Stream& s, std::uint64_t ts, std::initializer_list<std::uint64_t> root_first,
                  std::initializer_list<std::uint32_t> ops_running = {}) {
  lt_py_sample_event e{};
  e.hdr = {LT_EV_PY_SAMPLE, sizeof e, kPid, kPid, 0, ts};
  e.nframes = static_cast<u16>(root_first.size());
  std::size_t i = root_first.size();
  for (auto c : root_first) e.frames[--i].code = c;  // leaf first
  e.nops = static_cast<u16>(ops_running.size());
  i = 0;
  for (auto o : ops_running) e.ops[i++] = o;
  s.feed(e);
}

}  // namespace

// Calls exact under Lightning's names (a module named after its first call
// too), the LightningModule itself without a row; total = samples with the
// call's _call_impl still at its depth, self = those where it is the
// innermost module and no op runs.
TEST(OpsModules, ExactCallsLightningsNamesSampledTotals) {
  Stream s;
  s.sampler(ms);
  s.name(0, "aten::linear");
  module_call(s, 1 * ms, 0xb0, 3);  // block, before its name is known
  module_name(s, 0xa0, "m.Model", "");
  module_name(s, 0xb0, "m.Block", "block");
  module_name(s, 0xc0, "torch.nn.modules.linear.Linear", "block.lin");
  stack_sample(s, 2 * ms, {0x1, 0x2, 0xc0de, 0x3});  // in block: its self
  module_call(s, 3 * ms, 0xc0, 5);                   // block.lin inside block
  s.op(3 * ms, 0, 1);
  stack_sample(s, 4 * ms, {0x1, 0x2, 0xc0de, 0x3, 0xc0de, 0x4}, {0});  // in lin's op
  stack_sample(s, 5 * ms, {0x1, 0x2, 0xc0de, 0x5});                    // lin returned: block's self again
  stack_sample(s, 6 * ms, {0x1, 0x2, 0x6});                            // block returned
  stack_sample(s, 7 * ms, {0x1, 0x2, 0xc0de, 0x3});                    // a _call_impl again, but no call: none
  module_call(s, 8 * ms, 0xa0, 2);                                     // the LightningModule: no row
  module_call(s, 9 * ms, 0xc0, 3);
  auto rep = s.finish();
  const auto& t = only_table(rep);
  auto* block = row(t, "[pl][module]m.Block: block");
  auto* lin = row(t, "[pl][module]torch.nn.modules.linear.Linear: block.lin");
  ASSERT_TRUE(block && lin);
  EXPECT_EQ(block->calls, 1u);
  EXPECT_EQ(lin->calls, 2u);
  EXPECT_EQ(block->total_samples, 3u);
  EXPECT_EQ(block->self_samples, 2u);
  EXPECT_EQ(lin->total_samples, 1u);
  EXPECT_EQ(lin->self_samples, 0u);  // the op ran: its self
  EXPECT_EQ(row(t, "aten::linear")->total_samples, 1u);
  for (auto& r : t.rows) EXPECT_NE(r.name.rfind("\x01", 0), 0u) << "placeholder left: " << r.name;
  EXPECT_EQ(t.rows.size(), 3u);  // block, block.lin, aten::linear
}

// torch: a record's self leaves out its children, modules too. A sample
// inside a module call with no op running is the module's self, not also
// the enclosing action's (Self CPU total counted it twice).
TEST(OpsModules, ModuleSelfIsNotAlsoTheActionsSelf) {
  Stream s;
  s.sampler(1 * ms);
  s.name(0, "aten::mm");
  s.op(ms / 2, 0, 1);  // the process has an op table from here on
  module_name(s, 0xb0, "m.Block", "block");
  s.action(LT_EV_ACTION_BEGIN, 1 * ms, 0xB, kTrain);
  module_call(s, 2 * ms, 0xb0, 3);
  stack_sample(s, 3 * ms, {0x1, 0x2, 0xc0de});  // in block, no op: block's self
  stack_sample(s, 4 * ms, {0x1, 0x2});          // block returned: the step's own
  s.action(LT_EV_ACTION_END, 6 * ms, 0xB);
  auto rep = s.finish();
  const auto* step = any_row(rep, std::string("[pl][profile]") + kTrain);
  const auto* block = any_row(rep, "[pl][module]m.Block: block");
  ASSERT_TRUE(step && block);
  EXPECT_EQ(block->self_samples, 1u);
  EXPECT_EQ(step->record_total_ns, 5 * ms);
  EXPECT_EQ(step->record_self_ns, 4 * ms);  // less block's sample (1 ms)
}

// An op name from a record cannot pose as a module row or break the lookup
// of module names (a crafted trace threw std::invalid_argument here).
TEST(OpsModules, OpNamesThatLookLikeModuleKeysStayOps) {
  Stream s;
  s.sampler(ms);
  s.name(0, "\x01module x");
  s.name(1, "\x01module 176");  // 176 = 0xb0
  module_name(s, 0xb0, "m.Block", "block");
  s.op(1 * ms, 0, 1);
  s.op(2 * ms, 1, 1);
  module_call(s, 3 * ms, 0xb0, 3);
  OpsReport rep;
  ASSERT_NO_THROW(rep = s.finish());
  const auto& t = only_table(rep);
  ASSERT_TRUE(row(t, "\x01module x") && row(t, "\x01module 176") && row(t, "[pl][module]m.Block: block"));
  EXPECT_EQ(row(t, "\x01module 176")->calls, 1u);
  EXPECT_EQ(row(t, "[pl][module]m.Block: block")->calls, 1u);
}

// ---- the op observer's calls (OP_SPAN): measured, not sampled ----

TEST(OpsSpans, SelfAndTotalAreTheMeasuredTimes) {
  Stream s;
  s.name(0, "aten::linear");
  s.name(1, "aten::addmm");
  s.span(10 * ms, 40 * ms, 30 * ms, 1, 2);  // addmm inside linear
  s.span(5 * ms, 50 * ms, 15 * ms, 0, 1);   // linear: 45 ms less addmm's 30
  s.span(60 * ms, 61 * ms, 1 * ms, 1, 1);   // addmm alone
  auto rep = s.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  EXPECT_TRUE(rep.processes[0].measured);
  const auto& t = only_table(rep);
  EXPECT_EQ(row(t, "aten::linear")->calls, 1u);
  EXPECT_EQ(row(t, "aten::linear")->measured_self_ns, 15 * ms);
  EXPECT_EQ(row(t, "aten::linear")->measured_total_ns, 45 * ms);
  EXPECT_EQ(row(t, "aten::addmm")->calls, 2u);
  EXPECT_EQ(row(t, "aten::addmm")->measured_self_ns, 31 * ms);
  EXPECT_EQ(row(t, "aten::addmm")->measured_total_ns, 31 * ms);
  EXPECT_EQ(row(t, "aten::addmm")->self_samples, 0u);
}

TEST(OpsSpans, AnOnlyChildWithItsParentsNameFoldsIntoIt) {
  // aten::sum calling aten::sum (another overload): torch shows one call,
  // whose self time is both calls' own.
  Stream s;
  s.name(0, "aten::sum");
  s.name(1, "aten::fill_");
  s.span(2 * ms, 3 * ms, 1 * ms, 1, 3);  // fill_ inside the inner sum
  s.span(1 * ms, 8 * ms, 6 * ms, 0, 2);  // the inner sum
  s.span(0, 10 * ms, 3 * ms, 0, 1);      // the outer sum
  auto rep = s.finish();
  const auto& t = only_table(rep);
  EXPECT_EQ(row(t, "aten::sum")->calls, 1u);
  EXPECT_EQ(row(t, "aten::sum")->measured_self_ns, 9 * ms);
  EXPECT_EQ(row(t, "aten::sum")->measured_total_ns, 10 * ms);
  EXPECT_EQ(row(t, "aten::fill_")->calls, 1u);
}

TEST(OpsSpans, TwoSameNamedChildrenBothCount) {
  Stream s;
  s.name(0, "aten::add");
  s.span(1 * ms, 2 * ms, 1 * ms, 0, 2);
  s.span(3 * ms, 4 * ms, 1 * ms, 0, 2);
  s.span(0, 5 * ms, 3 * ms, 0, 1);
  auto rep = s.finish();
  EXPECT_EQ(row(only_table(rep), "aten::add")->calls, 3u);
  EXPECT_EQ(row(only_table(rep), "aten::add")->measured_self_ns, 5 * ms);
}

// --group-by-input-shapes with the op observer: each (op, shapes) pair is
// an op index of its own, named by its op (OP_NAME) and its shapes
// (OP_INPUT_SHAPES).
const OpRowData* shaped_row(const OpTableData& t, const std::string& name, const std::string& shapes) {
  for (auto& r : t.rows)
    if (r.name == name && r.input_shapes == shapes) return &r;
  return nullptr;
}

void input_shapes(Stream& s, std::uint32_t op, const char* text) {
  lt_op_input_shapes_event e{};
  e.hdr = {LT_EV_OP_INPUT_SHAPES, sizeof e, 0, 0, 0, 1};
  e.op = op;
  e.len = static_cast<std::uint32_t>(std::strlen(text));
  std::memcpy(e.text, text, e.len);
  s.feed(e);
}

// Op index `op`: `name`'s calls with these input shapes.
void shaped_op(Stream& s, std::uint32_t op, const char* name, const char* shapes) {
  s.name(op, name);
  input_shapes(s, op, shapes);
}

OpAggregatorOptions by_shapes() {
  OpAggregatorOptions opts;
  opts.group_by_shapes = true;
  return opts;
}

TEST(OpsSpans, ObservedShapesAreRowsOfTheirOwn) {
  Stream s(by_shapes());
  shaped_op(s, 0, "aten::mm", "[[2, 3], [3, 4]]");
  shaped_op(s, 1, "aten::mm", "[[8, 8], [8, 8]]");
  s.name(2, "my scope");  // a record_function() scope: no inputs, [] as torch prints it
  s.span(1 * ms, 2 * ms, 1 * ms, 0, 2);
  s.span(3 * ms, 7 * ms, 4 * ms, 1, 2);
  s.span(8 * ms, 9 * ms, 1 * ms, 0, 2);
  lt_op_span_event scope{};
  scope.hdr = {LT_EV_OP_SPAN, sizeof scope, kPid, kPid, 0, 0};
  scope.end_ns = 10 * ms;
  scope.self_ns = 4 * ms;
  scope.op = 2;
  scope.depth = 1;
  scope.flags = LT_OP_SPAN_USER;
  s.feed(scope);
  auto rep = s.finish();
  const auto& t = only_table(rep);
  ASSERT_NE(shaped_row(t, "aten::mm", "[[2, 3], [3, 4]]"), nullptr);
  EXPECT_EQ(shaped_row(t, "aten::mm", "[[2, 3], [3, 4]]")->calls, 2u);
  EXPECT_EQ(shaped_row(t, "aten::mm", "[[2, 3], [3, 4]]")->measured_self_ns, 2 * ms);
  ASSERT_NE(shaped_row(t, "aten::mm", "[[8, 8], [8, 8]]"), nullptr);
  EXPECT_EQ(shaped_row(t, "aten::mm", "[[8, 8], [8, 8]]")->measured_total_ns, 4 * ms);
  ASSERT_NE(shaped_row(t, "my scope", "[]"), nullptr);
  EXPECT_EQ(shaped_row(t, "my scope", "[]")->calls, 1u);
}

TEST(OpsSpans, ShapesDoNotStopTheSameNameMerge) {
  // torch merges an only child with its parent's name whatever the shapes.
  Stream s(by_shapes());
  shaped_op(s, 0, "aten::sum", "[[4, 4]]");
  shaped_op(s, 1, "aten::sum", "[[4, 4], [], [], []]");
  s.span(1 * ms, 8 * ms, 7 * ms, 1, 2);
  s.span(0, 10 * ms, 3 * ms, 0, 1);
  auto rep = s.finish();
  const auto& t = only_table(rep);
  ASSERT_NE(shaped_row(t, "aten::sum", "[[4, 4]]"), nullptr);
  EXPECT_EQ(shaped_row(t, "aten::sum", "[[4, 4]]")->calls, 1u);
  EXPECT_EQ(shaped_row(t, "aten::sum", "[[4, 4]]")->measured_self_ns, 10 * ms);
  EXPECT_EQ(shaped_row(t, "aten::sum", "[[4, 4], [], [], []]"), nullptr);
}

// The op observer's process on CUDA: launches carry no op stack (no op
// probes); the calls around each launch are found by time as their spans
// come, a drain later, and its kernels wait for them.
void cupti_launch(Stream& s, std::uint64_t ts, std::uint32_t correlation) {
  lt_gpu_launch_event e{};
  e.hdr = {LT_EV_GPU_LAUNCH, sizeof e, kPid, kPid, 0, ts};
  e.source = LT_LAUNCH_CUPTI;
  e.correlation = correlation;
  s.feed(e);
}

void kernel(Stream& s, std::uint64_t ts, std::uint32_t correlation, std::uint64_t dur) {
  lt_gpu_activity_event k{};
  k.hdr = {LT_EV_GPU_ACTIVITY, sizeof k, kPid, kPid, 0, ts};
  k.a.kind = LT_GPU_MEMCPY;
  k.a.copy_kind = 1;
  k.a.correlation = correlation;
  k.a.start_ns = 1000;
  k.a.end_ns = 1000 + dur;
  s.feed(k);
}

TEST(OpsSpans, KernelsJoinTheCallsAroundTheirLaunchByTime) {
  Stream s;
  s.observer();
  s.name(0, "aten::linear");
  s.name(1, "aten::addmm");
  s.name(2, "aten::relu");
  cupti_launch(s, 12 * ms, 7);  // inside addmm inside linear
  cupti_launch(s, 45 * ms, 8);  // inside linear only
  cupti_launch(s, 70 * ms, 9);  // inside relu, whose span comes after its kernel
  kernel(s, 71 * ms, 7, 300);   // before any span: waits
  s.span(10 * ms, 40 * ms, 30 * ms, 1, 2);
  s.span(5 * ms, 50 * ms, 15 * ms, 0, 1);
  kernel(s, 72 * ms, 8, 200);
  kernel(s, 73 * ms, 9, 50);
  s.span(60 * ms, 80 * ms, 20 * ms, 2, 1);
  s.watermark(100 * ms);
  auto rep = s.finish();
  const auto& t = only_table(rep);
  EXPECT_TRUE(t.has_cuda);
  EXPECT_EQ(row(t, "aten::addmm")->self_cuda_ns, 300u);
  EXPECT_EQ(row(t, "aten::addmm")->cuda_total_ns, 300u);
  EXPECT_EQ(row(t, "aten::linear")->self_cuda_ns, 200u);
  EXPECT_EQ(row(t, "aten::linear")->cuda_total_ns, 500u);
  EXPECT_EQ(row(t, "aten::relu")->self_cuda_ns, 50u);
  EXPECT_EQ(row(t, "Memcpy HtoD")->calls, 3u);
}

TEST(OpsSpans, AKernelWhoseLaunchNoCallHeldIsItsOwnRowOnly) {
  Stream s;
  s.observer();
  s.name(0, "aten::mm");
  s.span(1 * ms, 2 * ms, 1 * ms, 0, 1);
  cupti_launch(s, 5 * ms, 3);  // between calls
  s.watermark(10 * ms);
  kernel(s, 11 * ms, 3, 90);
  auto rep = s.finish();
  const auto& t = only_table(rep);
  EXPECT_EQ(row(t, "Memcpy HtoD")->self_cuda_ns, 90u);
  EXPECT_EQ(row(t, "aten::mm")->cuda_total_ns, 0u);
}

TEST(OpsSpans, AllocationsJoinTheCallsAroundThemByTime) {
  // --profile-memory with the op observer: MEM records carry no op stack.
  Stream s;
  s.observer();
  s.name(0, "aten::zeros");
  s.name(1, "aten::empty");
  mem(s, 2 * ms, LT_MEM_ALLOC, 0x10, 4096, 0, 0, 0);  // inside empty inside zeros
  mem(s, 6 * ms, LT_MEM_ALLOC, 0x20, 100, 0, 0, 0);   // in zeros only
  mem(s, 20 * ms, LT_MEM_FREE, 0x10, 0, 0, 0, 0);     // between calls: the [memory] row
  s.span(1 * ms, 3 * ms, 2 * ms, 1, 2);
  s.span(0, 8 * ms, 6 * ms, 0, 1);
  s.watermark(30 * ms);
  auto rep = s.finish();
  const auto& t = only_table(rep);
  EXPECT_TRUE(t.has_memory);
  EXPECT_EQ(row(t, "aten::empty")->self_cpu_mem, 4096);
  EXPECT_EQ(row(t, "aten::empty")->cpu_mem, 4096);
  EXPECT_EQ(row(t, "aten::zeros")->self_cpu_mem, 100);
  EXPECT_EQ(row(t, "aten::zeros")->cpu_mem, 4196);
  ASSERT_TRUE(row(t, "[memory]"));
  EXPECT_EQ(row(t, "[memory]")->cpu_mem, -4096);
  EXPECT_EQ(rep.processes[0].mem_without_ops, 0u);
}

TEST(OpsSpans, ThreadsNestApart) {
  Stream s;
  s.name(0, "aten::mm");
  s.span(1 * ms, 2 * ms, 1 * ms, 0, 2, /*tid=*/kPid + 1);  // its parent on another thread never came
  s.span(0, 5 * ms, 5 * ms, 0, 1);                         // not its parent: another thread
  auto rep = s.finish();
  EXPECT_EQ(row(only_table(rep), "aten::mm")->calls, 2u);  // the orphan counts at the end
}

// A fit the op observer records, with aten::addmm (op 0) and aten::copy_
// (op 1) named: the window tests' set-up and their one verdict.
// A train batch (fetch, then the step, 10 ns long): the step's start.
std::uint64_t short_train_batch(Lightning& l) {
  l.whole("[_TrainingEpochLoop].train_dataloader_next");
  l.begin("run_training_batch");
  l.begin(kTrain);
  const std::uint64_t in_step = l.t;
  l.t += 10;
  l.end();
  l.end();
  return in_step;
}

struct ObservedFit {
  Stream s;
  Lightning l{s};
  ObservedFit() {
    s.observer();
    s.name(0, "aten::addmm");
    s.name(1, "aten::copy_");
  }
  std::uint64_t train_batch() { return short_train_batch(l); }
  void expect_addmm_in_the_step_copy_outside() {
    auto rep = s.finish();
    ASSERT_EQ(rep.processes.size(), 1u);
    const auto* train = table(rep.processes[0], kTrain);
    const auto* outside = table(rep.processes[0], kOutside);
    ASSERT_TRUE(train && outside);
    EXPECT_EQ(row_names(*train), (std::vector<std::string>{"aten::addmm"}));
    EXPECT_EQ(row_names(*outside), (std::vector<std::string>{"aten::copy_"}));
  }
};

TEST(OpsSpans, ACallCountsInTheWindowItsStartFellIn) {
  // The observer's calls come a drain after the actions around them: a call
  // that started inside the training step counts there, one that started
  // after the batch's end hooks outside, whenever they arrive.
  ObservedFit fit;
  Stream& s = fit.s;
  Lightning& l = fit.l;
  const std::uint64_t in_step = fit.train_batch();
  l.whole("[Callback]Cb.on_train_batch_end");
  l.whole("[LightningModule]M.on_train_batch_end");
  l.whole("[LightningModule]M.on_train_epoch_end");
  const std::uint64_t after = l.t + 5;
  s.span(in_step + 1, in_step + 2, 1, 0, 1);  // in the step, arriving late
  s.span(after, after + 1, 1, 1, 1);          // after the batch
  fit.expect_addmm_in_the_step_copy_outside();
}

TEST(OpsSpans, AWatermarkKeepsTheWindowItFellIn) {
  // The observer's watermark lets go of the boundaries before it but the
  // last: a call that starts after it, in the window open at it, still
  // counts there; one in a later step in that step.
  ObservedFit fit;
  Stream& s = fit.s;
  Lightning& l = fit.l;
  for (int batch = 0; batch < 3; ++batch) {
    l.whole("[_TrainingEpochLoop].train_dataloader_next");
    l.begin("run_training_batch");
    l.whole(kTrain);
    l.end();
    l.whole("[Callback]Cb.on_train_batch_end");
    l.whole("[LightningModule]M.on_train_epoch_end");
  }
  const std::uint64_t outside = l.t + 5;
  s.watermark(outside);
  s.span(outside + 1, outside + 2, 1, 1, 1);  // after the last batch's hooks
  l.t += 10;
  const std::uint64_t in_step = fit.train_batch();
  s.watermark(in_step);
  s.span(in_step + 1, in_step + 2, 1, 0, 1);
  fit.expect_addmm_in_the_step_copy_outside();
}

TEST(OpsSpans, ObserverStateAndLosses) {
  Stream s;
  s.name(0, "aten::mm");
  lt_op_observer_event o{};
  o.hdr = {LT_EV_OP_OBSERVER, sizeof o, kPid, kPid, 0, 1};
  o.how = LT_OP_TIMES_OBSERVER;
  s.feed(o);
  s.span(1 * ms, 2 * ms, 1 * ms, 0, 1);
  o.final = 1;
  o.dropped = 7;
  o.too_deep = 2;
  s.feed(o);
  lt_op_observer_event other{};
  other.hdr = {LT_EV_OP_OBSERVER, sizeof other, kPid + 5, kPid + 5, 0, 1};
  other.how = LT_OP_TIMES_SAMPLED;
  std::strcpy(other.detail, "--no-inject");
  s.feed(other);
  s.op(3 * ms, 0, 1, kPid + 5, kPid + 5);
  auto rep = s.finish();
  ASSERT_EQ(rep.processes.size(), 2u);
  EXPECT_TRUE(rep.processes[0].measured);
  EXPECT_EQ(rep.processes[0].observer_dropped, 7u);
  EXPECT_EQ(rep.processes[0].observer_too_deep, 2u);
  EXPECT_FALSE(rep.processes[1].measured);
  EXPECT_EQ(rep.processes[1].observer_not_used, "--no-inject");
}

TEST(OpsSpans, ActionRowsSelfLeavesOutTheMeasuredCallsInThem) {
  // [pl][profile] rows: an action's self is its time less the calls that
  // ran while it was innermost, which come in after it ended.
  Stream s;
  s.name(0, "aten::addmm");
  s.observer();
  const std::uint64_t key = s.next_key++;
  s.action(LT_EV_ACTION_BEGIN, 10 * ms, key, kTrain);
  s.action(LT_EV_ACTION_END, 20 * ms, key);
  s.span(12 * ms, 16 * ms, 4 * ms, 0, 1);  // late, inside the step
  s.span(25 * ms, 26 * ms, 1 * ms, 0, 1);  // after it: the step is complete
  auto rep = s.finish();
  const auto* step = any_row(rep, std::string("[pl][profile]") + kTrain);
  ASSERT_TRUE(step);
  EXPECT_EQ(step->record_total_ns, 10 * ms);
  EXPECT_EQ(step->record_self_ns, 6 * ms);
}

TEST(OpsSpans, ActionsInsideACallAreItsChildren) {
  // Lightning's automatic optimization: optimizer_step runs
  // Optimizer.step# (a record_function scope) whose closure runs the
  // training_step and backward actions.  As Lightning's PyTorchProfiler
  // nests its [pl][profile] scopes: the scope's children are those actions,
  // the ops inside them are theirs.
  Stream s;
  s.name(0, "Optimizer.step#SGD.step");
  s.name(1, "aten::addmm");
  s.name(2, "aten::mm");
  s.observer();
  const std::uint64_t opt = s.next_key++, step = s.next_key++, bwd = s.next_key++;
  const char* kOpt = "[LightningModule]M.optimizer_step";
  const char* kBwd = "[Strategy]SingleDeviceStrategy.backward";
  s.action(LT_EV_ACTION_BEGIN, 0, opt, kOpt);
  s.action(LT_EV_ACTION_BEGIN, 10 * ms, step, kTrain);
  s.action(LT_EV_ACTION_END, 40 * ms, step);
  s.action(LT_EV_ACTION_BEGIN, 45 * ms, bwd, kBwd);
  s.action(LT_EV_ACTION_END, 80 * ms, bwd);
  s.action(LT_EV_ACTION_END, 100 * ms, opt);
  s.span(12 * ms, 30 * ms, 18 * ms, 1, 2);   // addmm in the training step, inside the scope
  s.span(50 * ms, 70 * ms, 20 * ms, 2, 2);   // mm in backward
  s.span(5 * ms, 95 * ms, 52 * ms, 0, 1);    // the scope: 90 ms less its two child calls
  s.span(101 * ms, 102 * ms, 1 * ms, 1, 1);  // later: every action before it is complete
  auto rep = s.finish();
  const auto* scope = any_row(rep, "Optimizer.step#SGD.step");
  const auto* opt_row = any_row(rep, std::string("[pl][profile]") + kOpt);
  const auto* step_row = any_row(rep, std::string("[pl][profile]") + kTrain);
  const auto* bwd_row = any_row(rep, std::string("[pl][profile]") + kBwd);
  ASSERT_TRUE(scope && opt_row && step_row && bwd_row);
  EXPECT_EQ(scope->measured_self_ns, 25 * ms);   // 90 less the actions (30 + 35)
  EXPECT_EQ(step_row->record_self_ns, 12 * ms);  // 30 less addmm
  EXPECT_EQ(bwd_row->record_self_ns, 15 * ms);   // 35 less mm
  EXPECT_EQ(opt_row->record_self_ns, 10 * ms);   // 100 less the scope (90)
}

TEST(OpsSpans, ProbesBeforeTheObserverMarkOnlyTheirTables) {
  // A process adopted before its torch loaded: the op probes count its
  // set-up's calls, then the observer takes over (the tracer sends its
  // calls that began before the switch hidden).  Only the table the probes'
  // calls went to is a sampled estimate; the step's calls are measured.
  Stream s;
  Lightning l{s};
  s.name(0, "aten::addmm");
  s.name(1, "aten::copy_");
  s.op(l.t++, 1, 1);  // the probes' call, at set-up
  s.observer();
  lt_op_span_event before{};  // the observer saw it begin before the switch
  before.hdr = {LT_EV_OP_SPAN, sizeof before, kPid, kPid, 0, l.t - 1};
  before.end_ns = l.t;
  before.op = 1;  // aten::copy_, the probes' call: hidden, so not a second one
  before.depth = 1;
  before.flags = LT_OP_SPAN_HIDDEN;
  s.feed(before);
  const std::uint64_t in_step = short_train_batch(l);
  l.whole("[LightningModule]M.on_train_epoch_end");
  s.span(in_step + 1, in_step + 3, 2, 0, 1);
  auto rep = s.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  const auto* train = table(rep.processes[0], kTrain);
  const auto* outside = table(rep.processes[0], kOutside);
  ASSERT_TRUE(train && outside);
  EXPECT_TRUE(rep.processes[0].measured);
  EXPECT_EQ(train->probe_calls, 0u);
  EXPECT_EQ(calls(*train, "aten::addmm"), 1u);
  EXPECT_EQ(row(*train, "aten::addmm")->measured_self_ns, 2u);
  EXPECT_EQ(outside->probe_calls, 1u);
  EXPECT_EQ(calls(*outside, "aten::copy_"), 1u);  // once: the hidden span is not a second call
}

TEST(OpsSpans, CallsLeftOutByOpsKeepTheNesting) {
  // --ops aten::addmm: aten::linear is sent hidden; addmm, its only child,
  // is still its child (not an orphan adopted by a later call).
  Stream s;
  s.name(1, "aten::addmm");
  s.span(2 * ms, 5 * ms, 3 * ms, 1, 2);
  lt_op_span_event hidden{};
  hidden.hdr = {LT_EV_OP_SPAN, sizeof hidden, kPid, kPid, 0, 1 * ms};
  hidden.end_ns = 6 * ms;
  hidden.self_ns = 2 * ms;
  hidden.op = UINT32_MAX;
  hidden.depth = 1;
  hidden.flags = LT_OP_SPAN_HIDDEN;
  s.feed(hidden);
  auto rep = s.finish();
  const auto& t = only_table(rep);
  EXPECT_EQ(row_names(t), (std::vector<std::string>{"aten::addmm"}));
  EXPECT_EQ(row(t, "aten::addmm")->calls, 1u);
  EXPECT_EQ(rep.processes[0].calls, 1u);
}

TEST(OpsSpans, AChildOutsideItsParentsTimeIsAnOrphan) {
  // A depth-2 call whose parent was lost (a full ring) is not the child of
  // the next depth-1 call, which started after it ended.
  Stream s;
  s.name(0, "aten::sum");
  s.span(1 * ms, 2 * ms, 1 * ms, 0, 2);  // its parent never comes
  s.span(5 * ms, 9 * ms, 4 * ms, 0, 1);  // same name, later: not its parent
  auto rep = s.finish();
  EXPECT_EQ(row(only_table(rep), "aten::sum")->calls, 2u);  // no merge
  EXPECT_EQ(row(only_table(rep), "aten::sum")->measured_self_ns, 5 * ms);
}

TEST(OpsSpans, AnActionRunAgainIsNotChargedWithTheNextCall) {
  // Two training steps on one thread: the second step's call comes in after
  // the first step completed; it is the second step's, not the first's.
  Stream s;
  s.name(0, "aten::addmm");
  s.observer();
  const std::uint64_t k1 = s.next_key++, k2 = s.next_key++;
  s.action(LT_EV_ACTION_BEGIN, 10 * ms, k1, kTrain);
  s.action(LT_EV_ACTION_END, 20 * ms, k1);
  s.action(LT_EV_ACTION_BEGIN, 30 * ms, k2, kTrain);
  s.action(LT_EV_ACTION_END, 40 * ms, k2);
  s.span(12 * ms, 14 * ms, 2 * ms, 0, 1);  // in step 1
  s.span(32 * ms, 38 * ms, 6 * ms, 0, 1);  // in step 2
  auto rep = s.finish();
  const auto* step = any_row(rep, std::string("[pl][profile]") + kTrain);
  ASSERT_TRUE(step);
  EXPECT_EQ(step->calls, 2u);
  EXPECT_EQ(step->record_total_ns, 20 * ms);
  EXPECT_EQ(step->record_self_ns, 12 * ms);  // 10 - 2 and 10 - 6, neither clamped
}
