// Stack samples on synthetic event streams: attribution to the innermost
// action of the thread, symbol records, off-CPU pairing, and the Advanced
// report's layout and line_count_restriction rules.
#include "reports/aggregate/stacks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "reports/advanced/advanced_report.h"
#include "reports/aggregate/actions.h"

using namespace lt;

namespace {

constexpr std::uint64_t ms = 1'000'000;
constexpr std::uint32_t kPid = 10;

struct Stream {
  ActionAggregator actions;
  StackAggregator stacks{actions};

  template <typename R>
  void feed(const R& r) {
    actions.add(r.hdr, reinterpret_cast<const std::byte*>(&r));
    stacks.add(r.hdr, reinterpret_cast<const std::byte*>(&r));
  }
  void sampler(std::uint64_t period) {
    lt_sampler_info_event e{};
    e.hdr = {LT_EV_SAMPLER_INFO, sizeof e, 0, 0, 0, 1};
    e.period_ns = period;
    e.rate_hz = static_cast<std::uint32_t>(1'000'000'000 / period);
    e.flags = LT_SAMPLER_ON_CPU | LT_SAMPLER_OFF_CPU;
    feed(e);
  }
  void action(lt_event_kind kind, std::uint64_t ts, std::uint32_t tid, std::uint64_t key, const char* name = "") {
    lt_action_event e{};
    e.hdr = {static_cast<u16>(kind), sizeof e, kPid, tid, 0, ts};
    e.key = key;
    std::strncpy(e.name, name, sizeof e.name - 1);
    feed(e);
  }
  void code(std::uint64_t addr, const char* name, const char* file, int first_line, std::uint32_t flags = 0) {
    lt_py_code_event e{};
    e.hdr = {LT_EV_PY_CODE, sizeof e, kPid, kPid, 0, 1};
    e.flags = flags;
    e.code = addr;
    e.checksum = 7;
    e.first_line = first_line;
    std::strncpy(e.name, name, sizeof e.name - 1);
    std::strncpy(e.file, file, sizeof e.file - 1);
    feed(e);
  }
  void line(std::uint64_t addr, int lasti, int line) {
    lt_py_line_event e{};
    e.hdr = {LT_EV_PY_LINE, sizeof e, kPid, kPid, 0, 1};
    e.code = addr;
    e.checksum = 7;
    e.lasti = lasti;
    e.line = line;
    feed(e);
  }
  // frames: code addresses, root first
  lt_py_sample_event sample(lt_event_kind kind, std::uint64_t ts, std::uint32_t tid,
                            std::vector<std::uint64_t> root_first) {
    lt_py_sample_event e{};
    e.hdr = {static_cast<u16>(kind), sizeof e, kPid, tid, 0, ts};
    e.nframes = static_cast<u16>(root_first.size());
    for (std::size_t i = 0; i < root_first.size(); ++i) {
      auto& f = e.frames[root_first.size() - 1 - i];  // BPF sends leaf first
      f.code = root_first[i];
      f.checksum = 7;
      f.lasti = 4;
    }
    feed(e);
    return e;
  }
  void offcpu_end(std::uint64_t ts, std::uint32_t tid, std::uint64_t began) {
    lt_offcpu_end_event e{};
    e.hdr = {LT_EV_OFFCPU_END, sizeof e, kPid, tid, 0, ts};
    e.begin_ns = began;
    feed(e);
  }
};

const StackProfile* profile(const std::vector<StackProfile>& v, const std::string& name) {
  for (auto& p : v)
    if (p.name == name) return &p;
  return nullptr;
}

std::vector<std::string> leaf_functions(const StackProfile& p) {
  std::vector<std::string> out;
  for (auto& s : p.stacks)
    for (std::uint64_t i = 0; i < s.weight; ++i) out.push_back(p.frames[s.frames.back()].function);
  return out;
}

}  // namespace

// Code objects that ran in Py_FinalizeEx after its hold and were freed
// before the exit's read are named for what happened to them, apart from
// the <unknown> ones (a hold that failed would show there).
TEST(Stacks, CodeFreedByTheShutdownIsNamedSoAndCountedApart) {
  Stream s;
  s.sampler(ms);
  s.code(0x100, "main", "/w/train.py", 1);
  s.code(0x300, "", "", 0, LT_CODE_UNREADABLE | LT_CODE_FREED_AT_EXIT);
  s.code(0x400, "", "", 0, LT_CODE_UNREADABLE);
  s.sample(LT_EV_PY_SAMPLE, 1 * ms, 1, {0x100});
  s.sample(LT_EV_PY_SAMPLE, 2 * ms, 1, {0x300, 0x300});
  s.sample(LT_EV_PY_SAMPLE, 3 * ms, 1, {0x300, 0x300});  // the same raw stack: cached, counted again
  s.sample(LT_EV_PY_SAMPLE, 4 * ms, 1, {0x400});
  s.actions.finish();
  auto rep = s.stacks.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  const auto& p = rep.processes[0];
  EXPECT_EQ(p.unknown_frames, 1u);
  EXPECT_EQ(p.freed_at_exit_frames, 4u);
  auto leaves = leaf_functions(p.on_cpu.back());
  std::sort(leaves.begin(), leaves.end());
  EXPECT_EQ(leaves, (std::vector<std::string>{"<freed at exit>", "<freed at exit>", "<unknown>", "main"}));
}

TEST(Stacks, SamplesGoToTheInnermostActionOfTheirThread) {
  Stream s;
  s.sampler(ms);
  s.code(0x100, "main", "/w/train.py", 1);
  s.code(0x200, "Model.training_step", "/w/train.py", 20);
  s.line(0x100, 4, 9);
  s.line(0x200, 4, 22);
  s.action(LT_EV_ACTION_BEGIN, 1 * ms, 1, 0xa, "run_training_batch");
  s.action(LT_EV_ACTION_BEGIN, 2 * ms, 1, 0xb, "[Strategy]S.training_step");
  s.sample(LT_EV_PY_SAMPLE, 3 * ms, 1, {0x100, 0x200});  // inside training_step
  s.sample(LT_EV_PY_SAMPLE, 3 * ms, 2, {0x100});         // another thread: no action there
  s.action(LT_EV_ACTION_END, 4 * ms, 1, 0xb);
  s.sample(LT_EV_PY_SAMPLE, 5 * ms, 1, {0x100});  // back in run_training_batch
  s.action(LT_EV_FETCH_BEGIN, 6 * ms, 1, 0);      // a fetch opens inside the batch
  s.sample(LT_EV_PY_SAMPLE, 7 * ms, 1, {0x100});
  s.action(LT_EV_ACTION_END, 8 * ms, 1, 0xa);
  s.sample(LT_EV_PY_SAMPLE, 9 * ms, 1, {0x999});  // unknown code object, no action
  s.actions.finish();
  auto rep = s.stacks.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  const auto& p = rep.processes[0];
  EXPECT_EQ(p.samples, 5u);
  EXPECT_EQ(p.unknown_frames, 1u);
  ASSERT_EQ(p.on_cpu.size(), 4u);
  // First-begin order, then actions that never began through a probe (the
  // inferred fetch), then time outside actions.
  EXPECT_EQ(p.on_cpu[0].name, "run_training_batch");
  EXPECT_EQ(p.on_cpu[1].name, "[Strategy]S.training_step");
  EXPECT_EQ(p.on_cpu.back().name, kNoAction);
  auto* step = profile(p.on_cpu, "[Strategy]S.training_step");
  ASSERT_TRUE(step);
  ASSERT_EQ(step->stacks.size(), 1u);
  EXPECT_EQ(leaf_functions(*step), std::vector<std::string>{"Model.training_step"});
  EXPECT_EQ(step->frames[step->stacks[0].frames.back()].line, 22);
  EXPECT_EQ(step->frames[step->stacks[0].frames.front()].first_line, 1);
  EXPECT_EQ(step->period_ns, ms);
  EXPECT_EQ(profile(p.on_cpu, "run_training_batch")->total_weight(), 1u);
  EXPECT_EQ(profile(p.on_cpu, "[_TrainingEpochLoop].train_dataloader_next")->total_weight(), 1u);
  auto* none = profile(p.on_cpu, kNoAction);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->total_weight(), 2u);
  EXPECT_EQ(leaf_functions(*none), (std::vector<std::string>{"main", "<unknown>"}));
}

