// Steps for the dashboard: found from batch hooks, split into parts that add
// up, statistics and spikes, buckets, GPU busy/idle, verdicts, and the page.
#include "reports/aggregate/steps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "bpf/events.h"
#include "reports/cluster/merged_html.h"
#include "reports/export/dashboard.h"
#include "reports/export/html_report.h"
#include "reports/steps/steps_report.h"

using namespace lt;

namespace {

constexpr std::uint64_t ms = 1000000;

// A process whose intervals are given as (name, begin, end) in ms.
struct Builder {
  ProcessActions p;
  std::uint32_t idx(const std::string& name) {
    for (std::uint32_t i = 0; i < p.actions.size(); ++i)
      if (p.actions[i].name == name) return i;
    p.actions.emplace_back(name);
    return static_cast<std::uint32_t>(p.actions.size() - 1);
  }
  void add(const std::string& name, double b, double e, std::uint32_t tid = 100) {
    const auto i = idx(name);
    p.actions[i].add((e - b) / 1e3);
    p.intervals.push_back({i, tid, static_cast<std::uint64_t>(b * ms), static_cast<std::uint64_t>(e * ms), false});
  }
};

// One Lightning 2.x automatic-optimization training batch starting at t (ms):
// fetch `fetch` ms, then run_training_batch holding optimizer_step, which
// holds training_step and backward.
void train_batch(Builder& b, double t, double fetch, double fwd = 4, double bwd = 3) {
  b.add("[_TrainingEpochLoop].train_dataloader_next", t, t + fetch);
  t += fetch;
  b.add("[Callback]TQDMProgressBar.on_train_batch_start", t, t + 0.5);
  t += 0.5;
  const double body_b = t;
  b.add("[LightningModule]Model.optimizer_zero_grad", t, t + 0.5);
  t += 0.5;
  const double opt_b = t;
  b.add("[Strategy]SingleDeviceStrategy.training_step", t + 0.25, t + 0.25 + fwd);
  b.add("[Strategy]SingleDeviceStrategy.backward", t + 0.25 + fwd, t + 0.25 + fwd + bwd);
  t += 0.25 + fwd + bwd + 1;  // 1 ms of the optimizer's own work
  b.add("[LightningModule]Model.optimizer_step", opt_b, t);
  t += 0.25;  // run_training_batch's own time
  b.add("run_training_batch", body_b, t);
  b.add("[Callback]TQDMProgressBar.on_train_batch_end", t, t + 1);
}

// Pid 7: 5 training batches fetching 2-6 ms, 100 ms apart, then two
// validation batches of 4 and 5 ms (a 1 ms fetch each).
Builder five_steps_and_two_validation_steps() {
  Builder b;
  b.p.meta.pid = 7;
  double t = 0;
  for (int i = 0; i < 5; ++i) {
    train_batch(b, t, 2.0 + i);
    t += 100;
  }
  b.add("[_EvaluationLoop].val_next", 600, 601);
  b.add("[Strategy]SingleDeviceStrategy.validation_step", 601, 604);
  b.add("[_EvaluationLoop].val_next", 604, 605);
  b.add("[Strategy]SingleDeviceStrategy.validation_step", 605, 609);
  return b;
}

}  // namespace

TEST(Steps, PartsOfEachTrainingStepAddUpExactly) {
  Builder b = five_steps_and_two_validation_steps();
  const ProcessSteps s = step_records(b.p);
  EXPECT_EQ(s.tid, 100u);
  ASSERT_EQ(s.train.size(), 5u);
  ASSERT_EQ(s.validation.size(), 2u);
  for (std::size_t i = 0; i < 5; ++i) {
    const auto& st = s.train[i];
    const double fetch = 2.0 + i;
    // fetch + start hook + zero_grad + 0.25 + fwd 4 + bwd 3 + 1 + 0.25 + end hook 1 = fetch + 10.5
    EXPECT_EQ(st.duration_ns(), static_cast<std::uint64_t>((fetch + 10.5) * ms)) << i;
    std::uint64_t sum = 0;
    for (auto x : st.part_ns) sum += x;
    EXPECT_EQ(sum, st.duration_ns());
    EXPECT_EQ(st.part_ns[size_t(StepPart::dataloader)], static_cast<std::uint64_t>(fetch * ms));
    EXPECT_EQ(st.part_ns[size_t(StepPart::step)], 4 * ms);
    EXPECT_EQ(st.part_ns[size_t(StepPart::backward)], 3 * ms);
    // zero_grad 0.5, optimizer_step's own: 0.25 before the closure + 1 after
    EXPECT_EQ(st.part_ns[size_t(StepPart::optimizer)], 1750000u);
    EXPECT_EQ(st.part_ns[size_t(StepPart::hooks)], 1500000u);
    EXPECT_EQ(st.part_ns[size_t(StepPart::other)], 250000u);  // run_training_batch's own
  }
  EXPECT_EQ(s.validation[0].duration_ns(), 4 * ms);
  EXPECT_EQ(s.validation[1].part_ns[size_t(StepPart::step)], 4 * ms);
  EXPECT_EQ(s.validation[1].part_ns[size_t(StepPart::dataloader)], 1 * ms);
}

