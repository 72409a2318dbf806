// diff's statistics (the rank test, the shift and its interval, Holm) and
// its rows on synthetic steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "reports/aggregate/steps.h"
#include "reports/diff/cpu_wait.h"
#include "reports/diff/diff_flame.h"
#include "reports/diff/diff_html.h"
#include "reports/diff/rank_test.h"
#include "reports/diff/step_diff.h"
#include "tests/unit/process_builder.h"
#include "tests/unit/sched_samples.h"

using namespace lt;

namespace {

// The exact two-sided p-value of U by enumerating every split of the pooled
// samples (no ties): what the normal approximation stands for.
double exact_p(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> all = a;
  all.insert(all.end(), b.begin(), b.end());
  const std::size_t n = a.size(), N = all.size();
  const double observed = rank_test(a, b).u, mean = n * (N - n) / 2.0;
  std::vector<bool> pick(N, false);
  std::fill(pick.begin(), pick.begin() + static_cast<long>(n), true);
  std::size_t total = 0, extreme = 0;
  do {
    std::vector<double> x, y;
    for (std::size_t i = 0; i < N; ++i) (pick[i] ? x : y).push_back(all[i]);
    const double u = rank_test(x, y).u;
    ++total;
    if (std::fabs(u - mean) >= std::fabs(observed - mean) - 1e-9) ++extreme;
  } while (std::prev_permutation(pick.begin(), pick.end()));
  return static_cast<double>(extreme) / total;
}

TEST(RankTest, NormalApproximationAgreesWithExactEnumeration) {
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0, 1);
  for (double shift : {0.0, 0.5, 1.0, 1.5}) {
    std::vector<double> a(8), b(8);
    for (auto& x : a) x = noise(rng);
    for (auto& x : b) x = noise(rng) + shift;
    const double approx = rank_test(a, b).p, exact = exact_p(a, b);
    EXPECT_NEAR(approx, exact, 0.025) << "shift " << shift;
  }
}

TEST(RankTest, SeparatedSamples) {
  std::vector<double> a, b;
  for (int i = 1; i <= 10; ++i) a.push_back(i), b.push_back(i + 10);
  const auto r = rank_test(a, b);
  EXPECT_EQ(r.u, 100);
  EXPECT_LT(r.p, 0.001);
  EXPECT_EQ(r.shift, 10);  // the median of b - a: 1..19, weighted to 10
  EXPECT_LE(r.lo, 10);
  EXPECT_GE(r.hi, 10);
  EXPECT_GT(r.lo, 0);
  EXPECT_EQ(rank_test({}, b).p, 1);
  // Ties: identical samples are no difference.
  EXPECT_EQ(rank_test({1, 1, 1}, {1, 1, 1}).p, 1);
}

TEST(RankTest, HolmAndTheNormalQuantile) {
  const auto adj = holm({0.01, 0.04, 0.03, 0.005});
  EXPECT_NEAR(adj[0], 0.03, 1e-12);
  EXPECT_NEAR(adj[1], 0.06, 1e-12);
  EXPECT_NEAR(adj[2], 0.06, 1e-12);
  EXPECT_NEAR(adj[3], 0.02, 1e-12);
  EXPECT_NEAR(normal_quantile(0.975), 1.959963984540054, 1e-9);
  EXPECT_NEAR(normal_quantile(0.001), -3.090232306167813, 1e-9);
  EXPECT_NEAR(normal_upper_tail(1.959963984540054), 0.025, 1e-12);
}

// The goals on simulated steps: A against A flags nothing at 5 %
// (about 5 % of repeats, by construction of the test), and a 2 % slower B
// is found from 30 steps a side, when the step's own spread (its
// coefficient of variation) is 1 %.
// Past 4 M pairs the shift and its interval are selected, not formed: the
// same numbers as forming and sorting them (whole-ns durations, ties too).
TEST(RankTest, SelectedDifferencesEqualFormedOnes) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> ns(20'000'000, 20'400'000);
  std::vector<double> a(2100), b(2100);
  for (auto& x : a) x = ns(rng) / 1e9;
  for (auto& y : b) y = (ns(rng) + 300'000) / 1e9;
  ASSERT_GT(a.size() * b.size(), kFormedDifferences);
  std::vector<double> diffs;
  for (double x : a)
    for (double y : b) diffs.push_back(y - x);
  std::sort(diffs.begin(), diffs.end());
  std::vector<double> sa = a, sb = b;
  std::sort(sa.begin(), sa.end());
  std::sort(sb.begin(), sb.end());
  for (std::uint64_t r :
       {std::uint64_t{1}, std::uint64_t{2}, std::uint64_t{1000}, diffs.size() / 2, diffs.size() - 7, diffs.size()})
    EXPECT_EQ(kth_difference(sa, sb, r), diffs[r - 1]) << r;
  const RankTest t = rank_test(a, b);
  EXPECT_EQ(t.shift, (diffs[diffs.size() / 2 - 1] + diffs[diffs.size() / 2]) / 2);
  EXPECT_NEAR(t.shift, 300e-6, 10e-6);
  EXPECT_LT(t.lo, t.shift);
  EXPECT_GT(t.hi, t.shift);
  // Any doubles (differences closer than the bisection's tenth of a ns):
  // still the exact r-th.
  std::uniform_real_distribution<double> any(0, 1e-8);
  std::vector<double> ca(300), cb(400), cd;
  for (auto& x : ca) x = any(rng);
  for (auto& y : cb) y = any(rng);
  std::sort(ca.begin(), ca.end());
  std::sort(cb.begin(), cb.end());
  for (double x : ca)
    for (double y : cb) cd.push_back(y - x);
  std::sort(cd.begin(), cd.end());
  for (std::uint64_t r : {std::uint64_t{1}, std::uint64_t{77}, cd.size() / 2, cd.size() - 1, cd.size()})
    EXPECT_EQ(kth_difference(ca, cb, r), cd[r - 1]) << r;
  // And one of 100,000 a side (10^10 pairs) takes O(n + m) memory.
  std::vector<double> big_a(100'000), big_b(100'000);
  for (auto& x : big_a) x = ns(rng) / 1e9;
  for (auto& y : big_b) y = ns(rng) / 1e9;
  EXPECT_NEAR(rank_test(big_a, big_b).shift, 0.0, 5e-6);
}