TEST(Stacks, OffCpuPeriodsPairPerThreadAndWeighNanoseconds) {
  Stream s;
  s.sampler(ms);
  s.code(0x100, "RandomDataset.__getitem__", "/w/train.py", 30);
  s.action(LT_EV_FETCH_BEGIN, 1 * ms, 1, 0);
  s.sample(LT_EV_OFFCPU_BEGIN, 2 * ms, 1, {0x100});
  s.offcpu_end(5 * ms, 1, 2 * ms);
  s.sample(LT_EV_OFFCPU_BEGIN, 6 * ms, 1, {0x100});
  s.offcpu_end(7 * ms, 1, 6 * ms);
  s.offcpu_end(8 * ms, 3, 1 * ms);                   // its begin was never seen: ignored
  s.sample(LT_EV_OFFCPU_BEGIN, 9 * ms, 2, {0x100});  // still blocked at the end
  s.actions.finish();
  auto rep = s.stacks.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  const auto& p = rep.processes[0];
  EXPECT_EQ(p.offcpu_periods, 2u);
  EXPECT_EQ(p.offcpu_open_at_end, 1u);
  auto* fetch = profile(p.off_cpu, "[_TrainingEpochLoop].train_dataloader_next");
  ASSERT_TRUE(fetch);
  EXPECT_EQ(fetch->unit, StackUnit::nanoseconds);
  EXPECT_EQ(fetch->total_weight(), 4 * ms);
  ASSERT_EQ(fetch->stacks.size(), 1u);
  EXPECT_EQ(fetch->stacks[0].count, 2u);
}