TEST(Steps, CategoriesByName) {
  EXPECT_EQ(step_part_of("[_TrainingEpochLoop].train_dataloader_next"), StepPart::dataloader);
  EXPECT_EQ(step_part_of("[Strategy]DDPStrategy.batch_to_device"), StepPart::dataloader);
  EXPECT_EQ(step_part_of("[Strategy]DDPStrategy.training_step"), StepPart::step);
  EXPECT_EQ(step_part_of("training_step"), StepPart::step);
  EXPECT_EQ(step_part_of("[Strategy]DDPStrategy.backward"), StepPart::backward);
  EXPECT_EQ(step_part_of("[LightningModule]M.optimizer_step"), StepPart::optimizer);
  EXPECT_EQ(step_part_of("[Callback]ModelCheckpoint{'monitor': 'a.b'}.on_train_batch_end"), StepPart::hooks);
  EXPECT_EQ(step_part_of("[LightningModule]M.on_before_backward"), StepPart::hooks);
  EXPECT_EQ(step_part_of("run_training_batch"), StepPart::other);
}

TEST(Steps, StatsSpikesAndVerdicts) {
  Builder b;
  b.p.meta.pid = 9;
  for (int i = 0; i < 40; ++i) train_batch(b, i * 100.0, i == 17 ? 60.0 : 5.0);
  const ProcessSteps s = step_records(b.p);
  ASSERT_EQ(s.train.size(), 40u);
  const StepStats st = step_stats(s.train);
  EXPECT_EQ(st.p50, static_cast<std::uint64_t>(15.5 * ms));
  EXPECT_EQ(st.max, static_cast<std::uint64_t>(70.5 * ms));
  EXPECT_EQ(st.mad, 0u);
  EXPECT_EQ(st.spike_above, st.p50 + st.p50 / 20);
  EXPECT_EQ(spike_indexes(s.train, st), std::vector<std::size_t>{17});
  const auto v = step_verdicts(s, "p9");
  ASSERT_EQ(v.size(), 2u);  // spikes are the chart's, not a finding
  EXPECT_EQ(v[0].kind, "dataloader");
  // 39 x 5 + 60 of fetch over 39 x 16.5 + 71.5 of steps
  EXPECT_NEAR(v[0].value, (39 * 5.0 + 60) / (39 * 15.5 + 70.5), 1e-9);
  EXPECT_EQ(v[0].href, "#p9-parts-train");
  EXPECT_EQ(v[1].kind, "slow_steps");  // 70.5 ms > 2 x 15.5 (and past the spread: MAD 0)
  EXPECT_EQ(v[1].value, 1.0);
  // A fast loader: no dataloader verdict (below 10%).
  Builder quick;
  for (int i = 0; i < 10; ++i) train_batch(quick, i * 100.0, 0.5);
  for (const auto& x : step_verdicts(step_records(quick.p), "p0")) EXPECT_NE(x.kind, "dataloader");
}