TEST(RankTest, FalsePositivesAndPowerOnThirtyStepsASide) {
  std::mt19937 rng(42);
  auto steps = [&](double mean, double cv) {
    std::normal_distribution<double> d(mean, mean * cv);
    std::vector<double> v(30);
    for (auto& x : v) x = d(rng);
    return v;
  };
  int false_pos = 0, found = 0;
  const int repeats = 400;
  for (int i = 0; i < repeats; ++i) {
    false_pos += rank_test(steps(0.1, 0.01), steps(0.1, 0.01)).p < 0.05;
    const auto r = rank_test(steps(0.1, 0.01), steps(0.102, 0.01));
    found += r.p < 0.05 && r.shift > 0;
  }
  EXPECT_LE(false_pos, repeats * 0.08) << false_pos;  // 5 % expected; 8 %: 3 sigma of 400 draws
  EXPECT_GE(found, repeats * 0.95) << found;
}

// ActionsReport of one process: `n` train batches, backward `bwd` ms.
// From step `change_at` on, backward takes `bwd_later` ms.
ActionsReport fit(int n, double bwd, std::uint32_t seed, int change_at = -1, double bwd_later = 0) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> jitter(0, 0.05);
  testing_support::ProcessBuilder pb;
  auto add = [&](const std::string& name, double b, double e) { pb.add(name, b, e); };
  double t = 1;
  for (int k = 0; k < n; ++k) {
    const double fetch = 2 + jitter(rng), fwd = 4 + jitter(rng),
                 back = (change_at >= 0 && k >= change_at ? bwd_later : bwd) + jitter(rng);
    add("[_TrainingEpochLoop].train_dataloader_next", t, t + fetch);
    t += fetch;
    const double body = t;
    add("[Strategy]SingleDeviceStrategy.training_step", t, t + fwd);
    add("[Strategy]SingleDeviceStrategy.backward", t + fwd, t + fwd + back);
    t += fwd + back + 0.5;
    add("run_training_batch", body, t);
    add("[Callback]X.on_train_batch_end", t, t + 0.5);
    t += 1;
  }
  return std::move(pb).report();
}

TEST(StepDiff, ASlowerBackwardIsTheRowThatMovedTheStep) {
  const auto d = diff_steps(fit(40, 3, 1), fit(40, 4, 2));
  ASSERT_TRUE(d.step());
  EXPECT_EQ(d.steps_a, 40u);
  EXPECT_EQ(d.step()->verdict, 1);
  EXPECT_NEAR(d.step()->test.shift * 1e3, 1.0, 0.1);
  // After the step: the part and the action that hold the extra 1 ms.
  // run_training_batch holds backward: it is slower too (its calls are
  // longer), but its own time is not, so it sorts below them.
  ASSERT_GE(d.rows.size(), 4u);
  std::set<std::string> top;
  for (std::size_t i = 1; i <= 2; ++i) {
    top.insert(d.rows[i].what);
    EXPECT_EQ(d.rows[i].verdict, 1) << d.rows[i].what;
  }
  EXPECT_EQ(top, (std::set<std::string>{"part: backward", "[Strategy]SingleDeviceStrategy.backward"}));
  const auto batch =
      std::find_if(d.rows.begin(), d.rows.end(), [](const DiffRow& r) { return r.what == "run_training_batch"; });
  ASSERT_NE(batch, d.rows.end());
  EXPECT_EQ(batch->verdict, 1);
  EXPECT_NEAR((batch->per_step_b - batch->per_step_a) * 1e3, 1.0, 0.1);
  EXPECT_NEAR((batch->own_b - batch->own_a) * 1e3, 0.0, 0.1);
  EXPECT_GT(batch - d.rows.begin(), 2);
  for (const auto& r : d.rows) {
    if (r.what.find("dataloader") != std::string::npos) {
      EXPECT_EQ(r.verdict, 0) << r.what;
    }
  }
  const std::string text = render_step_diff(d, "a.ltrace", "b.ltrace");
  EXPECT_NE(text.find("slower  train step"), std::string::npos) << text;
}

// An action's own time: its calls less the actions they hold on their
// thread (children and grandchildren each once); another thread's action
// inside its span is not held.
TEST(StepDiff, AnActionsOwnTimeLeavesOutTheActionsItHolds) {
  testing_support::ProcessBuilder pb;
  double t = 1;
  for (int k = 0; k < 10; ++k) {
    pb.add("[_TrainingEpochLoop].train_dataloader_next", t, t + 1);
    const double b = t + 1;
    pb.add("[Strategy]SingleDeviceStrategy.training_step", b + 1, b + 4);  // 3 ms
    pb.add("[Strategy]SingleDeviceStrategy.backward", b + 4, b + 7);       // 3 ms
    pb.add("[Callback]Other.on_thread", b + 2, b + 3, 9);                  // 1 ms, thread 9
    pb.add("[LightningModule]M.optimizer_step", b + 0.5, b + 8);           // 7.5 ms, 6 of it its children's
    pb.add("run_training_batch", b, b + 10);                               // 10 ms, 7.5 of it optimizer_step's
    t = b + 10;
  }
  const auto r = std::move(pb).report();
  const auto d = diff_steps(r, r);
  std::map<std::string, double> own;
  for (const auto& row : d.rows) own[row.what] = row.own_a * 1e3;
  ASSERT_EQ(d.steps_a, 10u);
  EXPECT_NEAR(own["run_training_batch"], 2.5, 1e-6);
  EXPECT_NEAR(own["[LightningModule]M.optimizer_step"], 1.5, 1e-6);
  EXPECT_NEAR(own["[Strategy]SingleDeviceStrategy.training_step"], 3.0, 1e-6);
  EXPECT_NEAR(own["[Strategy]SingleDeviceStrategy.backward"], 3.0, 1e-6);
  EXPECT_NEAR(own["[Callback]Other.on_thread"], 1.0, 1e-6);
  const std::string text = render_step_diff(d, "a", "b");
  EXPECT_NE(text.find("own change"), std::string::npos) << text;
}

