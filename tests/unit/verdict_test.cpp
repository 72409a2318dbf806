// Findings (`--report verdict`): each provoked by its own synthetic fit and
// ranked first with about the provoked share; a healthy fit raises none.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "reports/aggregate/steps.h"
#include "reports/verdict/between_steps.h"
#include "reports/verdict/findings.h"
#include "reports/verdict/step_cause.h"
#include "tests/unit/process_builder.h"
#include "tests/unit/sched_samples.h"

using namespace lt;

namespace {

// A PY_CODE record naming code object `addr` of `pid`, fed to an aggregator.
template <typename Aggregator>
void name_code(Aggregator& agg, std::uint32_t pid, std::uint64_t addr, const char* name, const char* file) {
  lt_py_code_event c{};
  c.hdr = {LT_EV_PY_CODE, sizeof c, pid, pid, 0, 0};
  c.code = addr;
  c.first_line = 1;
  std::strcpy(c.name, name);
  std::strcpy(c.file, file);
  agg.add(c.hdr, reinterpret_cast<const std::byte*>(&c));
}

struct Fit {
  double fetch = 0.4, fwd = 4, bwd = 3, opt = 1, hook = 0.2, val_every = 0, val_ms = 0;
  double fetch_third = 0;  // more fetch in every third step (workers that keep up with two batches of three)
  int opt_every = 0;       // gradient accumulation: the optimizer step's opt_extra ms in every opt_every-th step
  double opt_extra = 0;
  int slow_fetch_step = -1;
  double slow_fetch_ms = 0;
  int slow_step = -1;
  double slow_ms = 0;
  int ckpt_every = 0;  // a checkpoint after every Nth step's hooks, ckpt_ms long
  double ckpt_ms = 0;
  bool ckpt_action = true;  // Trainer.save_checkpoint's action inside the hook (Lightning 2.5+)
  std::string ckpt_callback = "ModelCheckpoint{'monitor': None, 'mode': 'min'}";
  double val_start = 0;         // before each validation run's first hook: its DataLoader's iterator (workers starting)
  bool val_start_once = false;  // ...before the first run's only (persistent validation workers)
  bool epoch_ckpt = false;      // the epoch hook is a ModelCheckpoint's, saving (save_checkpoint inside it)
  int epoch_every = 0;          // an epoch turn after every Nth step: epoch_hook ms of on_train_epoch_end, then
  double epoch_hook = 0, epoch_start = 0;         // epoch_start ms of nothing recorded (a new iterator's workers)
  std::string epoch_callback = "LoggerCallback";  // whose on_train_epoch_end
  double after_step = 0;                          // more time between every two steps (Lightning's logger writes there)
  double sanity_ms = 0;          // a sanity check's one validation step before the first train step (then 5 ms
                                 // of the train iterator's start, no action)
  double validate_after_ms = 0;  // after the fit: on_train_end, 20 ms of teardown, then validate()'s one step
};

// One process: 50 train batches (times in ms, a little jitter).
ActionsReport make(const Fit& f, std::uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> j(0, 0.02);
  testing_support::ProcessBuilder pb;
  auto add = [&](const std::string& name, double b, double e) { pb.add(name, b, e); };
  double t = 1;
  // One validation batch of `ms` from t: its fetch, step and batch-end hook.
  auto val_batch = [&](double ms) {
    add("[_EvaluationLoop].val_next", t, t + 0.1);
    add("[Strategy]SingleDeviceStrategy.validation_step", t + 0.1, t + 0.1 + ms);
    add("[Callback]LoggerCallback.on_validation_batch_end", t + 0.1 + ms, t + 0.2 + ms);
    t += ms + 0.3;
  };
  if (f.sanity_ms > 0) {
    add("[Callback]LoggerCallback.on_sanity_check_start", t, t + 0.05);
    t += 0.1;
    add("[LightningModule]Model.val_dataloader", t, t + 0.1);
    t += 0.15;
    val_batch(f.sanity_ms);
    add("[Callback]LoggerCallback.on_validation_end", t, t + 0.05);
    t += 0.1;
    add("[Callback]LoggerCallback.on_sanity_check_end", t, t + 0.05);
    t += 0.05 + 5;
  }
  for (int k = 0; k < 50; ++k) {
    const double fetch = f.fetch + (k % 3 == 1 ? f.fetch_third : 0) + (k == f.slow_fetch_step ? f.slow_fetch_ms : 0);
    add("[_TrainingEpochLoop].train_dataloader_next", t, t + fetch + j(rng));
    t += fetch + 0.05;
    const double body = t;
    const double fwd = f.fwd + j(rng) + (k == f.slow_step ? f.slow_ms : 0);
    add("[Strategy]SingleDeviceStrategy.training_step", t, t + fwd);
    add("[Strategy]SingleDeviceStrategy.backward", t + fwd, t + fwd + f.bwd);
    const double opt = f.opt + (f.opt_every && k % f.opt_every == f.opt_every - 1 ? f.opt_extra : 0);
    add("[LightningModule]Model.optimizer_step", t + fwd + f.bwd, t + fwd + f.bwd + opt);
    t += fwd + f.bwd + opt + 0.05;
    add("run_training_batch", body, t);
    add("[Callback]LoggerCallback.on_train_batch_end", t, t + f.hook);
    t += f.hook + 0.05 + f.after_step;
    if (f.ckpt_every && (k + 1) % f.ckpt_every == 0) {
      add("[Callback]" + f.ckpt_callback + ".on_train_batch_end", t, t + f.ckpt_ms + 0.1);
      if (f.ckpt_action) add("save_checkpoint", t + 0.05, t + 0.05 + f.ckpt_ms);
      t += f.ckpt_ms + 0.15;
    }
    if (f.val_every && (k + 1) % static_cast<int>(f.val_every) == 0) {
      if (!f.val_start_once || (k + 1) == static_cast<int>(f.val_every)) t += f.val_start;
      add("[Callback]LoggerCallback.on_validation_start", t, t + 0.05);
      t += 0.1;
      add("[_EvaluationLoop].val_next", t, t + 0.1);
      add("[Strategy]SingleDeviceStrategy.validation_step", t + 0.1, t + 0.1 + f.val_ms);
      add("[Callback]LoggerCallback.on_validation_batch_end", t + 0.1 + f.val_ms, t + 0.2 + f.val_ms);
      t += f.val_ms + 0.3;
      add("[Callback]LoggerCallback.on_validation_end", t, t + 0.05);
      t += 0.1;
    }
    if (f.epoch_every && (k + 1) % f.epoch_every == 0 && k + 1 < 50) {
      if (f.epoch_ckpt) {
        add("[Callback]" + f.ckpt_callback + ".on_train_epoch_end", t, t + f.epoch_hook);
        add("save_checkpoint", t + 0.01, t + f.epoch_hook - 0.01);
      } else {
        add("[Callback]" + f.epoch_callback + ".on_train_epoch_end", t, t + f.epoch_hook);
      }
      t += f.epoch_hook + f.epoch_start + 0.05;
    }
  }
  if (f.validate_after_ms > 0) {
    add("[Callback]LoggerCallback.on_train_end", t, t + 1);
    t += 1 + 20;
    add("[LightningModule]Model.val_dataloader", t, t + 0.1);
    t += 0.15;
    val_batch(f.validate_after_ms);
    add("[Callback]LoggerCallback.on_validation_end", t, t + 0.05);
  }
  ActionsReport r;
  return std::move(pb).report();
}

TEST(Findings, AHealthyFitRaisesNone) {
  const auto r = make({});
  const auto f = find_issues(r);
  EXPECT_TRUE(f.empty()) << render_findings(r, f);
  EXPECT_NE(render_findings(r, f).find("none: no finding past its threshold"), std::string::npos);
  // "none" is not "all is well" where nothing was recorded to judge by.
  const std::string bare = render_findings(r, f, unjudged(nullptr, nullptr, nullptr));
  EXPECT_NE(bare.find("none: no finding past its threshold\n  not judged: memory growth and CPU contention (no /proc "
                      "samples: record with --report verdict or --device-stats); garbage-collection pauses"),
            std::string::npos)
      << bare;
  EXPECT_NE(bare.find("; logging cost (no stack samples: record with"), std::string::npos) << bare;
  // Sampled, but none of the job's (its stacks could not be read): not
  // told to record with what it was recorded with.
  LoggingReport sampled_none;
  sampled_none.period_ns = 10'000'000;
  EXPECT_NE(unjudged(nullptr, nullptr, &sampled_none).find("logging cost (sampled, but no stack sample of the job's"),
            std::string::npos);
  Fit warm_up;  // a slow first step (lazy init): not an outlier
  warm_up.slow_step = 0;
  warm_up.slow_ms = 50;
  EXPECT_TRUE(find_issues(make(warm_up)).empty()) << render_findings(r, find_issues(make(warm_up)));
}

TEST(Findings, EachProvokedOneRanksFirstWithItsShare) {
  struct Case {
    Fit fit;
    const char* kind;
    double share;  // of the step, as provoked (the step: every part above plus 0.15 ms of gaps)
  };
  Fit input;
  input.fetch = 6;  // 6 of ~15 ms
  Fit hooks;
  hooks.hook = 3;
  Fit opt;
  opt.opt = 8;
  Fit outlier;
  outlier.slow_step = 20;
  outlier.slow_ms = 200;
  for (const Case& c : {Case{input, "input-bound", 6.0 / 14.35}, Case{hooks, "hooks", 3.0 / 11.55},
                        Case{opt, "optimizer", 8.0 / 15.75}}) {
    const auto r = make(c.fit);
    const auto f = find_issues(r);
    ASSERT_FALSE(f.empty()) << c.kind;
    EXPECT_EQ(f[0].kind, c.kind) << render_findings(r, f);
    EXPECT_NEAR(f[0].share, c.share, 0.03) << c.kind;
  }
  const auto r = make(outlier);
  const auto f = find_issues(r);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].kind, "outliers");
  EXPECT_NEAR(f[0].ms_per_step, 200.0 / 50, 0.2);  // its excess over the median, spread over 50 steps
  EXPECT_NE(f[0].evidence.find("step 20"), std::string::npos) << f[0].evidence;
  // The slow step's forward: its step-function part, 200 ms over that part's median.
  EXPECT_NE(f[0].evidence.find("mostly its step part (200."), std::string::npos) << f[0].evidence;
}

