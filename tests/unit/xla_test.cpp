// torch_xla on synthetic records: calls counted per action at their entry,
// timers paired to their calls (same thread; an execution completing on a
// runtime thread; the section's own start where it was read), step marks,
// recompilations (a compile after the graphs had settled, in an action that
// ran graphs before) and the text; and the site table, device and version
// helpers of the tracer.
#include "reports/aggregate/xla.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "reports/aggregate/actions.h"
#include "reports/xla/xla_report.h"
#include "user/collector/xla_tracer.h"
#include "user/torch/xla_sites.h"

using namespace lt;

namespace {

constexpr std::uint64_t us = 1'000;
constexpr std::uint32_t kPid = 40;
constexpr std::uint32_t kRuntime = 41;  // a PJRT runtime thread
constexpr const char* kOpt = "[LightningModule]M.optimizer_step";
constexpr const char* kVal = "[LightningModule]M.on_validation_batch_end";
constexpr std::uint64_t kCompileTime = 0x1000, kExecuteTime = 0x2000, kToDevice = 0x3000, kOther = 0x4000;

struct Stream {
  ActionAggregator actions;
  XlaAggregator xla{actions};
  std::uint64_t ts = 1'000'000;
  template <typename R>
  void feed(const R& r) {
    actions.add(r.hdr, reinterpret_cast<const std::byte*>(&r));
    xla.add(r.hdr, reinterpret_cast<const std::byte*>(&r));
  }
  void action(lt_event_kind kind, std::uint64_t key, const char* n = "") {
    lt_action_event e{};
    e.hdr = {static_cast<u16>(kind), sizeof e, kPid, kPid, 0, ts += us};
    e.key = key;
    std::strncpy(e.name, n, sizeof e.name - 1);
    feed(e);
  }
  void name(std::uint64_t metric, const char* n) {
    lt_xla_metric_name_event e{};
    e.hdr = {LT_EV_XLA_METRIC_NAME, sizeof e, kPid, kPid, 0, ts};
    e.metric = metric;
    std::strncpy(e.name, n, sizeof e.name - 1);
    feed(e);
  }
  void rec(std::uint32_t site, std::uint64_t obj = 0, std::uint64_t arg = 0, std::uint32_t tid = kPid,
           std::uint64_t advance = us) {
    lt_xla_event e{};
    e.hdr = {LT_EV_XLA, sizeof e, kPid, tid, 0, ts += advance};
    e.site = site;
    e.obj = obj;
    e.arg = arg;
    feed(e);
  }
  // A synchronous call of `site` whose inlined timer `metric` ends `ns` later.
  void sync_call(std::uint32_t site, std::uint64_t metric, std::uint64_t ns, std::uint64_t tensors = 0) {
    rec(site, 0xc11e, tensors);
    rec(LT_XLA_METRIC_SAMPLE, metric, 0, kPid, ns);
  }
  // An execution whose timer (start read at its destructor) ends on the
  // runtime thread after `ns` of torch_xla's own clock.
  void execution(std::uint64_t ns) {
    rec(LT_XLA_EXECUTE, 0xc11e);
    const std::uint64_t start = 5'000'000'000;
    rec(LT_XLA_TIMED_END, kExecuteTime, start, kRuntime, 3 * us);
    rec(LT_XLA_METRIC_SAMPLE, kExecuteTime, start + ns, kRuntime, 0);
  }
  // One training step: its optimizer_step runs the graph (compiling it
  // first when asked) and marks the step.
  void step(std::uint64_t key, bool compile) {
    action(LT_EV_ACTION_BEGIN, key, kOpt);
    if (compile) sync_call(LT_XLA_COMPILE, kCompileTime, 100'000 * us);
    execution(2'000 * us);
    rec(LT_XLA_MARK_STEP, 0xe7ec);
    action(LT_EV_ACTION_END, key);
  }
};

const XlaRow* row(const XlaProcess& p, const std::string& action) {
  for (const auto& r : p.actions)
    if (r.action == action) return &r;
  return nullptr;
}

}  // namespace

TEST(Xla, CallsTimesStepsAndRecompilesPerAction) {
  Stream s;
  s.name(kCompileTime, "CompileTime");
  s.name(kExecuteTime, "ExecuteTime");
  s.name(kToDevice, "TransferToDeviceTime");
  s.name(kOther, "DeviceLockWait");
  // Outside every action: the model moves to the device (2 tensors).
  s.sync_call(LT_XLA_TO_DEVICE, kToDevice, 40 * us, 2);
  s.rec(LT_XLA_METRIC_SAMPLE, kOther, 0);  // a timer of no call kind: counted, pairs nothing
  s.step(1, true);                         // step 1 compiles
  s.step(2, false);
  s.step(3, false);  // settled
  s.step(4, true);   // a new shape: a recompilation
  s.step(5, false);
  // Validation's first graph: compiled after the settling, but in an action
  // that never ran a graph before: no recompilation.
  s.action(LT_EV_ACTION_BEGIN, 9, kVal);
  s.sync_call(LT_XLA_COMPILE, kCompileTime, 50'000 * us);
  s.execution(1'000 * us);
  s.rec(LT_XLA_MARK_STEP, 0xe7ec);
  s.action(LT_EV_ACTION_END, 9);
  // A timer end whose call began before the attach (nothing waits).
  s.rec(LT_XLA_METRIC_SAMPLE, kCompileTime, 0, kPid, 10 * us);

  const XlaReport rep = s.xla.finish();
  ASSERT_EQ(rep.procs.size(), 1u);
  const XlaProcess& p = rep.procs.at(kPid);
  EXPECT_EQ(p.total.compiles.calls, 3u);
  EXPECT_EQ(p.total.compiles.timed, 3u);
  EXPECT_EQ(p.total.compiles.ns, 250'000 * us);
  EXPECT_EQ(p.total.executions.calls, 6u);
  EXPECT_EQ(p.total.executions.timed, 6u);
  EXPECT_EQ(p.total.executions.ns, 5 * 2'000 * us + 1'000 * us);  // the sections' own times
  EXPECT_EQ(p.total.to_device.calls, 1u);
  EXPECT_EQ(p.total.to_device.tensors, 2u);
  EXPECT_EQ(p.total.to_device.ns, 40 * us);
  EXPECT_EQ(p.total.mark_steps, 6u);
  EXPECT_EQ(p.ends_unpaired, 1u);
  EXPECT_EQ(p.timers.at("CompileTime"), 4u);
  EXPECT_EQ(p.timers.at("DeviceLockWait"), 1u);

  const XlaRow* opt = row(p, kOpt);
  ASSERT_NE(opt, nullptr);
  EXPECT_EQ(opt->compiles.calls, 2u);
  EXPECT_EQ(opt->executions.calls, 5u);
  EXPECT_EQ(opt->mark_steps, 5u);
  const XlaRow* val = row(p, kVal);
  ASSERT_NE(val, nullptr);
  EXPECT_EQ(val->compiles.ns, 50'000 * us);
  ASSERT_NE(row(p, "[no Lightning action]"), nullptr);

  ASSERT_EQ(p.compiles.size(), 3u);
  EXPECT_FALSE(p.compiles[0].recompile);
  EXPECT_EQ(p.compiles[0].step, 0u);
  EXPECT_TRUE(p.compiles[1].recompile);
  EXPECT_EQ(p.compiles[1].step, 3u);  // after three step marks: the 4th step
  EXPECT_EQ(p.compiles[1].action, kOpt);
  EXPECT_FALSE(p.compiles[2].recompile);
  EXPECT_EQ(p.recompiles(), 1u);

  const std::string text = render_xla_report(rep);
  EXPECT_NE(text.find("compiles: 3, recompilations: 1"), std::string::npos) << text;
  EXPECT_NE(text.find("recompilation\n"), std::string::npos) << text;
  EXPECT_NE(text.find("250.000"), std::string::npos) << text;  // the compile total (ms)
  EXPECT_NE(text.find("DeviceLockWait 1"), std::string::npos) << text;
  EXPECT_NE(text.find("1 timer ends of calls that began before the attach"), std::string::npos) << text;
}

TEST(Xla, UntimedCallsAndGapsPairNothing) {
  Stream s;
  s.name(kCompileTime, "CompileTime");
  s.name(kExecuteTime, "ExecuteTime");
  s.rec(LT_XLA_COMPILE, 0xc11e);
  s.xla.gap();  // the compile's end is in a damaged stretch
  s.rec(LT_XLA_METRIC_SAMPLE, kCompileTime, 0);
  // An execution whose timer ends on a runtime thread without its start
  // read (the section's destructor inlined): entry to end.
  s.rec(LT_XLA_EXECUTE, 0xc11e);
  s.rec(LT_XLA_METRIC_SAMPLE, kExecuteTime, 0, kRuntime, 700 * us);
  // A TimedSection that could not be read gives no exact time.
  s.rec(LT_XLA_EXECUTE, 0xc11e);
  lt_xla_event bad{};
  bad.hdr = {LT_EV_XLA, sizeof bad, kPid, kRuntime, 0, s.ts += us};
  bad.site = LT_XLA_TIMED_END;
  bad.flags = LT_XLA_UNREAD;
  s.feed(bad);
  s.rec(LT_XLA_METRIC_SAMPLE, kExecuteTime, 0, kRuntime, 99 * us);
  const XlaProcess& p = s.xla.finish().procs.at(kPid);
  EXPECT_EQ(p.total.compiles.calls, 1u);
  EXPECT_EQ(p.total.compiles.timed, 0u);
  EXPECT_EQ(p.ends_unpaired, 1u);
  EXPECT_EQ(p.total.executions.calls, 2u);
  EXPECT_EQ(p.total.executions.timed, 2u);
  EXPECT_EQ(p.total.executions.ns, 700 * us + 100 * us);
  const std::string text = render_xla_report({0, {{kPid, p}}});
  EXPECT_NE(text.find("compiles: 1, recompilations: 0"), std::string::npos) << text;
}

TEST(Xla, EmptyReportSaysWhy) {
  EXPECT_NE(render_xla_report({}).find("No torch_xla runtime calls"), std::string::npos);
}

TEST(XlaSites, TableOfMangledNames) {
  EXPECT_EQ(xla_site_kind("_ZN9torch_xla7runtime21PjRtComputationClient7CompileESt6vectorINS0_17ComputationClient15"
                          "CompileInstanceESaIS4_EE"),
            LT_XLA_COMPILE);
  EXPECT_EQ(xla_site_kind("_ZN9torch_xla7runtime21PjRtComputationClient7CompileESt6vectorINS0_17ComputationClient15"
                          "CompileInstanceESaIS4_EE.cold"),
            0u);
  EXPECT_EQ(xla_site_kind("_ZN9torch_xla16XLAGraphExecutor8MarkStepERKN5torch4lazy13BackendDeviceEb"),
            LT_XLA_MARK_STEP);
  EXPECT_EQ(xla_site_kind("_ZN9torch_xla7runtime7metrics6Metric9AddSampleEld"), LT_XLA_METRIC_SAMPLE);
  EXPECT_EQ(xla_site_kind("_ZN9torch_xla7runtime7metrics6Metric9AddSampleEd"), 0u);  // the value-only overload
  EXPECT_EQ(xla_site_kind("_ZN9torch_xla7runtime7metrics12TimedSectionD2Ev"), LT_XLA_TIMED_END);
  EXPECT_EQ(xla_site_kind("_ZN9torch_xla7runtime21PjRtComputationClient16TransferToDeviceEN4absl12lts_202505124Span"
                          "IKSt10shared_ptrIKNS0_12TensorSourceEEEE"),
            LT_XLA_TO_DEVICE);
  EXPECT_EQ(xla_timer_site("TransferToServerTime"), LT_XLA_TO_DEVICE);
  EXPECT_EQ(xla_timer_site("ExecuteTime"), LT_XLA_EXECUTE);
  EXPECT_EQ(xla_timer_site("InboundData"), 0u);
  EXPECT_NE(xla_sites_missing({}).find("Compile"), std::string::npos);
  EXPECT_EQ(xla_sites_missing({{1, LT_XLA_COMPILE, ""}, {2, LT_XLA_EXECUTE, ""}, {3, LT_XLA_METRIC_SAMPLE, ""}}), "");
}

TEST(XlaTracer, DeviceVersionAndMetricNames) {
  EXPECT_EQ(xla_device_of("TPU", {}), "TPU");
  EXPECT_EQ(xla_device_of("", {"/usr/lib/libc.so.6", "/site/libtpu/libtpu.so"}), "TPU");
  EXPECT_EQ(xla_device_of("", {"/site/torch_xla_cuda_plugin/lib/pjrt_c_api_gpu_plugin.so"}), "CUDA");
  EXPECT_EQ(xla_device_of("", {"/site/torch_xla/_XLAC.cpython-311-x86_64-linux-gnu.so"}), "CPU");
  EXPECT_EQ(xla_device_of("C\x01U", {}), "C?U");

  const auto dir = std::filesystem::temp_directory_path() / ("xla_version_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "torch_xla-2.9.0.dist-info");
  EXPECT_EQ(xla_version_of((dir / "_XLAC.cpython-311-x86_64-linux-gnu.so").string()), "2.9.0");
  EXPECT_EQ(xla_version_of("/nonexistent/_XLAC.so"), "");
  std::filesystem::remove_all(dir);

  EXPECT_EQ(xla_metric_name_text("CompileTime", 11), "CompileTime");
  EXPECT_EQ(xla_metric_name_text("Comp\xffTime", 9), "");
  EXPECT_EQ(xla_metric_name_text("x", 0), "");
}