// Validation after every fifth training step (3 batches of 4 ms each
// after a 0.5 ms gap) and one training step over twice the median.
TEST(Steps, ValidationAndSlowStepVerdicts) {
  Builder b;
  b.p.meta.pid = 12;
  double t = 0;
  for (int i = 0; i < 10; ++i) {
    const double fetch = i == 4 ? 40 : 5;
    train_batch(b, t, fetch);  // fetch + 10.5 ms
    t += fetch + 11;
    if (i % 5 == 4)
      for (int k = 0; k < 3; ++k) {
        b.add("[_EvaluationLoop].val_next", t, t + 1);
        b.add("[Strategy]SingleDeviceStrategy.validation_step", t + 1, t + 4);
        t += 4.5;
      }
  }
  const ProcessSteps s = step_records(b.p);
  ASSERT_EQ(s.train.size(), 10u);
  ASSERT_EQ(s.validation.size(), 6u);
  const ValidationRuns vr = validation_runs(s);
  EXPECT_EQ(vr.runs, 2u);
  EXPECT_EQ(vr.min_steps, 3u);
  EXPECT_EQ(vr.max_steps, 3u);
  EXPECT_EQ(vr.run_ns, 2 * 13 * ms);                              // each run: 3 steps 4.5 ms apart, the last 4 ms
  EXPECT_EQ(vr.span_ns, static_cast<std::uint64_t>(221.5 * ms));  // 9 x 16 + 51 + 2 x 13.5 - the last 0.5
  const auto v = step_verdicts(s, "p12");
  auto find = [&](const char* kind) {
    return std::find_if(v.begin(), v.end(), [&](const Verdict& x) { return x.kind == kind; });
  };
  const auto val = find("validation");
  ASSERT_NE(val, v.end());
  EXPECT_NEAR(val->value, 26.0 / 221.5, 1e-9);
  EXPECT_EQ(val->href, "#p12-steptime-validation");
  EXPECT_NE(val->text.find("Validation takes 11.7% of the fit's time"), std::string::npos) << val->text;
  EXPECT_NE(val->text.find("(2 runs of 3 steps"), std::string::npos) << val->text;
  EXPECT_NE(val->text.find("shown when >= 10.0%"), std::string::npos) << val->text;
  const auto slow = find("slow_steps");
  ASSERT_NE(slow, v.end());
  EXPECT_EQ(slow->value, 1.0);
  EXPECT_EQ(slow->href, "#p12-steptime-train");
  EXPECT_NE(slow->text.find("1 training step of 10 took over 2x the median (15.500 ms; slowest: step 4, 50.500 ms)"),
            std::string::npos)
      << slow->text;

  // Not shown: one validation batch in a long fit (under 10%), steps all
  // within 2x of the median (step 3: 1.9x); a noisy run's 2.2x step within
  // its own spread; a slow first step (the warm-up).
  Builder quiet;
  for (int i = 0; i < 10; ++i) train_batch(quiet, i * 100.0, i == 3 ? 19 : 5);
  quiet.add("[_EvaluationLoop].val_next", 1000, 1001);
  quiet.add("[Strategy]SingleDeviceStrategy.validation_step", 1001, 1004);
  const ProcessSteps q = step_records(quiet.p);
  ASSERT_EQ(q.validation.size(), 1u);
  EXPECT_EQ(validation_runs(q).runs, 1u);
  for (const auto& x : step_verdicts(q, "p0")) {
    EXPECT_NE(x.kind, "validation");
    EXPECT_NE(x.kind, "slow_steps");
  }
  // Steps of 10.5 to 28.5 ms (median ~20, MAD ~5 ms), one of 42.5 ms: over
  // 2x the median, within 6 robust sigmas.
  Builder noisy;
  for (int i = 0; i < 20; ++i) train_batch(noisy, i * 100.0, i == 9 ? 32 : 2.0 * (i % 10));
  EXPECT_GT(step_stats(step_records(noisy.p).train).max, 2 * step_stats(step_records(noisy.p).train).p50);
  for (const auto& x : step_verdicts(step_records(noisy.p), "p0")) EXPECT_NE(x.kind, "slow_steps") << x.text;
  Builder warm;
  for (int i = 0; i < 10; ++i) train_batch(warm, i * 100.0, i == 0 ? 60 : 5);
  for (const auto& x : step_verdicts(step_records(warm.p), "p0")) EXPECT_NE(x.kind, "slow_steps") << x.text;
  // The sanity check before the first training step is a run of its own.
  Builder sanity;
  sanity.add("[_EvaluationLoop].val_next", 0, 1);
  sanity.add("[Strategy]SingleDeviceStrategy.validation_step", 1, 3);
  sanity.add("[_EvaluationLoop].val_next", 3, 4);
  sanity.add("[Strategy]SingleDeviceStrategy.validation_step", 4, 6);
  for (int i = 0; i < 3; ++i) train_batch(sanity, 10 + i * 20.0, 5);
  sanity.add("[_EvaluationLoop].val_next", 80, 81);
  sanity.add("[Strategy]SingleDeviceStrategy.validation_step", 81, 83);
  const ValidationRuns sr = validation_runs(step_records(sanity.p));
  EXPECT_EQ(sr.runs, 2u);
  EXPECT_EQ(sr.min_steps, 1u);
  EXPECT_EQ(sr.max_steps, 2u);
}

