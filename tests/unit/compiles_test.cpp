// torch.compile on synthetic records and texts: compile ids from region op
// names, recompilations (a frame's new id running after an older one), the
// kernels first called in a recompiled graph; and the kernel names read from
// inductor's generated modules.
#include "reports/aggregate/compiles.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "reports/aggregate/actions.h"
#include "reports/ops/compile_section.h"
#include "user/model/stack_profile.h"
#include "user/torch/compiled_code.h"

using namespace lt;

namespace {

constexpr std::uint64_t ms = 1'000'000;
constexpr std::uint32_t kPid = 7;

struct Stream {
  CompileAggregator agg;
  template <typename R>
  void feed(const R& r) {
    agg.add(r.hdr, reinterpret_cast<const std::byte*>(&r));
  }
  void name(std::uint32_t op, const char* n) {
    lt_op_name_event e{};
    e.hdr = {LT_EV_OP_NAME, sizeof e, 0, 0, 0, 1};
    e.op = op;
    std::strncpy(e.name, n, sizeof e.name - 1);
    feed(e);
  }
  void op(std::uint32_t op, std::uint64_t ts, std::uint16_t depth = 1) {
    lt_op_event e{};
    e.hdr = {LT_EV_OP, sizeof e, kPid, kPid, 0, ts};
    e.op = op;
    e.depth = depth;
    feed(e);
  }
  void window(std::uint64_t ts) {
    lt_window_event w{};
    w.hdr = {LT_EV_WINDOW, sizeof w, kPid, kPid, 0, ts};
    w.begin = 1;
    feed(w);
  }
};

}  // namespace

TEST(Compiles, RegionNames) {
  unsigned f = 9, c = 9;
  EXPECT_TRUE(parse_region_name("Torch-Compiled Region: 12/3", f, c));
  EXPECT_EQ(f, 12u);
  EXPECT_EQ(c, 3u);
  EXPECT_FALSE(parse_region_name("Torch-Compiled Region", f, c));
  EXPECT_FALSE(parse_region_name("Torch-Compiled Region: 0/", f, c));
  EXPECT_FALSE(parse_region_name("Torch-Compiled Region: 0/0_1", f, c));
  EXPECT_FALSE(parse_region_name("aten::mm", f, c));
}

TEST(Compiles, CallsAndRecompiles) {
  Stream s;
  s.window(100 * ms);
  s.name(1, "Torch-Compiled Region: 0/0");
  s.name(2, "Torch-Compiled Region: 0/1");
  s.name(3, "cpp_fused_relu_0");
  s.name(4, "cpp_fused_relu_0");  // the new graph's own library, same name
  s.name(5, "aten::addmm");
  s.name(6, "Torch-Compiled Region: 1/0");
  for (int i = 0; i < 3; ++i) {
    s.op(1, (200 + i) * ms);
    s.op(5, (200 + i) * ms + 1, 2);
    s.op(3, (200 + i) * ms + 2, 2);
  }
  s.op(6, 250 * ms);  // another frame's first graph: no recompile
  s.op(2, 300 * ms);
  s.op(4, 300 * ms + 2, 2);
  s.op(2, 301 * ms);
  s.op(4, 301 * ms + 2, 2);
  s.op(1, 302 * ms);  // back to the old shape: not a new graph
  const CompilesReport r = s.agg.finish();
  ASSERT_EQ(r.procs.count(kPid), 1u);
  const auto& p = r.procs.at(kPid);
  ASSERT_EQ(p.regions.size(), 3u);
  EXPECT_EQ(p.regions[0].calls, 4u);
  EXPECT_EQ(p.regions[1].calls, 2u);
  EXPECT_EQ(p.regions[1].first_ns, 300 * ms);
  ASSERT_EQ(p.recompiles.size(), 1u);
  EXPECT_EQ(p.recompiles[0].frame, 0u);
  EXPECT_EQ(p.recompiles[0].compile, 1u);
  EXPECT_EQ(p.recompiles[0].after, 0u);
  EXPECT_EQ(p.recompiles[0].at_ns, 300 * ms);
  EXPECT_EQ(p.recompiles[0].kernels, std::vector<std::string>{"cpp_fused_relu_0"});
  const std::string text = render_compile_section(kPid, p, r.window_begin_ns);
  EXPECT_NE(text.find("Torch-Compiled Region: 0/1" + std::string(14, ' ') + "2  +0.200 s"), std::string::npos) << text;
  EXPECT_NE(text.find("Recompilations seen while attached: 1"), std::string::npos) << text;
  EXPECT_NE(text.find("+0.200 s  frame 0 recompiled: graph 0/1 first ran after graph 0/0"), std::string::npos) << text;
}