TEST(Stacks, ExecForgetsTheOldProgramsSymbols) {
  Stream s;
  s.sampler(ms);
  s.code(0x100, "old", "/w/a.py", 1);
  lt_proc_event ex{};
  ex.hdr = {LT_EV_PROC_EXEC, sizeof ex, kPid, kPid, 0, 2 * ms};
  ex.child_pid = kPid;
  s.feed(ex);
  s.sample(LT_EV_PY_SAMPLE, 3 * ms, 1, {0x100});
  s.actions.finish();
  auto rep = s.stacks.finish();
  EXPECT_EQ(leaf_functions(rep.processes[0].on_cpu[0]), std::vector<std::string>{"<unknown>"});
}

TEST(AdvancedReport, LineRestrictionFollowsPstats) {
  auto frac = *parse_line_restriction("0.5");
  auto rows = *parse_line_restriction("3");
  auto all = *parse_line_restriction("1.0");
  EXPECT_FALSE(frac.is_integer);
  EXPECT_TRUE(rows.is_integer);
  EXPECT_EQ(restricted_rows(9, frac), 5u);  // int(9 * 0.5 + 0.5)
  EXPECT_EQ(restricted_rows(9, rows), 3u);
  EXPECT_EQ(restricted_rows(2, rows), 2u);  // an integer >= n keeps all
  EXPECT_EQ(restricted_rows(9, all), 9u);
  EXPECT_EQ(restricted_rows(9, *parse_line_restriction("0")), 0u);
  EXPECT_FALSE(parse_line_restriction("x"));
  EXPECT_FALSE(parse_line_restriction("-1"));
  EXPECT_FALSE(parse_line_restriction(""));
}