TEST(Steps, PercentilesNearestRank) {
  std::vector<std::uint64_t> v;
  for (std::uint64_t i = 1; i <= 100; ++i) v.push_back(i);
  EXPECT_EQ(percentile_ns(v, 0.5), 50u);
  EXPECT_EQ(percentile_ns(v, 0.9), 90u);
  EXPECT_EQ(percentile_ns(v, 0.99), 99u);
  EXPECT_EQ(percentile_ns({7}, 0.99), 7u);
}

TEST(Steps, BucketsKeepMeansAndMaxima) {
  std::vector<StepRecord> steps;
  for (std::uint32_t i = 0; i < 1001; ++i) {
    StepRecord r;
    r.index = i;
    r.begin_ns = i * 100 * ms;
    const std::uint64_t d = (i == 500 ? 90 : 10 + i % 3) * ms;
    r.end_ns = r.begin_ns + d;
    r.part_ns[size_t(StepPart::dataloader)] = d / 3;
    r.part_ns[size_t(StepPart::step)] = d - d / 3;
    steps.push_back(r);
  }
  const StepBuckets b = bucket_steps(steps, 500);
  EXPECT_EQ(b.bucket, 3u);
  ASSERT_EQ(b.rows.size(), 334u);
  EXPECT_EQ(b.rows[166].index, 498u);
  EXPECT_EQ(b.max_ns[166], 90 * ms);                              // the spike survives in the max
  EXPECT_EQ(b.rows[166].duration_ns(), (10 + 11 + 90) * ms / 3);  // steps 498..500
  for (const auto& r : b.rows) {
    std::uint64_t sum = 0;
    for (auto x : r.part_ns) sum += x;
    EXPECT_EQ(sum, r.duration_ns());
  }
  EXPECT_EQ(b.rows.back().duration_ns(), 10500000u);  // the last bucket holds two steps: 999 and 1000
  EXPECT_EQ(bucket_steps(steps, 2000).bucket, 1u);
}

TEST(Steps, GpuKernelCopyAndIdlePerStep) {
  Builder b;
  b.p.meta.pid = 5;
  train_batch(b, 0, 2);  // 12.5 ms from 0
  GpuReport g;
  auto slice = [&](std::uint16_t kind, double from, double to, std::uint32_t stream) {
    GpuSlice s;
    s.pid = 5;
    s.kind = kind;
    s.stream = stream;
    s.begin_ns = static_cast<std::uint64_t>(from * ms);
    s.end_ns = static_cast<std::uint64_t>(to * ms);
    g.slices.push_back(s);
  };
  slice(LT_GPU_KERNEL, 3, 6, 7);
  slice(LT_GPU_KERNEL, 5, 8, 9);    // overlaps on another stream: union 3..8
  slice(LT_GPU_MEMCPY, 7, 9, 7);    // 8..9 not under a kernel
  slice(LT_GPU_KERNEL, 12, 20, 7);  // clipped at the step's end, 12.5
  const ProcessSteps s = step_records(b.p, &g);
  ASSERT_TRUE(s.has_gpu);
  ASSERT_EQ(s.train.size(), 1u);
  EXPECT_EQ(s.train[0].kernel_ns, 5 * ms + 500000);
  EXPECT_EQ(s.train[0].copy_ns, 1 * ms);
  EXPECT_EQ(s.train[0].gpu_idle_ns, s.train[0].duration_ns() - 6500000);
  // Idle 0..3 and 9..12, by what the loop's thread ran then.
  const auto& idle = s.train[0].gpu_idle_part_ns;
  EXPECT_EQ(idle[size_t(StepPart::dataloader)], 2 * ms);
  EXPECT_EQ(idle[size_t(StepPart::hooks)], 1 * ms);
  EXPECT_EQ(idle[size_t(StepPart::optimizer)], 1500000u);
  EXPECT_EQ(idle[size_t(StepPart::backward)], 1250000u);
  EXPECT_EQ(idle[size_t(StepPart::other)], 250000u);
  const auto v = step_verdicts(s, "p5");
  const auto gpu = std::find_if(v.begin(), v.end(), [](const Verdict& x) { return x.kind == "gpu_idle"; });
  ASSERT_NE(gpu, v.end());
  EXPECT_NEAR(gpu->value, 6.0 / 12.5, 1e-9);
  EXPECT_NE(gpu->text.find("during dataloader fetch + transfer"), std::string::npos) << gpu->text;
}