// An input-bound fit whose every third step waits for its batch: a third
// of the steps are past the spread of the others, all of it in the
// dataloader part, which is the input-bound finding's; no "outliers" too
// (they were, at as many ms at stake, on a real 2-worker slow loader:
// 129 of 260 steps). A spike of the step function in the same fit still
// is one.
TEST(Findings, AnInputBoundPatternIsNoOutliersASpikeElsewhereStillIs) {
  Fit alternating;
  alternating.fetch_third = 12;
  auto r = make(alternating);
  auto f = find_issues(r);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].kind, "input-bound") << render_findings(r, f);
  for (const auto& x : f) EXPECT_NE(x.kind, "outliers") << render_findings(r, f);
  alternating.slow_step = 20;
  alternating.slow_ms = 200;
  r = make(alternating);
  f = find_issues(r);
  const auto it = std::find_if(f.begin(), f.end(), [](const Finding& x) { return x.kind == "outliers"; });
  ASSERT_NE(it, f.end()) << render_findings(r, f);
  EXPECT_NE(it->evidence.find("1 of 50 train steps"), std::string::npos) << it->evidence;
  EXPECT_NE(it->evidence.find("step 20"), std::string::npos) << it->evidence;
  EXPECT_NE(it->evidence.find("mostly its step part (200."), std::string::npos) << it->evidence;
  EXPECT_NE(it->evidence.find("parts with a finding of their own left out"), std::string::npos) << it->evidence;
  EXPECT_NEAR(it->ms_per_step, 200.0 / 50, 0.2);
  // A single fetch spike in an input-bound fit is no pattern: an outlier
  // still, in its dataloader part.
  Fit spike;
  spike.fetch = 1.5;  // input-bound (1.5 of ~10 ms a step, > 10 %)
  spike.slow_fetch_step = 20;
  spike.slow_fetch_ms = 200;
  r = make(spike);
  f = find_issues(r);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].kind, "input-bound") << render_findings(r, f);
  const auto one = std::find_if(f.begin(), f.end(), [](const Finding& x) { return x.kind == "outliers"; });
  ASSERT_NE(one, f.end()) << render_findings(r, f);
  EXPECT_NE(one->evidence.find("step 20, "), std::string::npos) << one->evidence;
  EXPECT_NE(one->evidence.find("mostly its dataloader part (19"), std::string::npos) << one->evidence;
  EXPECT_EQ(one->evidence.find("left out"), std::string::npos) << one->evidence;
}

// Gradient accumulation (accumulate_grad_batches=4): every 4th step holds
// the optimizer's step, 12 ms more; a quarter of the steps past the
// bound, at a regular period, is the fit's rhythm, not spikes (the
// outliers' advice, gc or another process, pointed the wrong way on a real
// CNN fit). A spike beside it still is one.
TEST(Findings, AStepsRhythmIsNoOutliers) {
  Fit accumulate;
  accumulate.opt_every = 4;
  accumulate.opt_extra = 12;
  auto r = make(accumulate);
  auto f = find_issues(r);
  for (const auto& x : f) EXPECT_NE(x.kind, "outliers") << render_findings(r, f);
  accumulate.slow_step = 21;
  accumulate.slow_ms = 200;
  r = make(accumulate);
  f = find_issues(r);
  const auto it = std::find_if(f.begin(), f.end(), [](const Finding& x) { return x.kind == "outliers"; });
  ASSERT_NE(it, f.end()) << render_findings(r, f);
  EXPECT_NE(it->evidence.find("1 of 50 train steps"), std::string::npos) << it->evidence;
  EXPECT_NE(it->evidence.find("mostly its step part (200."), std::string::npos) << it->evidence;
  EXPECT_NE(it->evidence.find("holding the steps' rhythm (most steps past the bound came every 4)"), std::string::npos)
      << it->evidence;
}

// Ten saves of 30 ms in 50 steps (hooks of 30.1 ms): 6.02 ms per step at
// stake, whether the save has its own action (the hook that holds it is
// the checkpoint's, whatever its callback's name) or only a checkpoint
// callback's hook (by its name) holds it; never also hooks or outliers.
TEST(Findings, CheckpointsWithOrWithoutTheirOwnAction) {
  for (bool own : {true, false}) {
    Fit c;
    c.ckpt_every = 5;
    c.ckpt_ms = 30;
    c.ckpt_action = own;
    if (own) c.ckpt_callback = "main.<locals>.Saver{'every': 5}";
    const auto r = make(c);
    const auto f = find_issues(r);
    ASSERT_EQ(f.size(), 1u) << render_findings(r, f);
    EXPECT_EQ(f[0].kind, "checkpoints") << render_findings(r, f);
    EXPECT_NEAR(f[0].ms_per_step, 6.02, 0.05) << render_findings(r, f);
    EXPECT_NE(f[0].evidence.find(own ? "10 checkpoint saves (Trainer.save_checkpoint, 300.00 ms)"
                                     : "10 calls of checkpoint callbacks' hooks"),
              std::string::npos)
        << f[0].evidence;
  }
  Fit rare;  // one 2 ms save in the fit: under the threshold
  rare.ckpt_every = 50;
  rare.ckpt_ms = 2;
  EXPECT_TRUE(find_issues(make(rare)).empty());
}