TEST(Compiles, NothingWithoutRegions) {
  Stream s;
  s.name(5, "aten::addmm");
  s.op(5, 1 * ms);
  EXPECT_TRUE(s.agg.finish().empty());
}

TEST(Compiles, KernelNamesFromGeneratedModule) {
  const std::string module =
      "async_compile = AsyncCompile()\n"
      "cpp_fused_relu_0 = async_compile.cpp_pybinding(['float*'], r'''\n"
      "#include <x.h>\n"
      "extern \"C\" void kernel(float* in_out_ptr0) { relu(); }\n"
      "''')\n"
      "\n"
      "cpp_fused__log_softmax_2 = async_compile.cpp_pybinding(['float*', 'float*'], r'''\n"
      "extern \"C\" void kernel(float* a, float* b) { softmax(); }\n"
      "''')\n"
      "async_compile.wait(globals())\n";
  auto k = compiled_code_detail::pybinding_kernels(module);
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k[0].first, "cpp_fused_relu_0");
  EXPECT_EQ(k[1].first, "cpp_fused__log_softmax_2");
  const std::string cpp = "// header\n#include <x.h>\nextern \"C\" void kernel(float* a, float* b) { softmax(); }\n";
  EXPECT_EQ(compiled_code_detail::kernel_name_for(cpp, k), "cpp_fused__log_softmax_2");
  EXPECT_EQ(compiled_code_detail::kernel_name_for("nothing", k), "");
}

TEST(Compiles, GraphBreakResumeFunctionsShowTheUsersFunction) {
  EXPECT_EQ(python_function_name("MLP.torch_dynamo_resume_in_forward_at_9"), "MLP.forward [after graph break]");
  EXPECT_EQ(python_function_name("torch_dynamo_resume_in_step_at_120"), "step [after graph break]");
  // A break inside a resume function nests the prefix.
  EXPECT_EQ(python_function_name("M.torch_dynamo_resume_in_torch_dynamo_resume_in_forward_at_9_at_12"),
            "M.forward [after graph break]");
  // Anything else, or not quite Dynamo's shape, stays as it is.
  EXPECT_EQ(python_function_name("MLP.forward"), "MLP.forward");
  EXPECT_EQ(python_function_name("torch_dynamo_resume_in_forward_at_"), "torch_dynamo_resume_in_forward_at_");
  EXPECT_EQ(python_function_name("torch_dynamo_resume_in_forward_at_x1"), "torch_dynamo_resume_in_forward_at_x1");
  EXPECT_EQ(python_function_name("my_torch_dynamo_resume_in_f_at_1"), "my_torch_dynamo_resume_in_f_at_1");
}

TEST(Compiles, GraphBreaksFromResumeFrames) {
  CompilesProcess p;
  p.regions.push_back({.frame = 0, .compile = 0, .calls = 5, .first_ns = 0, .function = "MLP.forward (m.py:35)"});
  p.regions.push_back(
      {.frame = 1, .compile = 0, .calls = 5, .first_ns = 0, .function = "MLP.forward [after graph break] (m.py:38)"});
  p.regions.push_back(
      {.frame = 1, .compile = 1, .calls = 1, .first_ns = 0, .function = "MLP.forward [after graph break] (m.py:38)"});
  const std::string text = render_compile_section(kPid, p, 0);
  EXPECT_NE(text.find("Graph breaks seen (a frame resuming a function after a break): 1\n"
                      "  frame 1: MLP.forward [after graph break] (m.py:38)"),
            std::string::npos)
      << text;
  p.regions.resize(1);
  EXPECT_EQ(render_compile_section(kPid, p, 0).find("Graph breaks"), std::string::npos);
}