TEST(Steps, HtmlPageCarriesTheNumbers) {
  Builder b;
  b.p.meta.pid = 11;
  for (int i = 0; i < 6; ++i) train_batch(b, i * 100.0, i == 3 ? 50.0 : 4.0);
  b.p.window_begin_ns = 0;
  b.p.window_end_ns = 700 * ms;
  ActionsReport rep;
  rep.processes.push_back(b.p);
  std::ostringstream out;
  write_html_report(rep, false, out);
  const std::string html = out.str();
  EXPECT_NE(html.find("id=\"overview\""), std::string::npos);
  EXPECT_NE(html.find("data-verdict=\"dataloader\""), std::string::npos);
  EXPECT_NE(html.find("data-steps=\"6\""), std::string::npos);
  // step 3: 50 ms fetch + 10.5 ms
  EXPECT_NE(html.find("data-i=\"3\" data-ns=\"60500000\" data-dataloader-ns=\"50000000\""), std::string::npos);
  EXPECT_NE(html.find("href=\"#p11-parts-train\""), std::string::npos);
  EXPECT_NE(html.find("id=\"p11-parts-train\""), std::string::npos);
  // the Simple table stays below the charts
  EXPECT_GT(html.find("class=\"simple\""), html.find("id=\"p11-parts-train\""));
}

TEST(Steps, MergedHeatMapNamesTheSlowRank) {
  MergeInput in;
  in.file = "job.ltrace";
  in.actions.host = {"node-x", 1, 1800000000ull * 1000000000ull};
  for (int r = 0; r < 4; ++r) {
    Builder b;
    b.p.meta.pid = 1000 + r;
    b.p.meta.rank = r;
    b.p.meta.local_rank = r;
    b.p.meta.world_size = 4;
    // rank 2's steps take 30 ms more (its forward is slow)
    for (int i = 0; i < 8; ++i) train_batch(b, 1 + i * 100.0, 2, r == 2 ? 34 : 4);
    b.p.window_begin_ns = 1;
    b.p.window_end_ns = 900 * ms;
    in.actions.processes.push_back(b.p);
  }
  std::vector<MergeInput> inputs;
  inputs.push_back(std::move(in));
  MergePlan plan = plan_merge(inputs);
  ASSERT_EQ(plan.ranks.size(), 4u);
  std::vector<ProcessSteps> steps;
  for (const auto& r : plan.ranks) steps.push_back(step_records(*r.proc));
  int slowest = -1;
  const auto v = slow_rank_verdicts(plan, steps, &slowest);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(plan.ranks[slowest].rank, 2);
  EXPECT_NEAR(v[0].value, 30.0 / 12.5, 1e-9);  // 42.5 ms against 12.5 ms
  std::ostringstream out;
  write_merged_html(plan, "summary", out);
  const std::string html = out.str();
  EXPECT_NE(html.find("data-ranks=\"4\""), std::string::npos);
  EXPECT_NE(html.find("data-rank=\"2\" data-i=\"7\" data-ns=\"42500000\""), std::string::npos);
  EXPECT_NE(html.find("rank 2 (slowest)"), std::string::npos);
  EXPECT_NE(html.find("data-verdict=\"slow_rank\""), std::string::npos);
  // Equal ranks: no verdict.
  steps[2] = steps[0];
  EXPECT_TRUE(slow_rank_verdicts(plan, steps).empty());
}

TEST(Steps, FetchInsideTheBodyBelongsToIt) {
  Builder b;
  for (int i = 0; i < 3; ++i) {
    const double t = i * 25.0;
    b.add("run_training_batch", t, t + 20);
    b.add("[_TrainingEpochLoop].train_dataloader_next", t + 1, t + 3);
    b.add("[Strategy]SingleDeviceStrategy.training_step", t + 4, t + 10);
  }
  const ProcessSteps s = step_records(b.p);
  ASSERT_EQ(s.train.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(s.train[i].begin_ns, i * 25 * ms);
    EXPECT_EQ(s.train[i].duration_ns(), 20 * ms);
    EXPECT_EQ(s.train[i].part_ns[size_t(StepPart::dataloader)], 2 * ms);
    EXPECT_EQ(s.train[i].part_ns[size_t(StepPart::step)], 6 * ms);
    EXPECT_EQ(s.train[i].part_ns[size_t(StepPart::other)], 12 * ms);
  }
}