std::vector<ActionsReport> fits(int runs, double bwd, std::uint32_t seed) {
  std::vector<ActionsReport> out;
  for (int i = 0; i < runs; ++i) out.push_back(fit(30, bwd, seed + static_cast<std::uint32_t>(i)));
  return out;
}

TEST(StepDiff, OverRunsTheSlowerBackwardIsFoundAndTheSameJobIsNot) {
  const auto slower = diff_steps(fits(4, 3, 10), fits(3, 4, 20));
  ASSERT_TRUE(slower.by_run());
  EXPECT_EQ(slower.runs_a, 4u);
  EXPECT_EQ(slower.steps_a, 120u);
  ASSERT_TRUE(slower.step());
  EXPECT_EQ(slower.step()->verdict, 1);
  EXPECT_NEAR(slower.step()->test.shift * 1e3, 1.0, 0.1);  // per step
  EXPECT_EQ(slower.rows[1].what, "part: backward");
  const std::string text = render_step_diff(slower, "a1 ... a4", "b1 ... b3");
  EXPECT_NE(text.find("(4 runs, 120 train steps)"), std::string::npos) << text;
  EXPECT_NE(text.find("Welch's t"), std::string::npos) << text;
  // One new run against the baseline's four: the baseline's spread.
  const auto one = diff_steps(fits(4, 3, 30), fits(1, 4, 40));
  EXPECT_EQ(one.step()->verdict, 1);
  EXPECT_NE(render_step_diff(one, "a", "b").find("Student's t"), std::string::npos);
  for (const auto& r : diff_steps(fits(4, 3, 50), fits(4, 3, 60)).rows)
    EXPECT_EQ(r.verdict, 0) << r.what << " p " << r.p_holm;
}

// Two parts of one run (diff FILE --steps 0-19 --vs-steps 20-39): what
// lies within each part's steps, an epoch around them not.
TEST(StepDiff, TwoPartsOfOneRun) {
  const ActionsReport run = fit(40, 3, 70, /*change_at=*/20, /*bwd_later=*/4);
  ExportRange first, second;
  first.kind = second.kind = ExportRange::Kind::steps;
  first.last_step = 19;
  second.first_step = 20;
  second.last_step = 39;
  std::string matched;
  const ActionsReport a = within(run, first, &matched), b = within(run, second);
  EXPECT_FALSE(matched.empty());
  const auto d = diff_steps(a, b);
  EXPECT_EQ(d.steps_a, 20u);
  EXPECT_EQ(d.steps_b, 20u);
  EXPECT_EQ(d.step()->verdict, 1);
  EXPECT_EQ(d.rows[1].what, "part: backward");
  // The same half against itself: nothing.
  for (const auto& r : diff_steps(a, a).rows) EXPECT_EQ(r.verdict, 0) << r.what;
  EXPECT_EQ(within(run, ExportRange{}).processes[0].intervals.size(), run.processes[0].intervals.size());
}

TEST(StepDiff, TheSameJobTwiceFlagsNothing) {
  const auto d = diff_steps(fit(40, 3, 3), fit(40, 3, 4));
  for (const auto& r : d.rows) EXPECT_EQ(r.verdict, 0) << r.what << " p " << r.p_holm;
}

}  // namespace

// The op observer's calls of a fit, as OP_NAME and OP_SPAN records: in
// each training_step, aten::mm (1 ms, holding a 0.2 ms aten::t: self 0.8)
// and, with `extra_ms`, an aten::cumsum of that long.
// `from_ns`: the observer's calls from then on only (its handshake's end).
OpCalls ops_of(const ActionsReport& rep, double extra_ms, std::uint32_t seed, std::uint64_t from_ns = 0) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> jitter(0, 0.01);
  OpCalls o;
  auto ns = [](double ms) { return static_cast<std::uint64_t>(ms * 1e6); };
  const char* names[] = {"aten::mm", "aten::t", "aten::cumsum"};
  for (std::uint32_t k = 0; k < 3; ++k) {
    lt_op_name_event n{};
    n.hdr = {LT_EV_OP_NAME, sizeof n, 7, 7, 0, 0};
    n.op = k;
    std::strncpy(n.name, names[k], sizeof n.name - 1);
    o.add(n.hdr, reinterpret_cast<const std::byte*>(&n));
  }
  auto span = [&](std::uint32_t op, std::uint16_t depth, double b, double e, double self, std::uint16_t flags = 0) {
    lt_op_span_event s{};
    s.hdr = {LT_EV_OP_SPAN, sizeof s, 7, 7, 0, ns(b)};
    s.end_ns = ns(e);
    s.self_ns = ns(self);
    s.op = op;
    s.depth = depth;
    s.flags = flags;
    o.add(s.hdr, reinterpret_cast<const std::byte*>(&s));
  };
  const auto& p = rep.processes[0];
  for (const auto& iv : p.intervals) {
    if (p.actions[iv.action].name != "[Strategy]SingleDeviceStrategy.training_step" || iv.begin_ns < from_ns) continue;
    const double b = iv.begin_ns / 1e6 + 0.1, mm = 1 + jitter(rng);
    span(1, 2, b + 0.3, b + 0.5, 0.2);  // ends first: records come in end order
    span(0, 1, b, b + mm, mm - 0.2);
    span(0, 1, b, b + mm, mm, LT_OP_SPAN_HIDDEN);  // left out by --ops: not a row
    if (extra_ms > 0) span(2, 1, b + mm + 0.1, b + mm + 0.1 + extra_ms, extra_ms);
  }
  return o;
}