// Resident memory of a 50-step fit sampled every 5 ms: flat, a warm-up then
// flat, and a leak of 4 MiB a step.
TEST(Findings, MemoryGrowthPastTheWarmUpOnly) {
  const ActionsReport r = make({});
  const auto& p = r.processes[0];
  const auto steps = step_records(p).train;
  ASSERT_EQ(steps.size(), 50u);
  auto stats = [&](auto mib_at_step) {
    DeviceStatsReport s;
    ProcessDeviceStats ps;
    ps.pid = p.meta.pid;
    for (std::size_t k = 0; k < steps.size(); ++k)
      for (std::uint64_t ts = steps[k].begin_ns; ts < steps[k].end_ns; ts += 500'000)
        ps.rss_mb.emplace_back(ts, mib_at_step(static_cast<double>(k)));
    s.processes.push_back(ps);
    return s;
  };
  const auto flat = stats([](double) { return 700.0; });
  EXPECT_TRUE(find_issues(r, &flat).empty());
  const auto warm = stats([](double k) { return k < 5 ? 300 + 80 * k : 700.0; });  // +400 MiB in the first 10 %
  EXPECT_TRUE(find_issues(r, &warm).empty()) << render_findings(r, find_issues(r, &warm));
  const auto leak = stats([](double k) { return 700 + 4 * k; });
  const auto f = find_issues(r, &leak);
  ASSERT_EQ(f.size(), 1u) << render_findings(r, f);
  EXPECT_EQ(f[0].kind, "memory growth");
  EXPECT_NEAR(f[0].share, 4.0 * 45 / 720, 0.02);  // ~180 MiB over ~720 MiB where the line starts
  EXPECT_NE(f[0].evidence.find("MiB per step"), std::string::npos) << f[0].evidence;
  EXPECT_NE(render_findings(r, f).find("memory at stake, not step time (+2"), std::string::npos)
      << render_findings(r, f);
}

// The loop thread's run-queue wait (THREAD_SCHED's counters) over the train
// steps: past 15 % a finding with that share and its wait per step.
TEST(Findings, CpuContentionFromTheRunQueueWait) {
  const ActionsReport r = make({});
  const auto& p = r.processes[0];
  const auto steps = step_records(p).train;
  ASSERT_EQ(steps.size(), 50u);
  auto stats = [&](double waiting) {  // of each interval, the share spent on the run queue
    return testing_support::waiting_for_a_cpu(r, waiting);
  };
  const auto calm = stats(0.05);
  EXPECT_TRUE(find_issues(r, &calm).empty()) << render_findings(r, find_issues(r, &calm));
  const auto busy = stats(0.4);
  const auto f = find_issues(r, &busy);
  ASSERT_EQ(f.size(), 1u) << render_findings(r, f);
  EXPECT_EQ(f[0].kind, "cpu contention");
  EXPECT_NEAR(f[0].share, 0.4, 0.01);
  // ~8.9 ms steps: 40 % of each on the run queue
  EXPECT_NEAR(f[0].ms_per_step, 0.4 * 8.9, 0.4) << f[0].evidence;
  EXPECT_NE(f[0].evidence.find("waiting for a CPU 40.0% of"), std::string::npos) << f[0].evidence;
}

// The input-bound finding says who loads the batches: none of the
// trainer's descendants without actions (num_workers=0), its workers (forks:
// its command line; or a forkserver's children), and with /proc samples how
// busy they were. A child with actions (a rank) and an exec'd helper are
// not workers.
TEST(Findings, InputBoundSaysWhoLoadsTheBatches) {
  Fit input;
  input.fetch = 6;
  ActionsReport r = make(input);
  r.processes[0].meta.cmdline = "python train.py";
  r.processes[0].meta.flags = LT_PROC_PYTHON | LT_PROC_CHILDREN_FOLLOWED;
  const auto steps = step_records(r.processes[0]).train;
  auto input_bound = [](const ActionsReport& rep, const DeviceStatsReport* st = nullptr) {
    const auto f = find_issues(rep, st);
    EXPECT_FALSE(f.empty());
    return f.empty() ? Finding{} : f[0];
  };
  Finding f = input_bound(r);
  EXPECT_EQ(f.kind, "input-bound");
  EXPECT_NE(f.evidence.find("; no DataLoader worker process in the recording: num_workers=0"), std::string::npos)
      << f.evidence;
  EXPECT_NE(f.try_this.find("DataLoader(num_workers=N)"), std::string::npos) << f.try_this;
  // Recorded without following its children (--pid alone): no worker seen
  // says nothing about num_workers.
  ActionsReport unfollowed = r;
  unfollowed.processes[0].meta.flags = LT_PROC_PYTHON;
  f = input_bound(unfollowed);
  EXPECT_NE(f.evidence.find("; DataLoader workers not judged: the recording does not say it followed the training "
                            "process's children"),
            std::string::npos)
      << f.evidence;
  EXPECT_EQ(f.evidence.find("num_workers=0,"), std::string::npos) << f.evidence;
  EXPECT_NE(f.try_this.find("record with --children"), std::string::npos) << f.try_this;
  // ...but the sampler saw its forks in /proc (FORK_STATS): the workers'
  // CPU share judged all the same; one outside the steps, one of another
  // target and one with a single sample in them are not counted.
  {
    const std::uint32_t trainer = r.processes[0].meta.pid;
    auto forks = [&](double share, double waiting = 0) {
      DeviceStatsReport s;
      ProcessDeviceStats mine;
      mine.pid = trainer;
      mine.forks_scanned = true;
      s.processes.push_back(mine);
      auto fork = [&](std::uint32_t pid, std::uint32_t target, std::uint64_t from, std::uint64_t to) {
        UntracedFork u;
        u.pid = pid;
        u.target = target;
        std::uint64_t cpu = 0, runq = 0;
        for (std::uint64_t ts = from; ts <= to; ts += 1'000'000) {
          u.sched.push_back({ts, cpu, runq});
          cpu += static_cast<std::uint64_t>(share * 1e6);
          runq += static_cast<std::uint64_t>(waiting * 1e6);
        }
        s.untraced_forks.push_back(u);
      };
      fork(21, trainer, steps.front().begin_ns, steps.back().end_ns);
      fork(22, trainer, steps.front().begin_ns, steps.back().end_ns);
      fork(23, trainer + 1, steps.front().begin_ns, steps.back().end_ns);
      fork(24, trainer, steps.back().end_ns + 1, steps.back().end_ns + 10'000'000);
      fork(25, trainer, steps.back().end_ns - 500'000, steps.back().end_ns);
      return s;
    };
    const auto busy_forks = forks(0.95), idle_forks = forks(0.1);
    f = input_bound(unfollowed, &busy_forks);
    EXPECT_NE(f.evidence.find("; 2 DataLoader worker process(es) (pid 21, 22, not traced: --pid without --children; "
                              "seen from /proc), on a CPU 95.0% of the steps' time each on average: loading is "
                              "CPU-bound"),
              std::string::npos)
        << f.evidence;
    EXPECT_EQ(f.evidence.find("not judged"), std::string::npos) << f.evidence;
    f = input_bound(unfollowed, &idle_forks);
    EXPECT_NE(f.evidence.find("on a CPU only 10.0% of the steps' time each on average: they wait, inside "
                              "__getitem__ (I/O, sleeps) or for the loop to ask (their off-CPU stacks tell which: "
                              "ltrace-bpf --report verdict --children, or --off-cpu)"),
              std::string::npos)
        << f.evidence;
    EXPECT_NE(f.try_this.find("prefetch_factor"), std::string::npos) << f.try_this;
    // On a CPU 60 % and waiting for one 35 % more: CPU-bound, short of cores
    // (more workers would wait too), not "they wait".
    const auto starved = forks(0.6, 0.35);
    f = input_bound(unfollowed, &starved);
    EXPECT_NE(f.evidence.find("on a CPU 60.0% of the steps' time each on average and waiting for one 35.0% more: "
                              "loading is CPU-bound, short of cores"),
              std::string::npos)
        << f.evidence;
    EXPECT_EQ(f.try_this.rfind("the workers wait for a CPU: free cores for them", 0), 0u) << f.try_this;
    // Looked for, none found, over steps shorter than a scan apart (0.73 s
    // here; a watch capture's can be): not judged, and why (an audit's
    // capture said num_workers=0 beside two live workers).
    auto scanned_over = [](const ActionsReport& rep) {
      DeviceStatsReport st;
      ProcessDeviceStats mine;
      mine.pid = rep.processes[0].meta.pid;
      mine.forks_scanned = true;
      const auto tr = step_records(rep.processes[0]).train;
      for (std::uint64_t ts = tr.front().begin_ns; ts <= tr.back().end_ns; ts += 100'000'000)
        mine.sched.push_back({ts, ts / 2, 0});
      st.processes.push_back(mine);
      return st;
    };
    DeviceStatsReport none = scanned_over(unfollowed);
    f = input_bound(unfollowed, &none);
    EXPECT_NE(f.evidence.find("; DataLoader workers not judged: the steps recorded are too short for the /proc scans"),
              std::string::npos)
        << f.evidence;
    EXPECT_EQ(f.evidence.find("num_workers=0,"), std::string::npos) << f.evidence;
    // Over steps a scan apart and more: num_workers=0 is known.
    Fit longer = input;
    longer.fwd = 20;  // 50 steps of ~30 ms
    ActionsReport slow = make(longer);
    slow.processes[0].meta.cmdline = "python train.py";
    slow.processes[0].meta.flags = LT_PROC_PYTHON;
    DeviceStatsReport none_long = scanned_over(slow);
    f = input_bound(slow, &none_long);
    EXPECT_NE(f.evidence.find("; no DataLoader worker process ran in the steps (the training process's forks, seen "
                              "from /proc): num_workers=0"),
              std::string::npos)
        << f.evidence;
    // Not looked for (an older recording): not judged, as before.
    none_long.processes[0].forks_scanned = false;
    f = input_bound(slow, &none_long);
    EXPECT_NE(f.evidence.find("DataLoader workers not judged: the recording does not say"), std::string::npos)
        << f.evidence;
  }
  auto child = [&](std::uint32_t pid, std::uint32_t ppid, const std::string& cmdline) {
    ProcessActions q;
    q.meta.pid = pid;
    q.meta.ppid = ppid;
    q.meta.cmdline = cmdline;
    q.meta.flags = LT_PROC_PYTHON;
    q.window_begin_ns = steps.front().begin_ns - 1;
    q.window_end_ns = steps.back().end_ns + 1;
    return q;
  };
  ActionsReport with = r;
  with.processes.push_back(child(11, 7, "python train.py"));
  with.processes.push_back(child(12, 7, "python train.py"));
  with.processes.push_back(child(13, 7, "python -m torch._inductor.compile_worker"));
  ProcessActions rank = child(14, 7, "python train.py");
  rank.actions.emplace_back("run_training_batch", std::initializer_list<double>{0.01});
  with.processes.push_back(rank);
  f = input_bound(with);
  EXPECT_NE(f.evidence.find("; 2 DataLoader worker process(es) (pid 11, 12), how busy not judged"), std::string::npos)
      << f.evidence;
  EXPECT_EQ(f.try_this.find("persistent_workers=True (the workers were started anew"), std::string::npos);
  // Two at a time, started again halfway (persistent_workers=False, a new
  // epoch): said, and persistent workers the first thing to try.
  {
    ActionsReport anew = r;
    const std::uint64_t mid = steps[steps.size() / 2].begin_ns;
    for (std::uint32_t pid : {31u, 32u, 33u, 34u}) {
      ProcessActions q = child(pid, 7, "python train.py");
      (pid < 33 ? q.window_end_ns : q.window_begin_ns) = mid;
      anew.processes.push_back(q);
    }
    f = input_bound(anew);
    EXPECT_NE(f.evidence.find("; 2 DataLoader worker process(es) at a time, 4 started in all (pid 31, 32, 33, 34)"),
              std::string::npos)
        << f.evidence;
    EXPECT_EQ(f.try_this.rfind("persistent_workers=True (the workers were started anew", 0), 0u) << f.try_this;
  }
  auto on_cpu = [&](double share) {
    DeviceStatsReport s;
    for (std::uint32_t pid : {11u, 12u}) {
      ProcessDeviceStats ps;
      ps.pid = pid;
      std::uint64_t cpu = 0;
      for (std::uint64_t ts = steps.front().begin_ns; ts <= steps.back().end_ns; ts += 1'000'000) {
        ps.sched.push_back({ts, cpu, 0});
        cpu += static_cast<std::uint64_t>(share * 1e6);
      }
      s.processes.push_back(ps);
    }
    return s;
  };
  const auto busy = on_cpu(0.9), idle = on_cpu(0.05);
  f = input_bound(with, &busy);
  EXPECT_NE(f.evidence.find("on a CPU 90.0% of the steps' time each on average: loading is CPU-bound"),
            std::string::npos)
      << f.evidence;
  f = input_bound(with, &idle);
  EXPECT_NE(f.evidence.find("on a CPU only 5.0% of the steps' time each on average: they wait"), std::string::npos)
      << f.evidence;
  EXPECT_NE(f.evidence.find("(their off-CPU stacks tell which: ltrace-bpf --report verdict --children, or --off-cpu)"),
            std::string::npos)
      << f.evidence;
  EXPECT_NE(f.try_this.find("prefetch_factor"), std::string::npos) << f.try_this;
  // Off-CPU stacks (--off-cpu) say which wait: inside the dataset, or in
  // the worker loop for the training loop.
  // Each worker, in each of the first 10 train steps: `share` of the step
  // off a CPU in __getitem__, the rest in the worker loop's index queue;
  // then a second in that queue after the last step (a persistent worker
  // through validation: not the steps' wait), and its result queue's
  // feeder thread blocked (neither).
  auto waits = [&](double share, bool lose_names_before_end = false,
                   std::uint32_t sampler = LT_SAMPLER_ON_CPU | LT_SAMPLER_OFF_CPU) {
    LoaderWaitsAggregator agg;
    auto feed = [&](auto& rec) { agg.add(rec.hdr, reinterpret_cast<const std::byte*>(&rec)); };
    lt_sampler_info_event info{};
    info.hdr = {LT_EV_SAMPLER_INFO, sizeof info, 7, 7, 0, 0};
    info.flags = sampler;
    feed(info);
    for (std::uint32_t pid : {11u, 12u}) {
      auto code = [&](std::uint64_t addr, const char* name, const char* file) {
        name_code(agg, pid, addr, name, file);
      };
      code(0x1000, "RandomDataset.__getitem__", "/src/train.py");
      code(0x2000, "_worker_loop", "/v/site-packages/torch/utils/data/_utils/worker.py");
      code(0x3000, "get", "/usr/lib/python3.11/multiprocessing/queues.py");
      code(0x4000, "_MapDatasetFetcher.fetch", "/v/site-packages/torch/utils/data/_utils/fetch.py");
      code(0x5000, "_feed", "/usr/lib/python3.11/multiprocessing/queues.py");
      auto blocked = [&](std::uint32_t tid, std::initializer_list<std::uint64_t> codes, std::uint64_t from,
                         std::uint64_t to) {
        lt_py_sample_event b{};
        b.hdr = {LT_EV_OFFCPU_BEGIN, sizeof b, pid, tid, 0, from};
        for (std::uint64_t c : codes) b.frames[b.nframes++] = {c, 0, 0};
        feed(b);
        if (lose_names_before_end) {  // a gap in the trace between the two: not joined
          agg.gap();
        }
        lt_offcpu_end_event e{};
        e.hdr = {LT_EV_OFFCPU_END, sizeof e, pid, tid, 0, to};
        e.begin_ns = from;
        feed(e);
      };
      for (std::size_t i = 0; i < 10; ++i) {
        const std::uint64_t b = steps[i].begin_ns, e = steps[i].end_ns;
        const auto mid = b + static_cast<std::uint64_t>(share * static_cast<double>(e - b));
        blocked(pid, {0x1000, 0x4000, 0x2000}, b, mid);  // leaf first: in __getitem__
        blocked(pid, {0x3000, 0x2000}, mid, e);          // in the loop's index queue
      }
      blocked(pid, {0x3000, 0x2000}, steps.back().end_ns + 1, steps.back().end_ns + 1'000'000'001);
      blocked(pid + 100, {0x5000}, steps.front().begin_ns, steps.back().end_ns);
    }
    return agg.finish();
  };
  const auto in_dataset = waits(0.75), for_loop = waits(0.25);
  EXPECT_GT(in_dataset.procs.at(11).in_dataset_ns, 0u);
  EXPECT_GT(in_dataset.procs.at(11).for_loop_ns, 1'000'000'000u);  // the second after the steps, in the totals
  EXPECT_EQ(in_dataset.procs.at(11).other_ns, steps.back().end_ns - steps.front().begin_ns);
  EXPECT_EQ(in_dataset.procs.at(11).waits.size(), 21u);  // the feeder's are not kept
  f = find_issues(with, &idle, nullptr, nullptr, nullptr, nullptr, nullptr, &in_dataset)[0];
  EXPECT_NE(f.evidence.find("on a CPU only 5.0% of the steps' time each on average; of their waits off a CPU in "
                            "the steps, 75.0% inside the dataset (__getitem__, the fetcher, collate) and 25.0% in the "
                            "worker loop waiting for the training loop: loading waits inside __getitem__"),
            std::string::npos)
      << f.evidence;
  EXPECT_NE(f.try_this.find("prefetch_factor"), std::string::npos) << f.try_this;
  f = find_issues(with, &idle, nullptr, nullptr, nullptr, nullptr, nullptr, &for_loop)[0];
  EXPECT_NE(f.evidence.find("in the steps, 25.0% inside the dataset"), std::string::npos) << f.evidence;
  EXPECT_NE(f.evidence.find(": the workers keep up, the fetch's time goes in the training process"), std::string::npos)
      << f.evidence;
  EXPECT_NE(f.try_this.find("look at the training process's fetch"), std::string::npos) << f.try_this;
  // The forks' blocking only (--report verdict without --off-cpu): the
  // workers' waits, told apart alike.
  const auto forks_only = waits(0.75, false, LT_SAMPLER_ON_CPU | LT_SAMPLER_OFF_CPU_FORKS);
  EXPECT_TRUE(forks_only.off_cpu);
  f = find_issues(with, &idle, nullptr, nullptr, nullptr, nullptr, nullptr, &forks_only)[0];
  EXPECT_NE(f.evidence.find("in the steps, 75.0% inside the dataset"), std::string::npos) << f.evidence;
  // Off-CPU recorded, but no period joined (each broken by a gap): neither
  // wait named, and no advice to record what was recorded.
  const auto broken = waits(0.75, true);
  EXPECT_TRUE(broken.procs.empty());
  f = find_issues(with, &idle, nullptr, nullptr, nullptr, nullptr, nullptr, &broken)[0];
  EXPECT_NE(f.evidence.find("(their off-CPU stacks in the steps name neither)"), std::string::npos) << f.evidence;
  // Busy workers are CPU-bound whatever their waits.
  f = find_issues(with, &busy, nullptr, nullptr, nullptr, nullptr, nullptr, &for_loop)[0];
  EXPECT_NE(f.evidence.find("loading is CPU-bound"), std::string::npos) << f.evidence;
  // Python 3.14's forkserver: the workers are the server's children.
  ActionsReport served = r;
  served.processes.push_back(child(20, 7, "python3.14 -c from multiprocessing.forkserver import main; main(5, 6)"));
  served.processes.push_back(child(21, 20, "python3.14 -c from multiprocessing.forkserver import main; main(5, 6)"));
  f = input_bound(served);
  EXPECT_NE(f.evidence.find("; 1 DataLoader worker process(es) (pid 21)"), std::string::npos) << f.evidence;
  // Workers alive only after the steps are not the steps' loaders.
  ActionsReport late = r;
  ProcessActions after = child(30, 7, "python train.py");
  after.window_begin_ns = steps.back().end_ns + 10;
  after.window_end_ns = steps.back().end_ns + 20;
  late.processes.push_back(after);
  f = input_bound(late);
  EXPECT_NE(f.evidence.find("num_workers=0"), std::string::npos) << f.evidence;
}

TEST(Findings, ValidationAndTheEvidenceNamesTheTopHook) {
  Fit v;
  v.val_every = 5;
  v.val_ms = 20;  // 10 runs of 20 ms against 50 steps of ~9.4 ms
  const auto r = make(v);
  const auto f = find_issues(r);
  bool found = false;
  for (const auto& x : f) found |= x.kind == "validation" && x.share > 0.25;
  EXPECT_TRUE(found) << render_findings(r, f);
  Fit hooks;
  hooks.hook = 3;
  const auto h = find_issues(make(hooks));
  ASSERT_FALSE(h.empty());
  EXPECT_NE(h[0].evidence.find("[Callback]LoggerCallback.on_train_batch_end 3.00 ms/step"), std::string::npos)
      << h[0].evidence;
}

// Steps alternating between two durations: the median said is one of
// them (the lower middle value), not their mean, which no step took.
TEST(Findings, TheMedianSaidIsAStepsDuration) {
  Fit alternate;
  alternate.opt_every = 2;
  alternate.opt_extra = 10;  // 25 steps of ~8.7 ms, 25 of ~18.7 ms
  const auto r = make(alternate);
  const auto f = find_issues(r);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].kind, "optimizer") << render_findings(r, f);
  EXPECT_NE(f[0].evidence.find("(50 train steps, median 8."), std::string::npos) << f[0].evidence;
}

// A validation run is timed from the train step before it, where its
// DataLoader's iterator starts (workers started anew: 30 ms here, before
// its first hook), to its last validation hook; the steps alone (2.2 ms a
// run) missed most of it (2.6x too little on an audit fit).
TEST(Findings, AValidationRunFromTheTrainStepBeforeItToItsLastHook) {
  Fit v;
  v.val_every = 10;
  v.val_ms = 2;
  v.val_start = 30;
  const auto r = make(v);
  const auto f = find_issues(r);
  ASSERT_FALSE(f.empty()) << render_findings(r, f);
  EXPECT_EQ(f[0].kind, "validation") << render_findings(r, f);
  // 5 runs of 0.05 + 30 + 0.1 + 2.3 + 0.05 ms, in a fit of 50 steps of ~8.85 ms
  const double run = 32.5, span = 50 * 8.85 + 5 * run;
  EXPECT_NEAR(f[0].ms_per_step, 5 * run / 50, 0.1) << f[0].evidence;
  EXPECT_NEAR(f[0].share, 5 * run / span, 0.01) << f[0].evidence;
  EXPECT_NE(f[0].evidence.find("5 validation runs (5 validation steps) take 162."), std::string::npos) << f[0].evidence;
  EXPECT_NE(f[0].evidence.find("the steps alone 11."), std::string::npos) << f[0].evidence;
  EXPECT_NE(f[0].try_this.find("persistent_workers=True on the validation DataLoader"), std::string::npos)
      << f[0].try_this;
  for (const auto& x : f) EXPECT_NE(x.kind, "between steps") << render_findings(r, f);  // validation's time
  // Persistent validation workers start once, in the first run: counted,
  // but no advice to make them persistent.
  Fit once = v;
  once.val_start = 150;
  once.val_start_once = true;
  const auto o = find_issues(make(once));
  ASSERT_FALSE(o.empty());
  EXPECT_EQ(o[0].kind, "validation");
  EXPECT_EQ(o[0].try_this.find("persistent_workers"), std::string::npos) << o[0].try_this;
  // Runs of their steps alone: not said to be outside them.
  Fit steps_only;
  steps_only.val_every = 5;
  steps_only.val_ms = 20;
  const auto g = find_issues(make(steps_only));
  ASSERT_FALSE(g.empty());
  EXPECT_EQ(g[0].kind, "validation");
  EXPECT_EQ(g[0].try_this.find("persistent_workers"), std::string::npos) << g[0].try_this;
}

// A gap's validation runs: the sanity check's from its first action (the
// train iterator's start after it is no validation), in-fit runs from the
// train step before each, and validate() after the fit apart from the
// fit's last run (on_train_end and the teardown between are neither).
TEST(Findings, ValidationRunsBeforeInAndAfterTheFit) {
  Fit v;
  v.val_every = 10;
  v.val_ms = 2;
  v.sanity_ms = 3;
  v.validate_after_ms = 4;
  const auto r = make(v);
  const auto& p = r.processes[0];
  const auto s = step_records(p);
  ASSERT_EQ(s.train.size(), 50u);
  ASSERT_EQ(s.validation.size(), 7u);
  const BetweenSteps g = between_steps(p, s.train, s.validation, std::vector<char>(p.intervals.size(), 0), s.tid);
  ASSERT_EQ(g.runs.size(), 7u);
  // 3.7 ms of sanity check, 5 in-fit runs of 2.5, validate()'s 4.5
  EXPECT_NEAR(g.runs.front().ms, 3.7, 0.05);
  EXPECT_NEAR(g.runs[1].ms, 2.5, 0.05);
  EXPECT_NEAR(g.runs.back().ms, 4.5, 0.05);
  EXPECT_NEAR(g.validation_ms, 3.7 + 5 * 2.5 + 4.5, 0.2);
  EXPECT_GT(g.runs.back().begin_ns, g.runs[5].end_ns + 20'000'000);  // the teardown between is neither's
  EXPECT_LT(g.runs.front().end_ns + 5'000'000, s.train.front().begin_ns + 1);
}

// Non-persistent validation workers live on into the train steps after
// their run: they are not the train DataLoader's (num_workers=0 there).
TEST(Findings, ValidationWorkersAreNotTheTrainLoaders) {
  Fit v;
  v.fetch = 6;
  v.val_every = 10;
  v.val_ms = 2;
  ActionsReport r = make(v);
  r.processes[0].meta.cmdline = "python train.py";
  r.processes[0].meta.flags = LT_PROC_PYTHON | LT_PROC_CHILDREN_FOLLOWED;
  const auto s = step_records(r.processes[0]);
  ASSERT_EQ(s.validation.size(), 5u);
  for (std::uint32_t run = 0; run < 5; ++run)
    for (std::uint32_t k = 0; k < 2; ++k) {
      ProcessActions q;
      q.meta.pid = 200 + 2 * run + k;
      q.meta.ppid = r.processes[0].meta.pid;
      q.meta.cmdline = "python train.py";
      q.meta.flags = LT_PROC_PYTHON;
      q.window_begin_ns = s.validation[run].begin_ns - 50'000;  // started by the run, before its first batch
      q.window_end_ns = s.train[std::min<std::size_t>(10 * run + 12, 49)].end_ns;  // gone 2 train steps later
      r.processes.push_back(q);
    }
  const auto f = find_issues(r);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].kind, "input-bound") << render_findings(r, f);
  EXPECT_NE(f[0].evidence.find("; no DataLoader worker process in the recording: num_workers=0"), std::string::npos)
      << f[0].evidence;
}