// watch: the cheap tier's samples each stand for several periods, an
// escalated target's for one (and a weight of 0, a trace from before
// weights, for one): times are periods, the sample counts stay counts.
TEST(Stacks, WeightedSamplesCountTheirPeriods) {
  Stream s;
  s.sampler(10 * ms);
  s.code(0x100, "main", "/w/train.py", 1);
  s.code(0x200, "Model.training_step", "/w/train.py", 20);
  s.line(0x100, 4, 9);
  s.line(0x200, 4, 22);
  s.action(LT_EV_ACTION_BEGIN, 1 * ms, 1, 0xb, "[Strategy]S.training_step");
  auto weighed = [&](std::uint64_t ts, std::vector<std::uint64_t> frames, std::uint16_t weight) {
    lt_py_sample_event e{};
    e.hdr = {LT_EV_PY_SAMPLE, sizeof e, kPid, 1, 0, ts};
    e.weight = weight;
    e.nframes = static_cast<u16>(frames.size());
    for (std::size_t i = 0; i < frames.size(); ++i) e.frames[frames.size() - 1 - i] = {frames[i], 4, 7};
    s.feed(e);
  };
  weighed(2 * ms, {0x100, 0x200}, 5);  // the cheap tier
  weighed(3 * ms, {0x100, 0x200}, 1);  // escalated (the same raw stack: cached)
  weighed(4 * ms, {0x100}, 0);         // no weight: 1
  s.action(LT_EV_ACTION_END, 5 * ms, 1, 0xb);
  s.actions.finish();
  auto rep = s.stacks.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  auto* step = profile(rep.processes[0].on_cpu, "[Strategy]S.training_step");
  ASSERT_TRUE(step);
  EXPECT_EQ(step->total_weight(), 7u);
  std::uint64_t taken = 0;
  for (const auto& st : step->stacks) taken += st.count;
  EXPECT_EQ(taken, 3u);
  AdvancedReportInput in;
  in.stacks = &rep.processes[0];
  in.period_ns = 10 * ms;
  const std::string text = render_advanced_report(in);
  EXPECT_NE(text.find("         3 samples weighing 7 periods = 0.070 s on-CPU (estimated: a period is 10.000 ms of "
                      "CPU; stacks were sampled at two rates)\n"),
            std::string::npos)
      << text;
}

TEST(AdvancedReport, GoldenLayout) {
  StackProfile p;
  p.name = "[Strategy]S.training_step";
  p.period_ns = 2 * ms;
  p.frames = {{"main", "/w/train.py", 9, 1, false},
              {"step", "/w/model.py", 22, 20, false},
              {"at::native::addmm", "libtorch_cpu.so", 0, 0, true},
              {"step", "/w/model.py", 23, 20, false}};
  p.stacks = {{{0, 1, 2}, 6, 6}, {{0, 1}, 3, 3}, {{0, 3}, 1, 1}};
  ProcessStacks ps;
  ps.pid = 10;
  ps.on_cpu.push_back(p);
  AdvancedReportInput in;
  in.stage_title = "FIT";
  in.stacks = &ps;
  in.period_ns = 2 * ms;
  in.action_time["[Strategy]S.training_step"] = {4, 0.05};
  in.restriction = *parse_line_restriction("2");
  EXPECT_EQ(render_advanced_report(in),
            "FIT Profiler Report\n"
            "Profile stats for: [Strategy]S.training_step\n"
            "         10 samples = 0.020 s on-CPU (estimated: one sample every 2.000 ms of CPU) while innermost; the "
            "action ran 4 time(s), 0.050 s in total\n"
            "\n"
            "   Ordered by: cumulative samples\n"
            "   List reduced from 3 to 2 due to restriction <2>\n"
            "\n"
            "   self_n    cum_n    self%     cum%  tottime~  cumtime~ filename:lineno(function)\n"
            "        4       10   40.00%  100.00%     0.008     0.020 model.py:20(step)\n"
            "        0       10    0.00%  100.00%     0.000     0.020 train.py:1(main)\n"
            "\n\n");
  auto rows = function_rows(p);
  ASSERT_EQ(rows.size(), 3u);  // lines of one function merge into one row
  EXPECT_EQ(rows[2].function.function, "at::native::addmm");
  EXPECT_EQ(rows[2].self, 6u);
}

TEST(AdvancedReport, RecursionCountsOncePerStack) {
  StackProfile p;
  p.frames = {{"fib", "/w/f.py", 3, 1, false}, {"fib", "/w/f.py", 4, 1, false}};
  p.stacks = {{{0, 1, 1, 0}, 5, 5}};
  auto rows = function_rows(p);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].cumulative, 5u);
  EXPECT_EQ(rows[0].self, 5u);
}

