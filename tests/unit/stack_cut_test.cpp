// Each action's stacks start where the action starts: samples are cut at the
// frame that opened their action (ACTION_ORIGIN), exactly by depth, by code
// object when the root side is missing, not at all when unknown or asked
// (--full-stacks).  Synthetic streams.
#include "reports/aggregate/stack_cut.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/stacks.h"

using namespace lt;

namespace {

constexpr std::uint64_t ms = 1'000'000;
constexpr std::uint32_t kPid = 10;

// root_first: code addresses; BPF sends the leaf first.
lt_py_sample_event make_sample(lt_event_kind kind, std::uint64_t ts, std::uint32_t tid,
                               const std::vector<std::uint64_t>& root_first, std::uint16_t flags = 0) {
  lt_py_sample_event e{};
  e.hdr = {static_cast<u16>(kind), sizeof e, kPid, tid, 0, ts};
  e.nframes = static_cast<u16>(root_first.size());
  e.flags = flags;
  for (std::size_t i = 0; i < root_first.size(); ++i) {
    auto& f = e.frames[root_first.size() - 1 - i];
    f.code = root_first[i];
    f.checksum = 7;
    f.lasti = 4;
  }
  return e;
}

struct Stream {
  explicit Stream(bool full = false) : stacks(actions, full) {}
  ActionAggregator actions;
  StackAggregator stacks;

  template <typename R>
  void feed(const R& r) {
    actions.add(r.hdr, reinterpret_cast<const std::byte*>(&r));
    stacks.add(r.hdr, reinterpret_cast<const std::byte*>(&r));
  }
  void setup() {
    lt_sampler_info_event e{};
    e.hdr = {LT_EV_SAMPLER_INFO, sizeof e, 0, 0, 0, 1};
    e.period_ns = ms;
    e.rate_hz = 1000;
    e.flags = LT_SAMPLER_ON_CPU | LT_SAMPLER_OFF_CPU;
    feed(e);
    const char* names[] = {"<module>", "_run_stage", "_call_strategy_hook", "training_step", "forward", "linear"};
    for (unsigned i = 0; i < 6; ++i) {
      lt_py_code_event c{};
      c.hdr = {LT_EV_PY_CODE, sizeof c, kPid, kPid, 0, 1};
      c.code = 0x100 * (i + 1);
      c.checksum = 7;
      c.first_line = static_cast<int>(i + 1);
      std::strncpy(c.name, names[i], sizeof c.name - 1);
      std::strncpy(c.file, "/w/x.py", sizeof c.file - 1);
      feed(c);
    }
  }
  void action(lt_event_kind kind, std::uint64_t ts, std::uint32_t tid, std::uint64_t key, const char* name = "") {
    lt_action_event e{};
    e.hdr = {static_cast<u16>(kind), sizeof e, kPid, tid, 0, ts};
    e.key = key;
    std::strncpy(e.name, name, sizeof e.name - 1);
    feed(e);
  }
  void origin(std::uint64_t ts, std::uint32_t tid, std::uint64_t key, std::uint64_t code, std::uint32_t depth,
              lt_event_kind of = LT_EV_ACTION_BEGIN) {
    lt_action_origin_event e{};
    e.hdr = {LT_EV_ACTION_ORIGIN, sizeof e, kPid, tid, 0, ts};
    e.key = key;
    e.code = code;
    e.checksum = 7;
    e.depth = depth;
    e.begin_kind = static_cast<u16>(of);
    feed(e);
  }
  void sample(std::uint64_t ts, std::uint32_t tid, const std::vector<std::uint64_t>& root_first,
              std::uint16_t flags = 0, lt_event_kind kind = LT_EV_PY_SAMPLE) {
    feed(make_sample(kind, ts, tid, root_first, flags));
  }
};

// Each stack of an action as "f;g;h" (root first), weight summed.
std::vector<std::string> stacks_of(const StacksReport& rep, const std::string& action, bool off_cpu = false) {
  std::vector<std::string> out;
  for (auto& p : rep.processes)
    for (auto& prof : off_cpu ? p.off_cpu : p.on_cpu) {
      if (prof.name != action) continue;
      for (auto& s : prof.stacks) {
        std::string line;
        for (auto f : s.frames) line += (line.empty() ? "" : ";") + prof.frames[f].function;
        out.push_back(line);
      }
    }
  return out;
}

using V = std::vector<std::string>;

}  // namespace