// The time between train steps outside validation and checkpoints: the
// epoch turns (on_train_epoch_end, then a new train iterator's workers
// starting, which no action holds). Workers started anew there are named,
// and persistent_workers=True comes first.
TEST(Findings, BetweenStepsAtTheEpochTurns) {
  Fit e;
  e.epoch_every = 10;
  e.epoch_hook = 5;
  e.epoch_start = 40;  // 4 turns of 45.05 ms (and 49 gaps of 0.05 ms)
  ActionsReport r = make(e);
  const auto f = find_issues(r);
  ASSERT_FALSE(f.empty()) << render_findings(r, f);
  EXPECT_EQ(f[0].kind, "between steps") << render_findings(r, f);
  const double gaps = 4 * 45.05 + 45 * 0.05, span = 50 * 8.85 + gaps;
  EXPECT_NEAR(f[0].ms_per_step, gaps / 50, 0.05) << f[0].evidence;
  EXPECT_NEAR(f[0].share, gaps / span, 0.01) << f[0].evidence;
  EXPECT_NE(f[0].evidence.find("4 gap(s) over 10 ms, the longest 45."), std::string::npos) << f[0].evidence;
  EXPECT_NE(f[0].evidence.find("; in them [Callback]LoggerCallback.on_train_epoch_end 20.00 ms"), std::string::npos)
      << f[0].evidence;
  EXPECT_EQ(f[0].try_this.rfind("persistent_workers=True if the train DataLoader has workers", 0), 0u) << f[0].try_this;
  // Two workers at a time, started again at each turn.
  r.processes[0].meta.cmdline = "python train.py";
  r.processes[0].meta.flags = LT_PROC_PYTHON | LT_PROC_CHILDREN_FOLLOWED;
  const auto steps = step_records(r.processes[0]).train;
  for (std::uint32_t epoch = 0; epoch < 5; ++epoch)
    for (std::uint32_t k = 0; k < 2; ++k) {
      ProcessActions q;
      q.meta.pid = 100 + 2 * epoch + k;
      q.meta.ppid = r.processes[0].meta.pid;
      q.meta.cmdline = "python train.py";
      q.meta.flags = LT_PROC_PYTHON;
      q.window_begin_ns = steps[10 * epoch].begin_ns - 1'000'000;
      q.window_end_ns = steps[10 * epoch + 9].end_ns + 1'000'000;
      r.processes.push_back(q);
    }
  const auto w = find_issues(r);
  ASSERT_FALSE(w.empty());
  EXPECT_EQ(w[0].kind, "between steps");
  EXPECT_NE(w[0].evidence.find("; the train DataLoader's workers were started anew: 2 DataLoader worker process(es) "
                               "at a time, 10 started in all"),
            std::string::npos)
      << w[0].evidence;
  EXPECT_EQ(w[0].try_this.rfind("persistent_workers=True (the train DataLoader's workers were started anew at each "
                                "epoch); lighter epoch hooks",
                                0),
            0u)
      << w[0].try_this;
  // A callback whose settings name validation is no validation run.
  Fit named = e;
  named.epoch_callback = "EarlyStopping{'monitor': 'validation_loss', 'mode': 'min'}";
  const auto m = find_issues(make(named));
  ASSERT_FALSE(m.empty());
  EXPECT_EQ(m[0].kind, "between steps") << render_findings(r, m);
  for (const auto& x : m) EXPECT_NE(x.kind, "validation") << render_findings(r, m);
  // Time spread over the short gaps after every step (Lightning's logger
  // writes): said so, and no epoch-turn advice.
  Fit after;
  after.after_step = 2;
  const auto a = find_issues(make(after));
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a[0].kind, "between steps") << render_findings(r, a);
  EXPECT_NE(a[0].evidence.find("(mostly the short gaps after each step"), std::string::npos) << a[0].evidence;
  EXPECT_EQ(a[0].try_this.rfind("log less often (Trainer(log_every_n_steps=N)", 0), 0u) << a[0].try_this;
  // A checkpoint saved at each turn: the checkpoints finding's, not named
  // in the turns (nor the save inside its hook).
  Fit saving = e;
  saving.epoch_ckpt = true;
  saving.epoch_hook = 60;
  const auto c = find_issues(make(saving));
  const auto between = std::find_if(c.begin(), c.end(), [](const Finding& x) { return x.kind == "between steps"; });
  ASSERT_NE(between, c.end()) << render_findings(r, c);
  EXPECT_NEAR(between->ms_per_step, (4 * 40.05 + 45 * 0.05) / 50, 0.05) << between->evidence;
  EXPECT_EQ(between->evidence.find("save_checkpoint"), std::string::npos) << between->evidence;
  EXPECT_EQ(between->evidence.find("ModelCheckpoint"), std::string::npos) << between->evidence;
  // No worker, the recording says (children followed): no workers clause;
  // a hook holding most of the turns: it first.
  Fit hook;
  hook.epoch_every = 10;
  hook.epoch_hook = 40;
  hook.epoch_start = 5;
  ActionsReport h = make(hook);
  h.processes[0].meta.flags = LT_PROC_PYTHON | LT_PROC_CHILDREN_FOLLOWED;
  const auto k = find_issues(h);
  ASSERT_FALSE(k.empty());
  EXPECT_EQ(k[0].kind, "between steps") << render_findings(h, k);
  EXPECT_EQ(k[0].try_this.rfind("lighter [Callback]LoggerCallback.on_train_epoch_end (it holds 8", 0), 0u)
      << k[0].try_this;
  EXPECT_EQ(k[0].try_this.find("persistent_workers"), std::string::npos) << k[0].try_this;
}