TEST(Stacks, AKeyReusedBeforeItsEndDoesNotLeaveAStaleAction) {
  Stream s;
  s.sampler(ms);
  s.code(0x100, "main", "/w/train.py", 1);
  s.action(LT_EV_ACTION_BEGIN, 1 * ms, 1, 0xa, "outer");
  s.action(LT_EV_ACTION_BEGIN, 2 * ms, 1, 0xa, "reused");  // the END of "outer" was lost
  s.action(LT_EV_ACTION_END, 3 * ms, 1, 0xa);
  s.sample(LT_EV_PY_SAMPLE, 4 * ms, 1, {0x100});  // inside nothing now
  s.actions.finish();
  auto rep = s.stacks.finish();
  ASSERT_EQ(rep.processes[0].on_cpu.size(), 1u);
  EXPECT_EQ(rep.processes[0].on_cpu[0].name, kNoAction);
}

TEST(Stacks, TruncatedAndUnreadableStacksSayWhereTheRootIs) {
  Stream s;
  s.sampler(ms);
  s.code(0x100, "leaf", "/w/a.py", 1);
  lt_py_sample_event e{};
  e.hdr = {LT_EV_PY_SAMPLE, sizeof e, kPid, 1, 0, 1 * ms};
  e.nframes = 1;
  e.frames[0] = {0x100, 4, 7};
  e.flags = LT_SAMPLE_TRUNCATED;
  s.feed(e);
  e.flags = LT_SAMPLE_READ_FAULT;
  s.feed(e);
  s.actions.finish();
  auto rep = s.stacks.finish();
  const auto& p = rep.processes[0].on_cpu[0];
  std::vector<std::string> roots;
  for (auto& st : p.stacks) roots.push_back(p.frames[st.frames.front()].function);
  std::sort(roots.begin(), roots.end());
  EXPECT_EQ(roots, (std::vector<std::string>{"[truncated]", "[unreadable frames]"}));
}

// A sample taken while the thread handles one of our uprobes (seen: in the
// action probe, between an action's BEGIN and its ORIGIN record) is our
// overhead: it is counted, and in no action's stacks.
TEST(Stacks, SamplesInOurOwnProbesAreInNoStack) {
  Stream s;
  s.sampler(ms);
  s.code(0x100, "main", "/w/train.py", 1);
  s.code(0x200, "step", "/w/train.py", 10);
  s.action(LT_EV_ACTION_BEGIN, 1 * ms, 1, 0xa, "training_step");
  lt_py_sample_event e{};
  e.hdr = {LT_EV_PY_SAMPLE, sizeof e, kPid, 1, 0, 2 * ms};
  e.nframes = 2;
  e.frames[0] = {0x200, 4, 7};
  e.frames[1] = {0x100, 4, 7};
  e.flags = LT_SAMPLE_IN_KERNEL | LT_SAMPLE_IN_PROBE;
  s.feed(e);
  s.sample(LT_EV_PY_SAMPLE, 3 * ms, 1, {0x100, 0x200});
  s.action(LT_EV_ACTION_END, 4 * ms, 1, 0xa);
  s.actions.finish();
  auto rep = s.stacks.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  EXPECT_EQ(rep.processes[0].samples, 2u);
  EXPECT_EQ(rep.processes[0].in_probe, 1u);
  const StackProfile* p = profile(rep.processes[0].on_cpu, "training_step");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(leaf_functions(*p), std::vector<std::string>{"step"});
}

TEST(AdvancedReport, SameBaseNameLineAndFunctionMergeLikeStripDirs) {
  StackProfile p;
  p.frames = {{"f", "/a/util.py", 3, 1, false}, {"f", "/b/util.py", 3, 1, false}};
  p.stacks = {{{0}, 2, 2}, {{1}, 3, 3}};
  auto rows = function_rows(p);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].self, 5u);
}

TEST(AdvancedReport, RestrictionIsShownAsPythonWouldPrintIt) {
  EXPECT_EQ(parse_line_restriction("0.50")->text, "0.5");
  EXPECT_EQ(parse_line_restriction("20")->text, "20");
  EXPECT_EQ(parse_line_restriction("1e3")->text, "1000.0");
}