TEST(StackCut, AtTheRecordedDepthEvenWhenTheFunctionRecurses) {
  // root 0x100, 0x300, 0x300, 0x400: the opening frame is the second 0x300
  auto e = make_sample(LT_EV_PY_SAMPLE, 1, 1, {0x100, 0x300, 0x300, 0x400});
  auto c = cut_at_origin(e, {0x300, 7, 3});
  EXPECT_EQ(c.how, CutHow::at_depth);
  EXPECT_EQ(c.keep, 1u);  // only 0x400
  c = cut_at_origin(e, {0x300, 7, 2});
  EXPECT_EQ(c.how, CutHow::at_depth);
  EXPECT_EQ(c.keep, 2u);
  // a checksum that differs is another code object at the same address
  EXPECT_EQ(cut_at_origin(e, {0x300, 8, 2}).how, CutHow::not_found);
  EXPECT_EQ(cut_at_origin(e, {0x300, 8, 2}).keep, 4u);
  EXPECT_EQ(cut_at_origin(e, {}).how, CutHow::none);
  EXPECT_EQ(cut_at_origin(e, {}).keep, 4u);
}

TEST(StackCut, TruncatedStacksMatchTheOutermostFrameRunningTheCode) {
  // the root side is gone: the depth (5) cannot be checked
  auto e = make_sample(LT_EV_PY_SAMPLE, 1, 1, {0x300, 0x400, 0x300, 0x500}, LT_SAMPLE_TRUNCATED);
  auto c = cut_at_origin(e, {0x300, 7, 5});
  EXPECT_EQ(c.how, CutHow::by_code);
  EXPECT_EQ(c.keep, 3u);  // 0x400, 0x300, 0x500: everything that may be inside
  // the opening frame itself was cut off: nothing to cut at
  EXPECT_EQ(cut_at_origin(e, {0x600, 7, 5}).how, CutHow::not_found);
  // a whole stack whose depth does not match falls back to the code too
  auto w = make_sample(LT_EV_PY_SAMPLE, 1, 1, {0x100, 0x200, 0x300, 0x400});
  c = cut_at_origin(w, {0x300, 7, 9});
  EXPECT_EQ(c.how, CutHow::by_code);
  EXPECT_EQ(c.keep, 1u);
}

TEST(StackCut, EachSampleStartsBelowTheFrameThatOpenedItsInnermostAction) {
  Stream s;
  s.setup();
  // outer action opened by _run_stage (depth 2), inner by _call_strategy_hook (depth 3)
  s.action(LT_EV_ACTION_BEGIN, 1 * ms, 1, 0xa, "outer");
  s.origin(1 * ms, 1, 0xa, 0x200, 2);
  s.sample(2 * ms, 1, {0x100, 0x200, 0x500});
  s.action(LT_EV_ACTION_BEGIN, 3 * ms, 1, 0xb, "inner");
  s.origin(3 * ms, 1, 0xb, 0x300, 3);
  s.sample(4 * ms, 1, {0x100, 0x200, 0x300, 0x400, 0x500, 0x600});
  s.sample(4 * ms, 1, {0x100, 0x200, 0x300});         // in the opening frame's own code
  s.sample(4 * ms, 2, {0x100, 0x200, 0x300, 0x400});  // another thread: no action
  s.action(LT_EV_ACTION_END, 5 * ms, 1, 0xb);
  s.sample(6 * ms, 1, {0x100, 0x200, 0x400});  // the outer one collects again
  s.action(LT_EV_ACTION_END, 7 * ms, 1, 0xa);
  s.actions.finish();
  auto rep = s.stacks.finish();
  EXPECT_EQ(stacks_of(rep, "inner"), (V{"training_step;forward;linear", "[action's own frame]"}));
  EXPECT_EQ(stacks_of(rep, "outer"), (V{"forward", "training_step"}));
  EXPECT_EQ(stacks_of(rep, kNoAction), (V{"<module>;_run_stage;_call_strategy_hook;training_step"}));
  EXPECT_EQ(rep.processes.at(0).uncut, 0u);
  EXPECT_EQ(rep.processes.at(0).no_origin, 0u);  // no action: not counted
}