// What Dynamo recorded (COMPILE_NOTE) joined to the recompile seen, by
// compile id; the recompile charged to the Lightning action open where it
// first ran; a compile before the attach listed with a negative start; the
// graph breaks with their counts, the larger of two reads kept.
TEST(Compiles, DynamoNotesJoinRecompilesAndActions) {
  ActionAggregator actions(false);
  CompileAggregator agg(&actions);
  auto feed = [&](const auto& r) {
    actions.add(r.hdr, reinterpret_cast<const std::byte*>(&r));
    agg.add(r.hdr, reinterpret_cast<const std::byte*>(&r));
  };
  lt_host_info_event host{};
  host.hdr = {LT_EV_HOST_INFO, sizeof host, 0, 0, 0, 1};
  host.monotonic_ns = 1000 * ms;
  host.realtime_ns = 1'796'214'800'000 * ms;  // wall = mono + 1796214799 s
  feed(host);
  lt_window_event w{};
  w.hdr = {LT_EV_WINDOW, sizeof w, kPid, kPid, 0, 2000 * ms};
  w.begin = 1;
  feed(w);
  auto name = [&](std::uint32_t op, const char* n) {
    lt_op_name_event e{};
    e.hdr = {LT_EV_OP_NAME, sizeof e, 0, 0, 0, 1};
    e.op = op;
    std::strncpy(e.name, n, sizeof e.name - 1);
    feed(e);
  };
  auto op = [&](std::uint32_t o, std::uint64_t ts) {
    lt_op_event e{};
    e.hdr = {LT_EV_OP, sizeof e, kPid, kPid, 0, ts};
    e.op = o;
    e.depth = 1;
    feed(e);
  };
  auto action = [&](lt_event_kind kind, std::uint64_t ts, const char* n) {
    lt_action_event e{};
    e.hdr = {static_cast<u16>(kind), sizeof e, kPid, kPid, 0, ts};
    e.key = 42;
    std::strncpy(e.name, n, sizeof e.name - 1);
    feed(e);
  };
  auto note = [&](const char* id, std::int64_t wall_us, const char* reason, std::int64_t count = 1,
                  unsigned what = LT_COMPILE_NOTE_COMPILE) {
    lt_compile_note_event e{};
    e.hdr = {LT_EV_COMPILE_NOTE, sizeof e, kPid, kPid, 0, 9000 * ms};
    e.what = what;
    e.start_wall_us = wall_us;
    e.duration_us = 1'310'689;
    e.count = count;
    e.first_line = 31;
    std::strncpy(e.compile_id, id, sizeof e.compile_id - 1);
    std::strncpy(e.function, "forward", sizeof e.function - 1);
    std::strncpy(e.file, "/job/model.py", sizeof e.file - 1);
    std::strncpy(e.reason, reason, sizeof e.reason - 1);
    feed(e);
  };
  name(1, "Torch-Compiled Region: 0/0");
  name(2, "Torch-Compiled Region: 0/1");
  op(1, 2100 * ms);
  action(LT_EV_ACTION_BEGIN, 2990 * ms, "[LightningModule]M.training_step");
  op(2, 3000 * ms);  // the recompile, inside training_step
  action(LT_EV_ACTION_END, 3010 * ms, "");
  // 0/0 compiled 1.5 s before the attach (mono 500 ms), 0/1 at mono 2700 ms.
  note("0/0", 1'796'214'799'500'000, "");
  note("0/1", 1'796'214'801'700'000, "0/0: tensor 'x' size mismatch at index 0. expected 64, actual 48");
  note("", 0, "Call to `torch._dynamo.graph_break()`\n  Explanation: User-inserted graph break.\n  Hint: x", 2,
       LT_COMPILE_NOTE_GRAPH_BREAK);
  note("", 0, "Call to `torch._dynamo.graph_break()`\n  Explanation: User-inserted graph break.\n  Hint: x", 5,
       LT_COMPILE_NOTE_GRAPH_BREAK);
  const CompilesReport r = agg.finish();
  const auto& p = r.procs.at(kPid);
  ASSERT_EQ(p.recompiles.size(), 1u);
  EXPECT_EQ(p.recompiles[0].action, "[LightningModule]M.training_step");
  ASSERT_EQ(p.compiles.size(), 2u);
  EXPECT_EQ(p.compiles[0].id, "0/0");
  EXPECT_EQ(p.compiles[0].start_ns, 500 * static_cast<std::int64_t>(ms));
  ASSERT_EQ(p.recompiles[0].note, 1);
  ASSERT_EQ(p.graph_breaks.size(), 1u);
  EXPECT_EQ(p.graph_breaks[0].count, 5);
  const std::string text = render_compile_section(kPid, p, r.window_begin_ns);
  for (const char* want :
       {"+1.000 s  frame 0 recompiled in [LightningModule]M.training_step: graph 0/1 first ran after graph 0/0\n"
        "    reason (Dynamo's recompile_reason): 0/0: tensor 'x' size mismatch at index 0. expected 64, actual 48\n"
        "    the compile took 1.311 s\n",
        "Recompilations per Lightning action: [LightningModule]M.training_step 1\n",
        "  0/0      -1.500 s    1.311 s       1  forward (/job/model.py:31)\n", "first compile of this frame\n",
        "  0/1      +0.700 s", "       5  Call to `torch._dynamo.graph_break()` -- User-inserted graph break.\n"})
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n---\n" << text;
}

// A recompile with no compile log read says why its reason is missing.
TEST(Compiles, RecompileWithoutDynamoLogSaysWhy) {
  CompilesProcess p;
  p.regions.push_back({.frame = 0, .compile = 0, .calls = 5, .first_ns = 0, .function = ""});
  p.recompiles.push_back({0, 1, 0, 0, "", {}, "", -1});
  const std::string text = render_compile_section(kPid, p, 0);
  EXPECT_NE(text.find("reason: not in what Dynamo kept (no compile log was read"), std::string::npos) << text;
}

// CUDA graph replays: a cudaGraphLaunch inside a compiled region is charged
// to it (innermost region of the launch's op stack), its kernels (graph id
// set, the replay's correlation id) too; a replay outside every region and
// an ordinary launch's kernel are kept apart.
TEST(Compiles, CudaGraphReplaysGoToTheReplayingRegion) {
  Stream s;
  s.name(1, "Torch-Compiled Region: 0/0");
  s.name(2, "aten::addmm");
  s.op(1, 10 * ms);
  auto launch = [&](std::uint32_t corr, std::uint16_t api, std::vector<std::uint32_t> ops) {
    lt_gpu_launch_event e{};
    e.hdr = {LT_EV_GPU_LAUNCH, sizeof e, kPid, kPid, 0, 11 * ms};
    e.correlation = corr;
    e.source = LT_LAUNCH_CUPTI;
    e.api = api;
    e.nops = static_cast<std::uint16_t>(ops.size());
    for (std::size_t i = 0; i < ops.size(); ++i) e.ops[i] = ops[i];
    s.feed(e);
  };
  auto kernel = [&](std::uint32_t corr, std::uint32_t graph, std::uint64_t start, std::uint64_t end) {
    lt_gpu_activity_event e{};
    e.hdr = {LT_EV_GPU_ACTIVITY, sizeof e, kPid, kPid, 0, 20 * ms};
    e.a.kind = LT_GPU_KERNEL;
    e.a.correlation = corr;
    e.a.graph_id = graph;
    e.a.start_ns = start;
    e.a.end_ns = end;
    s.feed(e);
  };
  launch(100, LT_API_GRAPH_LAUNCH, {1, 2});  // innermost region: 0/0, under an op it calls
  launch(101, LT_API_GRAPH_LAUNCH, {1});
  launch(102, LT_API_LAUNCH, {1});        // an ordinary launch: not a replay
  launch(103, LT_API_GRAPH_LAUNCH, {2});  // outside every region
  kernel(100, 7, 1000, 3000);
  kernel(100, 7, 3000, 4000);
  kernel(101, 7, 5000, 8000);
  kernel(102, 0, 5000, 9000);  // not from a graph
  kernel(103, 8, 5000, 6000);
  kernel(999, 7, 5000, 6000);  // no replay seen for it
  const CompilesReport r = s.agg.finish();
  const auto& p = r.procs.at(kPid);
  ASSERT_EQ(p.regions.size(), 1u);
  EXPECT_EQ(p.regions[0].graph_replays, 2u);
  EXPECT_EQ(p.regions[0].graph_kernels, 3u);
  EXPECT_EQ(p.regions[0].graph_kernel_ns, 6000u);
  EXPECT_EQ(p.graph_replays_outside, 1u);
  EXPECT_EQ(p.graph_kernels_outside, 1u);
  const std::string text = render_compile_section(kPid, p, 0);
  EXPECT_NE(text.find("  Torch-Compiled Region: 0/0              2        3  0.006 ms\n"
                      "  outside compiled regions                1        1\n"),
            std::string::npos)
      << text;
}

// Names and reasons from a trace stay on their line; a crafted start time
// that would overflow is left unknown, not wrapped.
TEST(Compiles, CraftedNotesStayOnTheirLines) {
  Stream s;
  lt_host_info_event host{};
  host.hdr = {LT_EV_HOST_INFO, sizeof host, 0, 0, 0, 1};
  host.monotonic_ns = 1;
  host.realtime_ns = 1ull << 61;
  s.feed(host);
  lt_compile_note_event e{};
  e.hdr = {LT_EV_COMPILE_NOTE, sizeof e, kPid, kPid, 0, 5};
  e.what = LT_COMPILE_NOTE_COMPILE;
  e.start_wall_us = INT64_MAX;
  e.duration_us = -1;
  e.count = -1;
  std::strncpy(e.compile_id, "0/0", sizeof e.compile_id - 1);
  std::strncpy(e.function, "f\nTorch-Compiled Region: 9/9", sizeof e.function - 1);
  std::strncpy(e.reason, "a\r\tb", sizeof e.reason - 1);
  s.feed(e);
  const CompilesReport r = s.agg.finish();
  const auto& p = r.procs.at(kPid);
  ASSERT_EQ(p.compiles.size(), 1u);
  EXPECT_EQ(p.compiles[0].start_ns, 0);
  const std::string text = render_compile_section(kPid, p, 0);
  EXPECT_EQ(text.find("\nTorch-Compiled Region: 9/9"), std::string::npos) << text;
  EXPECT_NE(text.find("f\\x0aTorch-Compiled Region: 9/9"), std::string::npos) << text;
  EXPECT_NE(text.find("recompiled: a\\x0d\\x09b\n"), std::string::npos) << text;
}

// Samples in a compiled region are eager when the innermost compiled
// function called neither a graph (fx, AOTAutograd, inductor code past
// Dynamo's eval_frame wrappers) nor is compiling (convert_frame); a sample
// outside any region, or in a function Dynamo did not compile, is not.
TEST(Compiles, EagerSamplesBetweenGraphs) {
  Stream s;
  auto code = [&](std::uint64_t addr, const char* name, const char* file, int first) {
    lt_py_code_event c{};
    c.hdr = {LT_EV_PY_CODE, sizeof c, kPid, kPid, 0, 1};
    c.code = addr;
    c.checksum = 1;
    c.first_line = first;
    std::strncpy(c.name, name, sizeof c.name - 1);
    std::strncpy(c.file, file, sizeof c.file - 1);
    s.feed(c);
    lt_py_line_event l{};
    l.hdr = {LT_EV_PY_LINE, sizeof l, kPid, kPid, 0, 1};
    l.code = addr;
    l.checksum = 1;
    l.lasti = 8;
    l.line = first + 3;
    s.feed(l);
  };
  code(0x10, "Net.forward", "/src/net.py", 50);
  code(0x20, "DisableContext.__call__.<locals>._fn", "/t/torch/_dynamo/eval_frame.py", 1540);
  code(0x30, "forward", "<eval_with_key>.3", 4);
  code(0x40, "host_work", "/src/net.py", 30);
  code(0x50, "CompiledFxGraph.__call__", "/t/torch/_inductor/output_code.py", 600);
  code(0x60, "ConvertFrame.__call__", "/t/torch/_dynamo/convert_frame.py", 1400);
  code(0x70, "training_step", "/src/net.py", 70);
  s.name(1, "Torch-Compiled Region: 0/0");
  s.name(2, "aten::addmm");
  lt_region_code_event rc{};
  rc.hdr = {LT_EV_REGION_CODE, sizeof rc, kPid, kPid, 0, 9 * ms};
  rc.op = 1;
  rc.code = 0x10;
  rc.checksum = 1;
  s.feed(rc);
  s.op(1, 10 * ms);
  lt_sampler_info_event info{};
  info.hdr = {LT_EV_SAMPLER_INFO, sizeof info, kPid, kPid, 0, 1};
  info.period_ns = ms;
  info.flags = LT_SAMPLER_ON_CPU;
  s.feed(info);
  auto sample = [&](std::uint64_t ts, std::vector<std::uint64_t> leaf_first, std::vector<std::uint32_t> ops,
                    std::uint16_t flags = 0) {
    lt_py_sample_event e{};
    e.hdr = {LT_EV_PY_SAMPLE, sizeof e, kPid, kPid, 0, ts};
    e.flags = flags;
    e.nframes = static_cast<std::uint16_t>(leaf_first.size());
    for (std::size_t i = 0; i < leaf_first.size(); ++i) e.frames[i] = {leaf_first[i], 8, 1};
    e.nops = static_cast<std::uint16_t>(ops.size());
    for (std::size_t i = 0; i < ops.size(); ++i) e.ops[i] = ops[i];
    s.feed(e);
  };
  sample(11 * ms, {0x40, 0x20, 0x10, 0x70}, {1});     // eager: a disabled function, past its wrapper
  sample(12 * ms, {0x10, 0x70}, {1, 2});              // eager: in the transformed code itself (an op it calls)
  sample(13 * ms, {0x30, 0x20, 0x10, 0x70}, {1, 2});  // a graph (fx), past the wrapper
  sample(14 * ms, {0x50, 0x20, 0x10, 0x70}, {1});     // a graph (inductor)
  sample(15 * ms, {0x60, 0x10, 0x70}, {1});           // compiling
  sample(16 * ms, {0x40, 0x10, 0x70}, {});            // not in a region: the function run eagerly by choice
  sample(17 * ms, {0x40, 0x70}, {1});                 // not in the compiled function
  sample(18 * ms, {0x40, 0x20, 0x10, 0x70}, {1}, LT_SAMPLE_IN_PROBE);  // our own cost
  const CompilesReport r = s.agg.finish();
  const auto& p = r.procs.at(kPid);
  ASSERT_EQ(p.eager.size(), 2u);
  EXPECT_EQ(p.eager[0].ts_ns, 11 * ms);
  EXPECT_EQ(p.eager[1].ts_ns, 12 * ms);
  ASSERT_EQ(p.eager_sites.size(), 1u);
  EXPECT_EQ(p.eager_sites[0], "Net.forward (/src/net.py:53)");  // the line it was at, not the first
  EXPECT_EQ(p.period_ns, ms);
}