// Batches loaded in the training process (num_workers=0) on a contended
// CPU: the loop thread's run-queue wait is in the fetch too, where the
// fetch was runnable. Counted once: the wait estimated in the fetch leaves
// input-bound, which goes when what is left is under its threshold. A
// fetch that sleeps (I/O) waits little for a CPU, however contended the
// rest of the step. With the thread waiting for a CPU, more workers is not
// what to try first.
TEST(Findings, ContentionInTheFetchIsCountedOnce) {
  Fit input;
  input.fetch = 6;
  ActionsReport r = make(input);
  r.processes[0].meta.flags = LT_PROC_PYTHON | LT_PROC_CHILDREN_FOLLOWED;  // no worker: num_workers=0
  const auto steps = step_records(r.processes[0]).train;
  // Of each interval: on the run queue, off a CPU (asleep), the rest on one.
  auto stats = [&](double waiting, double asleep) {
    DeviceStatsReport s;
    ProcessDeviceStats ps;
    ps.pid = r.processes[0].meta.pid;
    std::uint64_t cpu = 0, runq = 0, last = steps.front().begin_ns;
    for (std::uint64_t ts = steps.front().begin_ns; ts <= steps.back().end_ns; ts += 1'000'000) {
      runq += static_cast<std::uint64_t>(waiting * static_cast<double>(ts - last));
      cpu += static_cast<std::uint64_t>((1 - waiting - asleep) * static_cast<double>(ts - last));
      last = ts;
      ps.sched.push_back({ts, cpu, runq});
    }
    s.processes.push_back(ps);
    return s;
  };
  auto of = [](const std::vector<Finding>& f, const char* kind) {
    for (const auto& x : f)
      if (x.kind == kind) return &x;
    return static_cast<const Finding*>(nullptr);
  };
  const double fetch_ms = 6.0, step_ms = 14.35, fetch_share = fetch_ms / step_ms;
  // Always runnable, waiting 40 % of the time: 40 % of the fetch is it.
  const auto some = stats(0.4, 0);
  auto f = find_issues(r, &some);
  const Finding* in = of(f, "input-bound");
  ASSERT_TRUE(in && of(f, "cpu contention")) << render_findings(r, f);
  EXPECT_NEAR(in->ms_per_step, 0.6 * fetch_ms, 0.2) << in->evidence;
  EXPECT_NEAR(in->share, 0.6 * fetch_share, 0.02) << in->evidence;
  EXPECT_NE(in->evidence.find("; an estimated 2.4"), std::string::npos) << in->evidence;
  EXPECT_NE(in->evidence.find(" per step of the fetch is the wait for a CPU that cpu contention counts"),
            std::string::npos)
      << in->evidence;
  EXPECT_EQ(in->try_this.rfind("no CPU was free for more DataLoader workers", 0), 0u) << in->try_this;
  EXPECT_NE(in->evidence.find("; its thread waited for a CPU 40.0% of the steps' time"), std::string::npos)
      << in->evidence;
  // An 80 % wait: what is left of the fetch is under the threshold.
  const auto most = stats(0.8, 0);
  f = find_issues(r, &most);
  ASSERT_TRUE(of(f, "cpu contention")) << render_findings(r, f);
  EXPECT_FALSE(of(f, "input-bound")) << render_findings(r, f);
  EXPECT_NE(of(f, "cpu contention")->evidence.find("; the dataloader fetch in the training process (num_workers=0, "),
            std::string::npos)
      << of(f, "cpu contention")->evidence;
  // A fetch asleep (5.74 of its 6 ms: 40 % of the step off a CPU) beside a
  // contended rest: at most its 0.26 ms awake can have waited.
  const auto sleepy = stats(0.2, 0.4);
  f = find_issues(r, &sleepy);
  in = of(f, "input-bound");
  ASSERT_TRUE(in && of(f, "cpu contention")) << render_findings(r, f);
  EXPECT_GT(in->ms_per_step, fetch_ms - 0.2) << in->evidence;
  // No contention: more workers first, as ever.
  const auto calm = stats(0.05, 0);
  f = find_issues(r, &calm);
  in = of(f, "input-bound");
  ASSERT_TRUE(in) << render_findings(r, f);
  EXPECT_FALSE(of(f, "cpu contention"));
  EXPECT_NEAR(in->share, fetch_share, 0.02);  // nothing apart
  EXPECT_EQ(in->try_this.rfind("DataLoader(num_workers=N)", 0), 0u) << in->try_this;
}

}  // namespace

