// torch.compile on synthetic records and texts: compile ids from region op
// names, recompilations (a frame's new id running after an older one), the
// kernels first called in a recompiled graph; and the kernel names read from
// inductor's generated modules.
#include "reports/aggregate/compiles.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

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