TEST(StackCut, FullStacksKeepEveryFrame) {
  Stream s(true);
  s.setup();
  s.action(LT_EV_ACTION_BEGIN, 1 * ms, 1, 0xa, "outer");
  s.origin(1 * ms, 1, 0xa, 0x200, 2);
  s.sample(2 * ms, 1, {0x100, 0x200, 0x500});
  s.actions.finish();
  EXPECT_EQ(stacks_of(s.stacks.finish(), "outer"), (V{"<module>;_run_stage;forward"}));
}

TEST(StackCut, TracesWithoutOriginsAndUnmatchedStacksStayWhole) {
  Stream s;
  s.setup();
  s.action(LT_EV_ACTION_BEGIN, 1 * ms, 1, 0xa, "old");  // an older trace: no ACTION_ORIGIN
  s.sample(2 * ms, 1, {0x100, 0x200, 0x500});
  s.action(LT_EV_ACTION_END, 3 * ms, 1, 0xa);
  s.action(LT_EV_ACTION_BEGIN, 4 * ms, 1, 0xb, "odd");
  s.origin(4 * ms, 1, 0xb, 0x300, 3);
  s.sample(5 * ms, 1, {0x100, 0x200, 0x500});  // no frame runs 0x300: kept whole, counted
  s.action(LT_EV_ACTION_END, 6 * ms, 1, 0xb);
  s.actions.finish();
  auto rep = s.stacks.finish();
  EXPECT_EQ(stacks_of(rep, "old"), (V{"<module>;_run_stage;forward"}));
  EXPECT_EQ(stacks_of(rep, "odd"), (V{"<module>;_run_stage;forward"}));
  EXPECT_EQ(rep.processes.at(0).uncut, 1u);
  EXPECT_EQ(rep.processes.at(0).no_origin, 1u);  // the older trace's: counted apart
}

TEST(StackCut, TruncatedStacksLoseTheirMarkerOnceCut) {
  Stream s;
  s.setup();
  s.action(LT_EV_ACTION_BEGIN, 1 * ms, 1, 0xa, "deep");
  s.origin(1 * ms, 1, 0xa, 0x300, 150);
  s.sample(2 * ms, 1, {0x200, 0x300, 0x400}, LT_SAMPLE_TRUNCATED);
  s.sample(2 * ms, 1, {0x400, 0x500}, LT_SAMPLE_TRUNCATED);  // opening frame beyond the kept ones
  s.actions.finish();
  EXPECT_EQ(stacks_of(s.stacks.finish(), "deep"), (V{"training_step", "[truncated];training_step;forward"}));
}

TEST(StackCut, OffCpuStacksAndFetchesAreCutToo) {
  Stream s;
  s.setup();
  s.action(LT_EV_FETCH_BEGIN, 1 * ms, 1, 0xf);
  s.origin(1 * ms, 1, 0xf, 0x200, 2, LT_EV_FETCH_BEGIN);
  s.sample(2 * ms, 1, {0x100, 0x200, 0x500, 0x600}, 0, LT_EV_OFFCPU_BEGIN);
  lt_offcpu_end_event end{};
  end.hdr = {LT_EV_OFFCPU_END, sizeof end, kPid, 1, 0, 5 * ms};
  end.begin_ns = 2 * ms;
  s.feed(end);
  s.actions.finish();
  EXPECT_EQ(stacks_of(s.stacks.finish(), "[_TrainingEpochLoop].train_dataloader_next", true), (V{"forward;linear"}));
}