// Two ranks of one DDP job (--children): rank 0 blocks 10 ms per step in
// backward's all_reduce because rank 1's training_step takes 10 ms longer.
TEST(Findings, CollectiveBoundAndTheStragglerWithItsCause) {
  Fit waiting;
  waiting.bwd = 13;  // 3 ms of backward, 10 of waiting
  Fit slow;
  slow.fwd = 14;
  ActionsReport r = make(waiting);
  ActionsReport other = make(slow, 2);
  r.processes[0].meta.rank = 0;
  other.processes[0].meta.pid = 8;
  other.processes[0].meta.rank = 1;
  r.processes.push_back(std::move(other.processes[0]));
  auto comm = [](double rank0_ms, double rank1_ms) {
    CommReport c;
    for (auto [pid, ms] : {std::pair{7u, rank0_ms}, std::pair{8u, rank1_ms}}) {
      ProcessComm pc;
      pc.pid = pid;
      CommActionRow row;
      row.action = "[Strategy]SingleDeviceStrategy.backward";
      row.kind = LT_COMM_ALLREDUCE;
      row.calls = row.waited = 50;
      row.blocked_ns = static_cast<std::uint64_t>(50 * ms * 1e6);
      pc.actions.push_back(row);
      CommActionRow val = row;  // validation's waits are not the train step's
      val.action = "[Strategy]SingleDeviceStrategy.validation_step";
      val.blocked_ns = static_cast<std::uint64_t>(50 * 100 * 1e6);
      pc.actions.push_back(val);
      c.processes.push_back(pc);
    }
    return c;
  };
  const CommReport calm = comm(0.2, 0.1);
  EXPECT_TRUE(find_issues(r, nullptr, &calm).empty()) << render_findings(r, find_issues(r, nullptr, &calm));
  const CommReport waits = comm(10, 0.1);
  const auto f = find_issues(r, nullptr, &waits);
  ASSERT_EQ(f.size(), 2u) << render_findings(r, f);
  EXPECT_EQ(f[0].kind, "collective-bound");
  EXPECT_EQ(f[0].pid, 7u);
  EXPECT_NEAR(f[0].ms_per_step, 10, 0.01);
  EXPECT_NEAR(f[0].share, 10 / 18.9, 0.02) << f[0].evidence;  // ~18.9 ms steps
  EXPECT_NE(f[0].evidence.find("all_reduce in [Strategy]SingleDeviceStrategy.backward"), std::string::npos)
      << f[0].evidence;
  EXPECT_EQ(f[1].kind, "straggler");
  EXPECT_EQ(f[1].pid, 8u);
  EXPECT_NE(f[1].evidence.find("rank 1 (pid 8) is the rank the others wait for"), std::string::npos) << f[1].evidence;
  EXPECT_NE(f[1].evidence.find("its own compute: its training_step part takes 14."), std::string::npos)
      << f[1].evidence;
  // The same ms as the waiter's finding: said to be that, not more.
  EXPECT_DOUBLE_EQ(f[1].ms_per_step, f[0].ms_per_step);
  EXPECT_NE(f[1].evidence.find("the time of its collective-bound finding seen from its cause, not more time"),
            std::string::npos)
      << f[1].evidence;
}

// A recompile inside a train step (Dynamo's record, as the op report reads
// it from the job): ranked first at its duration per step; the step it made
// slow is not also an outlier; a first compile (no reason) is no recompile.
TEST(Findings, RecompilesInsideTrainStepsAtTheirDuration) {
  Fit fit;
  fit.slow_step = 10;
  fit.slow_ms = 300;
  const auto r = make(fit);
  const auto steps = step_records(r.processes[0]).train;
  ASSERT_EQ(steps.size(), 50u);
  CompilesReport c;
  auto& p = c.procs[r.processes[0].meta.pid];
  DynamoCompileNote first;
  first.id = "0/0";
  first.function = "forward (model.py:31)";
  first.start_ns = static_cast<std::int64_t>(steps[0].begin_ns + 1000);
  first.duration_us = 2000;
  DynamoCompileNote again = first;
  again.id = "0/1";
  again.start_ns = static_cast<std::int64_t>(steps[10].begin_ns + 1000);
  again.duration_us = 300'000;
  again.reason = "0/0: tensor 'x' size mismatch at index 0. expected 32, actual 16";
  p.compiles = {first, again};
  const auto f = find_issues(r, nullptr, nullptr, &c);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].kind, "recompiles") << render_findings(r, f);
  EXPECT_NEAR(f[0].ms_per_step, 300.0 / 50, 0.01);
  EXPECT_NE(f[0].evidence.find("1 recompile(s) inside the train and validation steps took 300.00 ms"),
            std::string::npos)
      << f[0].evidence;
  EXPECT_NE(f[0].evidence.find("size mismatch at index 0"), std::string::npos) << f[0].evidence;
  for (const auto& x : f) EXPECT_NE(x.kind, "outliers") << render_findings(r, f);
  // Without Dynamo's record the same step is an outlier.
  EXPECT_EQ(find_issues(r)[0].kind, "outliers");
}