// An op injected into each step is its own row, first among the ops, at
// its time per step; the ops alike are not flagged; a run whose op times
// are the probes' estimates gives no op rows, and says why.
TEST(StepDiff, AnInjectedOpIsItsOwnRowAtItsTimePerStep) {
  const ActionsReport a = fit(40, 3, 1), b = fit(40, 3, 2);
  const OpCalls oa = ops_of(a, 0, 3), ob = ops_of(b, 2.0, 4);
  const auto d = diff_runs({{&a, &oa}}, {{&b, &ob}});
  EXPECT_TRUE(d.no_op_rows.empty()) << d.no_op_rows;
  const DiffRow* first_op = nullptr;
  const DiffRow* mm = nullptr;
  for (const auto& r : d.rows) {
    if (r.kind != DiffRow::Kind::op) continue;
    if (!first_op) first_op = &r;
    if (r.what == "op: aten::mm") mm = &r;
  }
  ASSERT_TRUE(first_op && mm);
  EXPECT_EQ(first_op->what, "op: aten::cumsum");
  EXPECT_EQ(first_op->verdict, 1);
  EXPECT_NEAR(first_op->per_step_b * 1e3, 2.0, 0.01);
  EXPECT_EQ(first_op->per_step_a, 0.0);
  EXPECT_EQ(first_op->n_a, 40u);                 // a sample per step, 0 where it never ran
  EXPECT_NEAR(mm->per_step_a * 1e3, 0.8, 0.02);  // self: its 1 ms less aten::t's 0.2 (the hidden copy left out)
  EXPECT_EQ(mm->verdict, 0);
  // Calls per train step: one each (the hidden copy not counted); none of
  // cumsum in A; the step row counts none.
  EXPECT_DOUBLE_EQ(mm->calls_a, 1.0);
  EXPECT_DOUBLE_EQ(first_op->calls_a, 0.0);
  EXPECT_DOUBLE_EQ(first_op->calls_b, 1.0);
  EXPECT_EQ(d.rows[0].calls_a, -1.0);
  const std::string text = render_step_diff(d, "a", "b");
  EXPECT_NE(text.find("calls/step A  calls/step B"), std::string::npos) << text;
  const auto cumsum = text.find("op: aten::cumsum");
  ASSERT_NE(cumsum, std::string::npos);
  const std::string line = text.substr(cumsum, text.find('\n', cumsum) - cumsum);
  EXPECT_TRUE(line.ends_with("0.00          1.00")) << line;

  OpCalls estimated;
  lt_op_event probe{};
  probe.hdr = {LT_EV_OP, sizeof probe, 7, 7, 0, 1};
  estimated.add(probe.hdr, reinterpret_cast<const std::byte*>(&probe));
  const auto none = diff_runs({{&a, &oa}}, {{&b, &estimated}});
  for (const auto& r : none.rows) EXPECT_NE(r.kind, DiffRow::Kind::op) << r.what;
  EXPECT_NE(none.no_op_rows.find("B: its op times are the op probes' estimates"), std::string::npos) << none.no_op_rows;

  // The observer took over from the probes (run, --all): probe entries in
  // the set-up leave the op rows; one inside a train step takes them away.
  OpCalls switched = ob;
  switched.add(probe.hdr, reinterpret_cast<const std::byte*>(&probe));
  EXPECT_TRUE(diff_runs({{&a, &oa}}, {{&b, &switched}}).no_op_rows.empty());
  lt_op_event in_step{};
  in_step.hdr = {LT_EV_OP, sizeof in_step, 7, 7, 0, b.processes[0].intervals.back().begin_ns};
  switched.add(in_step.hdr, reinterpret_cast<const std::byte*>(&in_step));
  const auto part = diff_runs({{&a, &oa}}, {{&b, &switched}});
  for (const auto& r : part.rows) EXPECT_NE(r.kind, DiffRow::Kind::op) << r.what;
  EXPECT_NE(part.no_op_rows.find("the op probes counted calls in its train steps"), std::string::npos)
      << part.no_op_rows;
  // Probe calls before and after the train steps only (the switch at the
  // set-up, a hand-back after the fit): the op rows stay.
  OpCalls around = ob;
  around.add(probe.hdr, reinterpret_cast<const std::byte*>(&probe));
  const auto& last = b.processes[0].intervals.back();
  lt_op_event after{};
  after.hdr = {LT_EV_OP, sizeof after, 7, 7, 0, last.end_ns + 1'000'000'000};
  around.add(after.hdr, reinterpret_cast<const std::byte*>(&after));
  EXPECT_TRUE(diff_runs({{&a, &oa}}, {{&b, &around}}).no_op_rows.empty());
}

// The op observer's OP_OBSERVER record of pid 7 at `ts` (`final`: its end).
void observer_record(OpCalls& o, std::uint64_t ts, bool final) {
  lt_op_observer_event e{};
  e.hdr = {LT_EV_OP_OBSERVER, sizeof e, 7, 7, 0, ts};
  e.how = LT_OP_TIMES_OBSERVER;
  e.final = final;
  o.add(e.hdr, reinterpret_cast<const std::byte*>(&e));
}

// An attach's observer begins after its handshake, seconds into the fit;
// a watch window's ends with it. The steps outside are no op samples: read
// as 0, half of A's steps made aten::mm "slower" in B by half its time
// (an audit's attach: aten::mm +20 %, Optimizer.step 0.6 calls a step).
TEST(StepDiff, OpRowsAreOverTheStepsTheObserverMeasuredWhole) {
  const ActionsReport a = fit(40, 3, 1), b = fit(40, 3, 2);
  const auto steps_a = step_records(a.processes[0]).train;
  // A: the handshake's record in step 20; the bridge's first call (step
  // 21's) after it, so steps 21.. are measured whole.
  OpCalls oa;
  observer_record(oa, steps_a[20].begin_ns + 1000, false);
  const OpCalls calls = ops_of(a, 0, 3, steps_a[21].begin_ns);
  oa.names = calls.names;
  oa.calls = calls.calls;
  OpCalls ob = ops_of(b, 0, 4);
  observer_record(ob, 0, false);
  const auto d = diff_runs({{&a, &oa}}, {{&b, &ob}});
  EXPECT_TRUE(d.no_op_rows.empty()) << d.no_op_rows;
  EXPECT_EQ(d.op_steps_a, 19u);
  EXPECT_EQ(d.op_steps_b, 40u);
  const auto mm = std::find_if(d.rows.begin(), d.rows.end(), [](const DiffRow& r) { return r.what == "op: aten::mm"; });
  ASSERT_NE(mm, d.rows.end());
  EXPECT_EQ(mm->n_a, 19u);
  EXPECT_NEAR(mm->per_step_a * 1e3, 0.8, 0.02);
  EXPECT_DOUBLE_EQ(mm->calls_a, 1.0);
  EXPECT_EQ(mm->verdict, 0);
  EXPECT_NE(render_step_diff(d, "a", "b")
                .find("op: per train step the op observer measured whole: A 19 of 40, B 40 "
                      "of 40"),
            std::string::npos);
  // Its first call (step 21's) began before its record (in step 22: the
  // bridge records from its answer): measured from that call on, so from
  // step 22 (17 steps from the record alone).
  OpCalls early;
  observer_record(early, steps_a[22].begin_ns + 1000, false);
  early.names = calls.names;
  for (const auto& c : calls.calls) {
    lt_op_span_event sp{};
    sp.hdr = {LT_EV_OP_SPAN, sizeof sp, 7, 7, 0, c.begin_ns};
    sp.end_ns = c.begin_ns + c.self_ns;
    sp.self_ns = c.self_ns;
    sp.op = c.op;
    early.add(sp.hdr, reinterpret_cast<const std::byte*>(&sp));
  }
  EXPECT_EQ(diff_runs({{&a, &early}}, {{&b, &ob}}).op_steps_a, 18u);
  // A watch window: measured to the final record, in step 30.
  observer_record(early, steps_a[30].begin_ns + 1000, true);
  EXPECT_EQ(diff_runs({{&a, &early}}, {{&b, &ob}}).op_steps_a, 8u);
  // None measured whole: no op rows, and why.
  OpCalls late;
  observer_record(late, steps_a.back().end_ns + 1, false);
  lt_op_span_event after{};
  after.hdr = {LT_EV_OP_SPAN, sizeof after, 7, 7, 0, steps_a.back().end_ns + 2};
  after.end_ns = after.hdr.ts_ns + 1000;
  after.self_ns = 1000;
  late.add(after.hdr, reinterpret_cast<const std::byte*>(&after));
  const auto none = diff_runs({{&a, &late}}, {{&b, &ob}});
  EXPECT_NE(none.no_op_rows.find("the op observer measured no train step whole"), std::string::npos) << none.no_op_rows;
}

template <class Record>
void feed(LineSamples& ls, const Record& r) {
  ls.add(r.hdr, reinterpret_cast<const std::byte*>(&r));
}

// On-CPU samples every 10 ms (pid 7).
void sampled_every_10ms(LineSamples& ls) {
  lt_sampler_info_event info{};
  info.hdr = {LT_EV_SAMPLER_INFO, sizeof info, 7, 7, 0, 0};
  info.period_ns = 10'000'000;
  info.rate_hz = 100;
  info.flags = LT_SAMPLER_ON_CPU;
  feed(ls, info);
}

// A code object of pid 7 and the lines its samples name (lasti = line).
void code_object(LineSamples& ls, std::uint64_t addr, int first_line, const char* name, const char* file,
                 std::initializer_list<int> lines) {
  lt_py_code_event c{};
  c.hdr = {LT_EV_PY_CODE, sizeof c, 7, 7, 0, 0};
  c.code = addr;
  c.first_line = first_line;
  std::strcpy(c.name, name);
  std::strcpy(c.file, file);
  feed(ls, c);
  for (int line : lines) {
    lt_py_line_event l{};
    l.hdr = {LT_EV_PY_LINE, sizeof l, 7, 7, 0, 0};
    l.code = addr;
    l.lasti = line;
    l.line = line;
    feed(ls, l);
  }
}

// Stack samples of a fit: every training_step gets two samples at
// train.py:10; with `extra`, B's steps get two more at train.py:12 (the
// line that calls an injected op). 10 ms period. Each called from
// main (run.py:5).
LineSamples lines_of(const ActionsReport& rep, bool extra, bool keep_stacks = false) {
  LineSamples ls(keep_stacks);
  sampled_every_10ms(ls);
  auto code = [&](std::uint64_t addr, int first_line, const char* name, const char* file,
                  std::initializer_list<int> lines) { code_object(ls, addr, first_line, name, file, lines); };
  code(0x1000, 9, "training_step", "train.py", {10, 12});
  code(0x2000, 1, "main", "/src/run.py", {5});
  const auto& p = rep.processes[0];
  for (const auto& iv : p.intervals) {
    if (p.actions[iv.action].name != "[Strategy]SingleDeviceStrategy.training_step") continue;
    for (int k = 0; k < (extra ? 4 : 2); ++k) {
      lt_py_sample_event s{};
      s.hdr = {LT_EV_PY_SAMPLE, sizeof s, 7, 7, 0, iv.begin_ns + 100'000 * static_cast<std::uint64_t>(k + 1)};
      s.nframes = 2;
      s.frames[0] = {0x1000, k < 2 ? 10 : 12, 0};
      s.frames[1] = {0x2000, 5, 0};
      feed(ls, s);
    }
  }
  return ls;
}

// The line that calls the injected op is a row of its own, slower by its
// samples per step times the period; the line alike is not flagged.
TEST(StepDiff, TheLineOfAnInjectedOpIsARowOfSampledTime) {
  const ActionsReport a = fit(40, 3, 1), b = fit(40, 3, 2);
  const LineSamples la = lines_of(a, false), lb = lines_of(b, true);
  const auto d = diff_runs({{&a, nullptr, &la}}, {{&b, nullptr, &lb}});
  EXPECT_TRUE(d.no_line_rows.empty()) << d.no_line_rows;
  const DiffRow *l10 = nullptr, *l12 = nullptr;
  for (const auto& r : d.rows) {
    if (r.what == "line: training_step (train.py:10)") l10 = &r;
    if (r.what == "line: training_step (train.py:12)") l12 = &r;
  }
  ASSERT_TRUE(l10 && l12);
  EXPECT_EQ(l12->verdict, 1);
  EXPECT_NEAR(l12->per_step_b * 1e3, 20.0, 1e-9);
  EXPECT_EQ(l12->per_step_a, 0.0);
  EXPECT_EQ(l10->verdict, 0);
  EXPECT_NEAR(l10->per_step_a * 1e3, 20.0, 1e-9);
  EXPECT_NE(render_step_diff(d, "a", "b").find("line: the innermost Python line"), std::string::npos);
  // Without samples on one side: no line rows, and why.
  const auto none = diff_runs({{&a, nullptr, nullptr}}, {{&b, nullptr, &lb}});
  EXPECT_NE(none.no_line_rows.find("A: no stack samples recorded"), std::string::npos) << none.no_line_rows;
}

// One line reached from two callers: A's steps sample it twice through
// main, B's twice through main and twice more through a helper. The line's
// row is slower by the helper's samples; the stack rows say through which
// caller: main > helper > training_step is new in B and slower, main >
// training_step unchanged. A stack of one sample in one step is under the
// floor: no row, counted.
TEST(StepDiff, WholeStacksAreRowsThatSayThroughWhichCaller) {
  const ActionsReport a = fit(200, 3, 1), b = fit(200, 3, 2);  // the stray sample: 0.05 ms a step
  auto samples = [](const ActionsReport& rep, bool helper) {
    LineSamples ls(/*keep_stacks=*/true);
    sampled_every_10ms(ls);
    auto code = [&](std::uint64_t addr, const char* name, const char* file, int line) {
      code_object(ls, addr, line - 1, name, file, {line});
    };
    code(0x1000, "training_step", "train.py", 10);
    code(0x2000, "main", "/src/run.py", 5);
    code(0x3000, "helper", "/src/run.py", 20);
    const auto& p = rep.processes[0];
    bool first = true;
    for (const auto& iv : p.intervals) {
      if (p.actions[iv.action].name != "[Strategy]SingleDeviceStrategy.training_step") continue;
      const int n = helper ? 4 : 2;
      for (int k = 0; k < n + (first ? 1 : 0); ++k) {
        lt_py_sample_event s{};
        s.hdr = {LT_EV_PY_SAMPLE, sizeof s, 7, 7, 0, iv.begin_ns + 100'000 * static_cast<std::uint64_t>(k + 1)};
        s.frames[0] = {0x1000, 10, 0};
        if (k == n) {  // one stray sample: main > helper > main > training_step
          s.nframes = 4;
          s.frames[1] = {0x2000, 5, 0};
          s.frames[2] = {0x3000, 20, 0};
          s.frames[3] = {0x2000, 5, 0};
        } else {
          s.nframes = k < 2 ? 2 : 3;
          s.frames[1] = {k < 2 ? 0x2000u : 0x3000u, k < 2 ? 5 : 20, 0};
          s.frames[2] = {0x2000, 5, 0};
        }
        feed(ls, s);
      }
      first = false;
    }
    return ls;
  };
  const LineSamples la = samples(a, false), lb = samples(b, true);
  const auto d = diff_runs({{&a, nullptr, &la}}, {{&b, nullptr, &lb}});
  EXPECT_TRUE(d.no_stack_rows.empty()) << d.no_stack_rows;
  const DiffRow *line = nullptr, *direct = nullptr, *via = nullptr;
  std::size_t stack_rows = 0;
  for (const auto& r : d.rows) {
    if (r.what == "line: training_step (train.py:10)") line = &r;
    if (r.kind != DiffRow::Kind::stack) continue;
    ++stack_rows;
    EXPECT_EQ(r.what, "stack: training_step (train.py:10)");
    if (r.frames.size() == 2) direct = &r;
    if (r.frames.size() == 3) via = &r;
  }
  ASSERT_TRUE(line && direct && via);
  EXPECT_EQ(stack_rows, 2u);
  EXPECT_EQ(d.stacks_under_floor, 1u);  // the stray sample's stack
  EXPECT_EQ(via->frames, (std::vector<std::string>{"main (/src/run.py:5)", "helper (/src/run.py:20)",
                                                   "training_step (train.py:10)"}));
  EXPECT_EQ(line->verdict, 1);
  EXPECT_EQ(via->verdict, 1);
  EXPECT_EQ(via->per_step_a, 0.0);
  EXPECT_NEAR(via->per_step_b * 1e3, 20.0, 1e-9);
  EXPECT_EQ(direct->verdict, 0);
  EXPECT_NEAR(direct->per_step_a * 1e3, 20.0, 1e-9);
  EXPECT_NEAR(direct->per_step_b * 1e3, 20.0, 1e-9);
  // The table names them by number; below it, each stack, the one after
  // the first by what it shares with it.
  const std::string text = render_step_diff(d, "a", "b");
  EXPECT_NE(text.find("stack #1: training_step (train.py:10)"), std::string::npos) << text;
  EXPECT_NE(text.find("Stacks (outermost frame first; 1 more under the floor are not rows):\n#1:\n"
                      "    main (/src/run.py:5)\n    helper (/src/run.py:20)\n    training_step (train.py:10)\n"
                      "#2: the first frame as #1's, then\n    training_step (train.py:10)\n"),
            std::string::npos)
      << text;
  // Samples without their stacks: no stack rows, and why.
  const LineSamples flat = lines_of(a, false);
  const auto none = diff_runs({{&a, nullptr, &flat}}, {{&b, nullptr, &lb}});
  EXPECT_NE(none.no_stack_rows.find("A: the samples' stacks were not kept"), std::string::npos) << none.no_stack_rows;
}

// Each train step's gradient all_reduce, issued in backward, blocked on
// for `blocked_ms` (a peer arriving late), and a barrier outside the steps.
CommReport comm_of(const ActionsReport& rep, double blocked_ms, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> jitter(0, 0.05);
  ProcessComm pc;
  pc.pid = rep.processes[0].meta.pid;
  pc.marks = 1;
  const auto ns = [](double ms) { return static_cast<std::uint64_t>(ms * 1e6); };
  for (const auto& iv : rep.processes[0].intervals) {
    if (rep.processes[0].actions[iv.action].name != "[Strategy]SingleDeviceStrategy.backward") continue;
    CommCall c;
    c.ts_ns = iv.begin_ns + ns(0.1);
    c.kind = LT_COMM_ALLREDUCE;
    c.blocked_ns = ns(blocked_ms + jitter(rng));
    pc.calls_kept.push_back(c);
  }
  CommCall outside;
  outside.ts_ns = 1;  // before every step: in no row
  outside.kind = LT_COMM_BARRIER;
  outside.blocked_ns = ns(500);
  pc.calls_kept.push_back(outside);
  CommCall untimed;  // issued in a step, its wait not seen: no time
  untimed.ts_ns = rep.processes[0].intervals.back().begin_ns;
  untimed.kind = LT_COMM_BROADCAST;
  pc.calls_kept.push_back(untimed);
  CommReport r;
  r.processes.push_back(std::move(pc));
  return r;
}

// A peer that arrives 2 ms later each step: the all_reduce's blocked time
// is its own row at that time per step; a barrier outside the steps and a
// call with no wait give none; a run without the comm probes' times gives
// no collective rows, and says why.
TEST(StepDiff, ALatePeerIsTheCollectiveRowAtItsBlockedTimePerStep) {
  const ActionsReport a = fit(40, 3, 1), b = fit(40, 3, 2);
  const CommReport ca = comm_of(a, 1.0, 5), cb = comm_of(b, 3.0, 6);
  const auto d = diff_runs({{&a, nullptr, nullptr, &ca}}, {{&b, nullptr, nullptr, &cb}});
  EXPECT_TRUE(d.no_collective_rows.empty()) << d.no_collective_rows;
  std::vector<const DiffRow*> colls;
  for (const auto& r : d.rows)
    if (r.kind == DiffRow::Kind::collective) colls.push_back(&r);
  ASSERT_EQ(colls.size(), 1u);
  EXPECT_EQ(colls[0]->what, "collective: all_reduce (blocked)");
  EXPECT_EQ(colls[0]->verdict, 1);
  EXPECT_EQ(colls[0]->n_a, 40u);
  EXPECT_NEAR(colls[0]->per_step_a * 1e3, 1.0, 0.05);
  EXPECT_NEAR(colls[0]->per_step_b * 1e3, 3.0, 0.05);
  EXPECT_NEAR(colls[0]->test.shift * 1e3, 2.0, 0.1);
  EXPECT_NE(render_step_diff(d, "a", "b").find("collective: the time a thread"), std::string::npos);
  CommReport untimed = cb;
  untimed.processes[0].marks = 0;  // calls counted, never timed
  const auto none = diff_runs({{&a, nullptr, nullptr, &ca}}, {{&b, nullptr, nullptr, &untimed}});
  EXPECT_NE(none.no_collective_rows.find("B: no c10d collective times recorded"), std::string::npos)
      << none.no_collective_rows;
  for (const auto& r : none.rows) EXPECT_NE(r.kind, DiffRow::Kind::collective) << r.what;
  // Neither side with the comm probes: nothing to say.
  EXPECT_TRUE(diff_runs({{&a}}, {{&b}}).no_collective_rows.empty());
}

// Each train step's backward launches one GEMM of `gemm_ms` (running on
// past the step's end when long) and, in A and B alike, a fill kernel by
// its mangled name; a copy and a kernel outside the steps give no row.
GpuReport kernels_of(const ActionsReport& rep, double gemm_ms) {
  GpuReport g;
  g.names = {"ampere_sgemm_128x64_tn",
             "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEvT_T0_T1_",
             "Memcpy HtoD"};
  const auto ns = [](double ms) { return static_cast<std::uint64_t>(ms * 1e6); };
  const std::uint32_t pid = rep.processes[0].meta.pid;
  for (const auto& iv : rep.processes[0].intervals) {
    if (rep.processes[0].actions[iv.action].name != "[Strategy]SingleDeviceStrategy.backward") continue;
    GpuSlice k;
    k.pid = pid;
    k.kind = LT_GPU_KERNEL;
    k.launch_ns = iv.begin_ns + ns(0.1);
    k.begin_ns = k.launch_ns + ns(0.05);
    k.end_ns = k.begin_ns + ns(gemm_ms);
    k.name = 0;
    g.slices.push_back(k);
    k.name = 1;
    k.begin_ns = k.end_ns;
    k.end_ns = k.begin_ns + ns(0.2);
    g.slices.push_back(k);
    k.kind = LT_GPU_MEMCPY;
    k.name = 2;
    g.slices.push_back(k);
  }
  GpuSlice outside;
  outside.pid = pid;
  outside.kind = LT_GPU_KERNEL;
  outside.launch_ns = 1;  // before every step
  outside.begin_ns = 2;
  outside.end_ns = ns(50);
  g.slices.push_back(outside);
  return g;
}

// A GEMM 0.5 ms longer in each step is its own kernel row at that change,
// by its short name; the fill kernel alike is a row, not flagged; copies and
// kernels launched outside the steps give none; a run without kernels gives
// no kernel rows, and says why.
TEST(StepDiff, ALongerKernelIsItsOwnRowAtItsGpuTimePerStep) {
  const ActionsReport a = fit(40, 3, 1), b = fit(40, 3, 2);
  const GpuReport ga = kernels_of(a, 1.0), gb = kernels_of(b, 1.5);
  const auto d = diff_runs({{&a, nullptr, nullptr, nullptr, &ga}}, {{&b, nullptr, nullptr, nullptr, &gb}});
  EXPECT_TRUE(d.no_kernel_rows.empty()) << d.no_kernel_rows;
  std::map<std::string, const DiffRow*> rows;
  for (const auto& r : d.rows)
    if (r.kind == DiffRow::Kind::kernel) rows[r.what] = &r;
  ASSERT_EQ(rows.size(), 2u) << render_step_diff(d, "a", "b");
  const DiffRow* gemm = rows["kernel: ampere_sgemm_128x64_tn"];
  const DiffRow* fill = rows["kernel: vectorized_elementwise_kernel"];
  ASSERT_TRUE(gemm && fill) << render_step_diff(d, "a", "b");
  EXPECT_EQ(gemm->verdict, 1);
  EXPECT_NEAR(gemm->per_step_a * 1e3, 1.0, 1e-6);
  EXPECT_NEAR(gemm->per_step_b * 1e3, 1.5, 1e-6);
  EXPECT_EQ(fill->verdict, 0);
  EXPECT_NEAR(fill->per_step_a * 1e3, 0.2, 1e-6);
  EXPECT_NE(render_step_diff(d, "a", "b").find("kernel: the GPU time of the kernels"), std::string::npos);
  const auto none = diff_runs({{&a, nullptr, nullptr, nullptr, &ga}}, {{&b}});
  EXPECT_NE(none.no_kernel_rows.find("B: no GPU kernels recorded"), std::string::npos) << none.no_kernel_rows;
}

// diff --html's flame graph: both sides' stacks in one tree, each frame's
// time per train step in A and B; the injected line's own time is B's
// alone, and it is the one red frame; the page escapes what the job named.
TEST(DiffFlame, FramesCarryBothSidesTimePerStep) {
  const ActionsReport a = fit(40, 3, 1), b = fit(40, 3, 2);
  const LineSamples la = lines_of(a, false, true), lb = lines_of(b, true, true);
  DiffFlameBuilder builder;
  builder.add(0, a, la);
  builder.add(1, b, lb);
  const DiffFlame f = builder.finish();
  EXPECT_EQ(f.steps_a, 40u);
  EXPECT_EQ(f.samples_a, 80u);
  EXPECT_EQ(f.samples_b, 160u);
  EXPECT_NEAR(f.root.a * 1e3, 20.0, 1e-9);  // 2 samples x 10 ms per step
  EXPECT_NEAR(f.root.b * 1e3, 40.0, 1e-9);
  ASSERT_EQ(f.root.children.size(), 1u);
  const DiffFlameNode& main = f.root.children[0];
  EXPECT_EQ(main.name, "main (/src/run.py:5)");
  EXPECT_EQ(main.self_a, 0.0);
  ASSERT_EQ(main.children.size(), 2u);
  const DiffFlameNode& l12 = main.children[1];
  EXPECT_EQ(l12.name, "training_step (train.py:12)");
  EXPECT_EQ(l12.self_a, 0.0);
  EXPECT_NEAR(l12.self_b * 1e3, 20.0, 1e-9);
  EXPECT_NEAR(main.children[0].self_a * 1e3, main.children[0].self_b * 1e3, 1e-9);

  EXPECT_EQ(diff_colour(0.02, 0.001, 0.02), "#ff0000");
  EXPECT_EQ(diff_colour(-0.02, 0.001, 0.02), "#0000ff");
  EXPECT_EQ(diff_colour(0.0005, 0.001, 0.02), "#f2f2f2");
  EXPECT_EQ(diff_colour(0.01, 0.001, 0.02).substr(0, 3), "#ff");

  const auto d = diff_runs({{&a, nullptr, &la}}, {{&b, nullptr, &lb}});
  std::ostringstream page;
  write_diff_html(d, f, "a<1>", "b", page);
  const std::string html = page.str();
  EXPECT_NE(html.find("A: a&lt;1&gt;"), std::string::npos);
  EXPECT_NE(html.find("id=\"flame-b\""), std::string::npos);
  EXPECT_NE(html.find("id=\"flame-a\""), std::string::npos);
  // The line's frame in B's graph: full red (the largest change).
  const auto at = html.find("data-name=\"training_step (train.py:12)\"");
  ASSERT_NE(at, std::string::npos);
  EXPECT_NE(html.find("fill=\"#ff0000\"", at), std::string::npos);
  EXPECT_LT(html.find("fill=\"#ff0000\"", at), html.find("</g>", at));
}

using testing_support::waiting_for_a_cpu;

// One run a side on a shared machine: B's loop waited for a CPU where A's
// did not. The diff says how much of B's shift is that wait (an audit: the
// same job read as +25 % with nothing said); it says nothing of the kind
// where the wait did not move with the step.
TEST(CpuWait, TheShareOfAShiftThatIsTheWaitForACpu) {
  const ActionsReport a = fit(40, 3, 1), b = fit(40, 4, 2);  // B's step +1 ms
  const StepDiff d = diff_steps(a, b);
  ASSERT_TRUE(d.step());
  const CpuWait calm = cpu_wait_in_steps(a, waiting_for_a_cpu(a, 0.01));
  ASSERT_TRUE(calm.known());
  EXPECT_NEAR(calm.share(), 0.01, 0.002);
  // A tenth of each step waiting (~1.2 ms of B's ~11.7 ms steps, from
  // one to the next): more than B's ~1 ms shift, so all of it.
  const auto steps_b = step_records(b.processes[0]).train;
  const double step_ms = (steps_b.back().end_ns - steps_b.front().begin_ns) / 1e6 / (steps_b.size() - 1.0);
  const CpuWait busy = cpu_wait_in_steps(b, waiting_for_a_cpu(b, 0.10));
  EXPECT_NEAR(busy.per_step_ms(), 0.1 * step_ms, 0.05);
  EXPECT_EQ(shift_in_cpu_wait_ms(calm, busy, d), d.step()->test.shift * 1e3);
  EXPECT_NE(render_cpu_wait(calm, busy, d).find("  all of B's step shift (+1."), std::string::npos)
      << render_cpu_wait(calm, busy, d);
  // Half as much waiting: that much of the shift.
  const CpuWait some = cpu_wait_in_steps(b, waiting_for_a_cpu(b, 0.06));
  const double in_wait = shift_in_cpu_wait_ms(calm, some, d);
  EXPECT_NEAR(in_wait, some.per_step_ms() - calm.per_step_ms(), 1e-9);
  EXPECT_LT(in_wait, d.step()->test.shift * 1e3);
  const CpuWait& busy_note = some;
  const std::string note = render_cpu_wait(calm, busy_note, d);
  EXPECT_NE(note.find("cpu wait (the training loop runnable but waiting for a CPU; /proc schedstat samples): A 0."),
            std::string::npos)
      << note;
  EXPECT_NE(note.find("  an estimated +0."), std::string::npos) << note;
  // The same wait on both sides: none of the shift is said to be it.
  const CpuWait same = cpu_wait_in_steps(b, waiting_for_a_cpu(b, 0.01));
  EXPECT_EQ(shift_in_cpu_wait_ms(calm, same, d), 0);
  EXPECT_EQ(render_cpu_wait(calm, same, d).find("step shift"), std::string::npos);
  // A side without samples: said, and nothing estimated.
  EXPECT_NE(render_cpu_wait(calm, CpuWait{}, d).find("B not known (no /proc samples"), std::string::npos);
  EXPECT_EQ(shift_in_cpu_wait_ms(calm, CpuWait{}, d), 0);
  EXPECT_EQ(render_cpu_wait(CpuWait{}, CpuWait{}, d), "");
}