TEST(Steps, TestAndPredictStepsFromTheirHooks) {
  // Lightning's test and predict loops (lightning-profilers-spec.md): the
  // fetch ([_EvaluationLoop].test_next, [_PredictionLoop].predict_next),
  // the batch-start hooks, the step function, the batch-end hooks.
  Builder b;
  b.p.meta.pid = 7;
  for (int i = 0; i < 3; ++i) {
    const double t = 10.0 * i;
    b.add("[_EvaluationLoop].test_next", t, t + 1);
    b.add("[Callback]TQDMProgressBar.on_test_batch_start", t + 1, t + 1.5);
    b.add("[Strategy]SingleDeviceStrategy.test_step", t + 1.5, t + 4.5);
    b.add("[LightningModule]Model.on_test_batch_end", t + 4.5, t + 5);
  }
  for (int i = 0; i < 2; ++i) {
    const double t = 100.0 + 10.0 * i;
    b.add("[_PredictionLoop].predict_next", t, t + 2);
    b.add("[Strategy]SingleDeviceStrategy.batch_to_device", t + 2, t + 2.5);
    b.add("[Callback]TQDMProgressBar.on_predict_batch_start", t + 2.5, t + 3);
    b.add("[Strategy]SingleDeviceStrategy.predict_step", t + 3, t + 7);
    b.add("[Callback]TQDMProgressBar.on_predict_batch_end", t + 7, t + 8);
  }
  // The last failing fetch of the test loop (no step): not a step.
  b.add("[_EvaluationLoop].test_next", 30, 30.5);
  const ProcessSteps s = step_records(b.p);
  EXPECT_TRUE(s.train.empty() && s.validation.empty());
  ASSERT_EQ(s.test.size(), 3u);
  ASSERT_EQ(s.predict.size(), 2u);
  for (const auto& st : s.test) {
    EXPECT_EQ(st.duration_ns(), 5 * ms);
    EXPECT_EQ(st.part_ns[size_t(StepPart::dataloader)], 1 * ms);
    EXPECT_EQ(st.part_ns[size_t(StepPart::step)], 3 * ms);
    EXPECT_EQ(st.part_ns[size_t(StepPart::hooks)], 1 * ms);
  }
  EXPECT_EQ(s.test[2].index, 2u);
  EXPECT_EQ(s.predict[1].begin_ns, 110 * ms);
  EXPECT_EQ(s.predict[1].duration_ns(), 8 * ms);
  EXPECT_EQ(s.predict[0].part_ns[size_t(StepPart::dataloader)], 2500000u);  // fetch + transfer
  EXPECT_EQ(s.predict[0].part_ns[size_t(StepPart::step)], 4 * ms);
  // Both charted on the page, with their own step-time and parts charts.
  std::ostringstream out;
  write_step_charts(s, "p7", "Steps", out);
  const std::string html = out.str();
  EXPECT_NE(html.find("<svg class=\"chart steptime\" id=\"p7-steptime-test-svg\" data-stage=\"test\" data-steps=\"3\""),
            std::string::npos);
  EXPECT_NE(html.find("id=\"p7-steptime-predict-svg\" data-stage=\"predict\" data-steps=\"2\""), std::string::npos);
  EXPECT_NE(html.find("<svg class=\"chart parts\" data-stage=\"predict\" data-steps=\"2\""), std::string::npos);
}

// --report steps: the numbers of the steps above as text. Train: 5 steps of
// 12.5-16.5 ms (fetch 2-6 ms + 10.5 ms), 72.5 ms in all: dataloader 20 ms
// (27.6%), step 20, backward 15 (20.7%), optimizer 8.75 (12.1%), hooks 7.5
// (10.3%), run_training_batch's own 1.25 (1.7%); median 14.5, MAD 1: no
// spike (threshold 17.5). Validation: 4 and 5 ms, fetch 2 of 9 ms; median
// 4, MAD 0: 5 ms is past 4.2, a spike.
TEST(Steps, TextReportGivesTheNumbers) {
  Builder b = five_steps_and_two_validation_steps();
  ActionsReport rep;
  rep.processes.push_back(b.p);
  const std::string text = render_steps_report(rep, nullptr);
  EXPECT_NE(text.find("\npid 7\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  train           5  14.500  16.500  16.500  16.500        4       0       27.6%  27.6%     "
                      "20.7%      12.1%  10.3%   1.7%\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  validation      2   4.000   5.000   5.000   5.000        1       1"), std::string::npos)
      << text;
  EXPECT_NE(text.find("22.2%  77.8%      0.0%       0.0%   0.0%   0.0%\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("on the GPU"), std::string::npos);  // no GPU records
  EXPECT_NE(render_steps_report(ActionsReport{}, nullptr).find("No steps"), std::string::npos);
}