// A callback whose hook collects garbage (or logs) for most of its time:
// one cause, one finding. The collections (and the logging samples) inside
// the hooks are the gc (logging) finding's, not also the hooks' (a real
// callback's gc.collect() was both, 290 ms at stake in a 149 ms step).
TEST(Findings, GcOrLoggingInAHookIsNotAlsoTheHooks) {
  Fit fit;
  fit.hook = 6;  // ~6 of 14.5 ms a step: hooks, alone
  const auto r = make(fit);
  const auto& p = r.processes[0];
  std::vector<std::pair<std::uint64_t, std::uint64_t>> hooks;
  for (const auto& iv : p.intervals)
    if (p.actions[iv.action].name == "[Callback]LoggerCallback.on_train_batch_end")
      hooks.emplace_back(iv.begin_ns, iv.end_ns);
  ASSERT_EQ(hooks.size(), 50u);
  auto kinds = [&](const std::vector<Finding>& f) {
    std::vector<std::string> k;
    for (const auto& x : f) k.push_back(x.kind);
    return k;
  };
  EXPECT_EQ(kinds(find_issues(r)), std::vector<std::string>{"hooks"});
  GcReport in_hook, in_step;
  for (const auto& [b, e] : hooks) {
    in_hook.procs[p.meta.pid].push_back({b + 500'000, b + 5'500'000, 10, 2, 0});
    in_step.procs[p.meta.pid].push_back({b - 7'000'000, b - 2'000'000, 10, 2, 0});  // in training_step
  }
  auto f = find_issues(r, nullptr, nullptr, nullptr, &in_hook);
  EXPECT_EQ(kinds(f), std::vector<std::string>{"gc"}) << render_findings(r, f);
  f = find_issues(r, nullptr, nullptr, nullptr, &in_step);  // elsewhere: both, each its own time
  EXPECT_EQ(kinds(f), (std::vector<std::string>{"hooks", "gc"})) << render_findings(r, f);
  // Logging samples (1 ms) through 5 ms of each hook.
  LoggingReport lg;
  lg.period_ns = 1'000'000;
  lg.names = {"LightningModule.log (module.py:512)", "LoggerCallback.on_train_batch_end (train.py:9)"};
  for (const auto& [b, e] : hooks)
    for (int i = 0; i < 5; ++i) lg.procs[p.meta.pid].push_back({b + 500'000 + i * 1'000'000ull, p.meta.pid, 0, 1, 1});
  lg.sampled[p.meta.pid] = 50 * 15;
  f = find_issues(r, nullptr, nullptr, nullptr, nullptr, &lg);
  EXPECT_EQ(kinds(f), std::vector<std::string>{"logging"}) << render_findings(r, f);
}

TEST(Findings, GcPausesInsideTrainStepsClippedToThem) {
  // A full collection of 2 ms in every step (~9.7 ms), one of 150 ms in
  // step 20, and collections between steps (not at stake): "gc" first at
  // the in-step time per step, and step 20 is not an outlier.
  Fit fit;
  fit.slow_step = 20;
  fit.slow_ms = 150;
  const auto r = make(fit);
  const auto steps = step_records(r.processes[0]).train;
  ASSERT_EQ(steps.size(), 50u);
  GcReport g;
  auto& pauses = g.procs[r.processes[0].meta.pid];
  double in_steps_ms = 0;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::uint64_t b = steps[i].begin_ns + 1'000'000;
    const std::uint64_t d = i == 20 ? 150'000'000 : 2'000'000;
    pauses.push_back({b, b + d, 1234, 2, 0});
    in_steps_ms += d / 1e6;
    if (i + 1 < steps.size() && steps[i + 1].begin_ns > steps[i].end_ns)  // between two steps: none of it counts
      pauses.push_back({steps[i].end_ns, steps[i + 1].begin_ns, 5, 0, 0});
  }
  // One that straddles the last step's end counts up to it.
  const std::uint64_t end = steps.back().end_ns;
  pauses.push_back({end - 500'000, end + 5'000'000, 7, 0, 0});
  in_steps_ms += 0.5;
  std::sort(pauses.begin(), pauses.end(), [](const GcPause& a, const GcPause& b) { return a.begin_ns < b.begin_ns; });
  const auto f = find_issues(r, nullptr, nullptr, nullptr, &g);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].kind, "gc") << render_findings(r, f);
  EXPECT_NEAR(f[0].ms_per_step, in_steps_ms / 50, 0.01);
  EXPECT_NE(f[0].evidence.find("generation 0 1x, 1 0x, 2 50x"), std::string::npos) << f[0].evidence;
  EXPECT_NE(f[0].evidence.find("the longest 150.00 ms (generation 2, 1234 objects unreachable)"), std::string::npos)
      << f[0].evidence;
  for (const auto& x : f) EXPECT_NE(x.kind, "outliers") << render_findings(r, f);
  // Most were full collections: the job's own gc.collect() said first.
  EXPECT_EQ(f[0].try_this.rfind("most were full collections (generation 2), which a gc.collect() in the code", 0), 0u)
      << f[0].try_this;
  GcReport young = g;
  for (auto& x : young.procs[r.processes[0].meta.pid]) x.generation = 0;
  const auto y = find_issues(r, nullptr, nullptr, nullptr, &young);
  ASSERT_FALSE(y.empty());
  EXPECT_EQ(y[0].try_this.rfind("gc.freeze() once the model and data are built", 0), 0u) << y[0].try_this;
  // Below the threshold, no finding: 0.2 ms a step is ~2 %.
  const auto healthy = make(Fit{});
  GcReport small;
  for (const auto& s : step_records(healthy.processes[0]).train)
    small.procs[healthy.processes[0].meta.pid].push_back({s.begin_ns, s.begin_ns + 200'000, 1, 0, 0});
  EXPECT_TRUE(find_issues(healthy, nullptr, nullptr, nullptr, &small).empty());
}

TEST(Findings, GcFromSamplesWhereNoProbesMeasuredIt) {
  // A CPython without gc probes: 1 ms samples, 3 taken inside a collection in
  // every step (one weighing 2 periods, as watch's cheap tier), 40 in step
  // 20, and some between steps (not at stake); samples outside collections,
  // in our probes, or off-CPU do not count: "gc" first at the samples' time
  // per step, said to be an estimate, and step 20 is not an outlier.
  Fit fit;
  fit.slow_step = 20;
  fit.slow_ms = 40;
  const auto r = make(fit);
  const auto steps = step_records(r.processes[0]).train;
  ASSERT_EQ(steps.size(), 50u);
  const std::uint32_t pid = r.processes[0].meta.pid;
  GcAggregator agg;
  auto feed = [&](auto& rec) { agg.add(rec.hdr, reinterpret_cast<const std::byte*>(&rec)); };
  lt_sampler_info_event info{};
  info.hdr = {LT_EV_SAMPLER_INFO, sizeof info, pid, pid, 0, 0};
  info.period_ns = 1'000'000;
  info.flags = LT_SAMPLER_ON_CPU;
  feed(info);
  auto sample = [&](std::uint64_t ts, std::uint16_t flags, std::uint16_t weight, std::uint16_t kind) {
    lt_py_sample_event e{};
    e.hdr = {kind, sizeof e, pid, pid, 0, ts};
    e.flags = flags;
    e.weight = weight;
    feed(e);
  };
  std::size_t periods = 0, count = 0;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::size_t n = i == 20 ? 40 : 3;
    for (std::size_t k = 0; k < n; ++k) {
      const std::uint16_t w = k == 0 && i != 20 ? 2 : 0;  // 0: a weightless sample, 1 period
      const std::uint64_t ts = steps[i].begin_ns + 100'000 + k * 1'000'000;
      sample(ts, LT_SAMPLE_IN_GC, w, LT_EV_PY_SAMPLE);
      sample(ts + 1, 0, 0, LT_EV_PY_SAMPLE);                                     // not in a collection
      sample(ts + 2, LT_SAMPLE_IN_GC | LT_SAMPLE_IN_PROBE, 0, LT_EV_PY_SAMPLE);  // our cost
      sample(ts + 3, LT_SAMPLE_IN_GC, 0, LT_EV_OFFCPU_BEGIN);                    // not a sample of CPU time
      periods += w ? w : 1;
      ++count;
    }
    if (i + 1 < steps.size() && steps[i + 1].begin_ns > steps[i].end_ns)
      sample(steps[i].end_ns, LT_SAMPLE_IN_GC, 0, LT_EV_PY_SAMPLE);  // at the step's end: between two steps
  }
  GcReport g = agg.finish();
  ASSERT_EQ(g.period_ns, 1'000'000u);
  const auto f = find_issues(r, nullptr, nullptr, nullptr, &g);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].kind, "gc") << render_findings(r, f);
  EXPECT_NEAR(f[0].ms_per_step, periods / 50.0, 0.01);
  EXPECT_NE(f[0].evidence.find("garbage collection inside the train steps took an estimated"), std::string::npos)
      << f[0].evidence;
  EXPECT_NE(f[0].evidence.find(std::to_string(count) + " stack samples taken inside a collection"), std::string::npos)
      << f[0].evidence;
  for (const auto& x : f) EXPECT_NE(x.kind, "outliers") << render_findings(r, f);
  // Measured pauses win over samples (a build has one or the other; a
  // merge of two could have both).
  g.procs[pid].push_back({steps[0].begin_ns, steps[0].begin_ns + 1'000'000, 3, 0, 0});
  const auto both = find_issues(r, nullptr, nullptr, nullptr, &g);
  for (const auto& x : both) EXPECT_EQ(x.evidence.find("estimated"), std::string::npos) << x.evidence;
  // Without the period (no sampler info), no estimate.
  GcReport no_period;
  no_period.sampled = g.sampled;
  for (const auto& x : find_issues(r, nullptr, nullptr, nullptr, &no_period)) EXPECT_NE(x.kind, "gc");
}

TEST(Findings, GraphBreaksAtTheirEagerTimeWhereDynamoMetThem) {
  // 3 samples of 1 ms between the graphs in each ~8.6 ms step (one between
  // steps, not at stake): "graph_breaks" first at 3 ms per step, at its
  // line; without Dynamo's record of a break, or under 5 %, none.
  const auto r = make(Fit{});
  const auto steps = step_records(r.processes[0]).train;
  CompilesReport c;
  auto& p = c.procs[r.processes[0].meta.pid];
  p.period_ns = 1'000'000;
  p.eager_sites = {"Net.forward (/src/net.py:53)", "Net.forward (/src/net.py:55)"};
  for (std::size_t i = 0; i < steps.size(); ++i) {
    for (std::uint32_t k = 0; k < 3; ++k) p.eager.push_back({steps[i].begin_ns + 200'000 + k * 1'000'000, 1, k / 2});
    if (i + 1 < steps.size() && steps[i + 1].begin_ns > steps[i].end_ns) p.eager.push_back({steps[i].end_ns, 1, 1});
  }
  p.graph_breaks.push_back({"Skip calling `torch.compiler.disable()`d function\n  Explanation: ...", 1});
  const auto f = find_issues(r, nullptr, nullptr, &c);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].kind, "graph_breaks") << render_findings(r, f);
  EXPECT_NEAR(f[0].ms_per_step, 3.0, 1e-9);
  EXPECT_NE(f[0].evidence.find("150 stack samples inside the compiled functions and outside their graphs), most at "
                               "Net.forward (/src/net.py:53) (66.7%); Dynamo met 1 graph break(s): Skip calling "
                               "`torch.compiler.disable()`d function (1x)"),
            std::string::npos)
      << f[0].evidence;
  auto none = c;
  none.procs.begin()->second.graph_breaks.clear();
  for (const auto& x : find_issues(r, nullptr, nullptr, &none)) EXPECT_NE(x.kind, "graph_breaks");
  auto small = c;
  auto& e = small.procs.begin()->second.eager;
  e.erase(std::remove_if(e.begin(), e.end(), [](const EagerSample& x) { return x.site == 1; }), e.end());
  e.resize(e.size() / 8);  // ~0.2 ms a step
  for (const auto& x : find_issues(r, nullptr, nullptr, &small)) EXPECT_NE(x.kind, "graph_breaks");
}

// Which frames are logging code: Lightning's self.log / log_dict, its logger
// connector and loggers, the logger libraries and Python's logging; not a
// user's own function of the same name, nor a user directory named alike.
TEST(LoggingTime, FramesOfLoggingCode) {
  auto f = [](const char* fn, const char* file) { return StackFrame{fn, file, 1, 1, false}; };
  const std::string lp = "/v/lib/python3.11/site-packages/lightning/pytorch/";
  EXPECT_TRUE(is_logging_frame(f("LightningModule.log", (lp + "core/module.py").c_str())));
  EXPECT_TRUE(is_logging_frame(f("log_dict", "/v/site-packages/pytorch_lightning/core/module.py")));
  EXPECT_FALSE(is_logging_frame(f("LightningModule.__call__", (lp + "core/module.py").c_str())));
  EXPECT_TRUE(is_logging_frame(f("_LoggerConnector.update_train_step_metrics",
                                 (lp + "trainer/connectors/logger_connector/logger_connector.py").c_str())));
  EXPECT_TRUE(is_logging_frame(f("TensorBoardLogger.log_metrics", (lp + "loggers/tensorboard.py").c_str())));
  EXPECT_TRUE(is_logging_frame(f("Logger.info", "/usr/lib/python3.11/logging/__init__.py")));
  EXPECT_TRUE(is_logging_frame(f("SummaryWriter.add_scalar", "/v/site-packages/torch/utils/tensorboard/writer.py")));
  EXPECT_TRUE(is_logging_frame(f("log", "/v/site-packages/wandb/sdk/wandb_run.py")));
  EXPECT_FALSE(is_logging_frame(f("training_step", "/home/u/loggers/train.py")));
  EXPECT_FALSE(is_logging_frame(f("log", "/home/u/model.py")));
  EXPECT_FALSE(is_logging_frame(StackFrame{"log", "libfoo.so", 0, 0, true}));
}

namespace {

// A LoggingAggregator fed PY_CODE records and one on-CPU sample per
// `every`-th train step inside self.log, called from training_step.
LoggingReport logging_samples(const ActionsReport& r, std::uint64_t period_ns, std::size_t every, std::uint32_t tid) {
  LoggingAggregator agg;
  auto feed = [&](auto& rec) { agg.add(rec.hdr, reinterpret_cast<const std::byte*>(&rec)); };
  const std::uint32_t pid = r.processes[0].meta.pid;
  lt_sampler_info_event info{};
  info.hdr = {LT_EV_SAMPLER_INFO, sizeof info, pid, pid, 0, 0};
  info.period_ns = period_ns;
  info.flags = LT_SAMPLER_ON_CPU;
  feed(info);
  auto code = [&](std::uint64_t addr, const char* name, const char* file) { name_code(agg, pid, addr, name, file); };
  code(0x1000, "LightningModule.log", "/v/site-packages/lightning/pytorch/core/module.py");
  code(0x2000, "training_step", "/src/train.py");
  code(0x3000, "fit", "/src/run.py");
  const auto steps = step_records(r.processes[0]).train;
  for (std::size_t i = 0; i < steps.size(); i += every) {
    lt_py_sample_event s{};
    s.hdr = {LT_EV_PY_SAMPLE, sizeof s, pid, tid, 0, steps[i].begin_ns + 500'000};
    s.nframes = 3;
    s.frames[0] = {0x1000, 0, 0};
    s.frames[1] = {0x2000, 0, 0};
    s.frames[2] = {0x3000, 0, 0};
    feed(s);
    // The same stack between two steps: not at stake.
    s.hdr.ts_ns = steps[i].end_ns + 1;
    if (i + 1 < steps.size() && steps[i + 1].begin_ns > s.hdr.ts_ns) feed(s);
  }
  return agg.finish();
}

}  // namespace

// One 1 ms sample in self.log per step of ~9.7 ms: "logging" at ~1 ms per
// step, with its call site; a sample every 4th step (~2.6 %) is under the
// threshold; 5 samples at 10 ms (~10 %) are too few to say; another
// thread's samples are not the steps' time.
TEST(Findings, LoggingSamplesInsideTrainStepsAreItsEstimatedTime) {
  const auto r = make(Fit{});
  const std::uint32_t loop = step_records(r.processes[0]).tid;
  const LoggingReport every = logging_samples(r, 1'000'000, 1, loop);
  const auto f = find_issues(r, nullptr, nullptr, nullptr, nullptr, &every);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].kind, "logging") << render_findings(r, f);
  EXPECT_NEAR(f[0].ms_per_step, 1.0, 1e-9);
  EXPECT_NE(f[0].evidence.find("50 of the training loop's stack samples"), std::string::npos) << f[0].evidence;
  EXPECT_NE(f[0].evidence.find("LightningModule.log (module.py) called from training_step (/src/train.py"),
            std::string::npos)
      << f[0].evidence;
  // self.log's own work: log_every_n_steps does not space it out.
  EXPECT_EQ(f[0].try_this.rfind("log fewer values per step: self.log's own cost is paid at every call", 0), 0u)
      << f[0].try_this;
  // A logger library's writes: it does.
  LoggingReport writes = every;
  writes.names[every.procs.begin()->second.front().entry] = "SummaryWriter.add_scalar (writer.py)";
  const auto w = find_issues(r, nullptr, nullptr, nullptr, nullptr, &writes);
  ASSERT_FALSE(w.empty());
  EXPECT_EQ(w[0].try_this.rfind("log less often from the step: a logger's writes, print or logging.info", 0), 0u)
      << w[0].try_this;
  auto kinds = [&r](const LoggingReport& lg) {
    std::string k;
    for (const auto& x : find_issues(r, nullptr, nullptr, nullptr, nullptr, &lg)) k += x.kind + " ";
    return k;
  };
  EXPECT_EQ(kinds(logging_samples(r, 1'000'000, 4, loop)).find("logging"), std::string::npos);
  EXPECT_EQ(kinds(logging_samples(r, 10'000'000, 10, loop)).find("logging"), std::string::npos);
  EXPECT_EQ(kinds(logging_samples(r, 1'000'000, 1, loop + 1)).find("logging"), std::string::npos);
}

// --why-step N (watch's slow-step captures): the step taken apart even
// where the outliers finding stays under its share -- one 15 ms fetch in
// 50 steps of ~9 ms is about 3 % of the steps' time.
TEST(StepCause, AStepTakenApartWhereNoOutliersFindingIs) {
  Fit one_slow_fetch;
  one_slow_fetch.slow_fetch_step = 20;
  one_slow_fetch.slow_fetch_ms = 15;
  const auto r = make(one_slow_fetch);
  const auto f = find_issues(r);
  for (const auto& x : f) EXPECT_NE(x.kind, "outliers") << render_findings(r, f);
  const std::string why = explain_step(r, 20);
  EXPECT_EQ(why.rfind("  pid ", 0), 0u) << why;
  EXPECT_NE(why.find("x the median "), std::string::npos) << why;
  EXPECT_NE(why.find("of the 50 train steps recorded"), std::string::npos) << why;
  auto over = [](const std::string& text, const std::string& part) {  // the ms after "mostly its PART part ("
    const std::string key = "mostly its " + part + " part (";
    const auto at = text.find(key);
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + key.size()));
  };
  EXPECT_NEAR(over(why, "dataloader"), 15, 0.2) << why;
  EXPECT_NE(why.find("its longest action there: [_TrainingEpochLoop].train_dataloader_next 15."), std::string::npos)
      << why;
  // A step no slower than the median: no part blamed.
  const std::string usual = explain_step(r, 3);
  EXPECT_NE(usual.find("not over the median: no part stands out"), std::string::npos) << usual;
  EXPECT_EQ(usual.find("mostly"), std::string::npos) << usual;
  // The slowest of the others is over the median by its jitter only: within
  // the run's spread, no part blamed (one 0.02 ms over had one).
  std::string hair;
  double hair_ms = 0;
  for (int i = 1; i < 50; ++i) {
    if (i == 20) continue;
    const std::string w = explain_step(r, i);
    const double ms = std::stod(w.substr(w.find(": ") + 2));
    if (ms > hair_ms) hair_ms = ms, hair = w;
  }
  EXPECT_NE(hair.find("within the run's own spread ("), std::string::npos) << hair;
  EXPECT_EQ(hair.find("mostly"), std::string::npos) << hair;
  // A step's own body: the step part, its action named.
  Fit slow_body;
  slow_body.slow_step = 7;
  slow_body.slow_ms = 30;
  const ActionsReport slow = make(slow_body);
  const std::string body = explain_step(slow, 7);
  EXPECT_NEAR(over(body, "step"), 30, 0.2) << body;
  EXPECT_EQ(body.find("waited for a CPU"), std::string::npos) << body;  // no /proc samples: nothing said
  // With /proc samples just around it: its thread's wait for a CPU, and
  // where that is most of the excess, said (a loaded machine's slow step).
  const StepRecord seventh = step_records(slow.processes[0]).train[7];  // a copy: the steps are a temporary
  DeviceStatsReport around;
  ProcessDeviceStats ps;
  ps.pid = slow.processes[0].meta.pid;
  ps.sched.push_back({seventh.begin_ns - 1'000'000, 1'000'000'000, 2'000'000'000});
  ps.sched.push_back({seventh.end_ns + 1'000'000, 1'020'000'000, 2'025'000'000});  // 25 ms on the run queue
  around.processes.push_back(ps);
  const std::string waited = explain_step(slow, 7, &around);
  EXPECT_NE(waited.find("; its thread waited for a CPU 25.00 ms of the "), std::string::npos) << waited;
  EXPECT_NE(waited.find("much of its excess may be other processes on its CPUs"), std::string::npos) << waited;
  EXPECT_NE(body.find("[Strategy]SingleDeviceStrategy.training_step 3"), std::string::npos) << body;
  // A step no process ran: said.
  EXPECT_EQ(explain_step(r, 50), "");
  EXPECT_NE(render_step_causes(r, 50).find("no process recorded it whole (train steps pid "), std::string::npos)
      << render_step_causes(r, 50);
  EXPECT_NE(render_step_causes(r, 50).find(": 0-49)"), std::string::npos) << render_step_causes(r, 50);
}

// A fetch shorter than a DataLoader worker's hand-over is no input-bound
// finding, whatever its share: the demo job's 0.15 ms fetch in a 0.8 ms
// step (17 %) was told to add workers, which cost ~1 ms a batch here.
TEST(Findings, AFetchShorterThanAWorkersHandOverIsNotInputBound) {
  Fit tiny;
  tiny.fetch = 0.15, tiny.fwd = 0.25, tiny.bwd = 0.2, tiny.opt = 0.1, tiny.hook = 0.05;
  auto r = make(tiny);
  auto f = find_issues(r);
  for (const auto& x : f) EXPECT_NE(x.kind, "input-bound") << render_findings(r, f);
  // The same shares 5 and 10 times longer: at 5 (a 0.75 ms fetch) still
  // none, at 10 (1.5 ms) input-bound.
  for (const double k : {10.0, 5.0}) {
    Fit longer = tiny;
    for (double* part : {&longer.fetch, &longer.fwd, &longer.bwd, &longer.opt, &longer.hook}) *part *= k;
    r = make(longer);
    f = find_issues(r);
    const bool input_bound = !f.empty() && f[0].kind == "input-bound";
    EXPECT_EQ(input_bound, k == 10.0) << render_findings(r, f);
  }
}
