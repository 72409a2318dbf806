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
#include "user/proc/census.h"
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
  s.execution(1'000 * us);  // a cached graph first, in the same step: still its first step
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
  EXPECT_EQ(p.total.executions.calls, 7u);
  EXPECT_EQ(p.total.executions.timed, 7u);
  EXPECT_EQ(p.total.executions.ns, 5 * 2'000 * us + 2 * 1'000 * us);  // the sections' own times
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
  EXPECT_NE(text.find("compiles: 3, recompilations: 1, graph cache hits: 4"), std::string::npos) << text;
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
  const XlaReport rep = s.xla.finish();
  const XlaProcess& p = rep.procs.at(kPid);
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
  EXPECT_EQ(xla_site_kind("_ZN9torch_xla7runtime7metrics6Metric9AddSampleEd"), LT_XLA_METRIC_VALUE);
  EXPECT_EQ(xla_site_kind("_ZN9torch_xla7runtime7metrics12TimedSectionD2Ev"), LT_XLA_TIMED_END);
  EXPECT_EQ(xla_site_kind("_ZN9torch_xla7runtime21PjRtComputationClient16TransferToDeviceEN4absl12lts_202505124Span"
                          "IKSt10shared_ptrIKNS0_12TensorSourceEEEE"),
            LT_XLA_TO_DEVICE);
  EXPECT_EQ(xla_timer_site("TransferToServerTime"), LT_XLA_TO_DEVICE);
  EXPECT_EQ(xla_timer_site("ExecuteTime"), LT_XLA_EXECUTE);
  EXPECT_EQ(xla_timer_site("InboundData"), 0u);
  EXPECT_EQ(xla_bytes_site("InboundData"), LT_XLA_FROM_DEVICE);
  EXPECT_EQ(xla_bytes_site("OutboundData"), LT_XLA_TO_DEVICE);
  EXPECT_EQ(xla_bytes_site("CompileTime"), 0u);
  // Metric::GetData of torch_xla 2.9.0: push %rbp ... mov 0x58(%rdi),%rax
  const std::string get_data("\x55\x48\x89\xe5\x41\x57\x48\x83\xec\x48\x48\x8b\x47\x58\x48\x85\xc0", 17);
  EXPECT_EQ(first_load_from_this(get_data), 0x58);
  EXPECT_EQ(first_load_from_this(std::string("\x48\x8b\x87\x10\x01\x00\x00", 7)), 0x110);
  EXPECT_EQ(first_load_from_this(std::string("\x55\x48\x89\xe5\xc3", 5)), -1);
  EXPECT_NE(xla_sites_missing({}).find("Compile"), std::string::npos);
  EXPECT_EQ(xla_sites_missing({{1, LT_XLA_COMPILE, ""}, {2, LT_XLA_EXECUTE, ""}, {3, LT_XLA_METRIC_SAMPLE, ""}}), "");
}

TEST(XlaTracer, DeviceVersionAndMetricNames) {
  EXPECT_EQ(proc::xla_device("TPU", ""), "TPU");
  EXPECT_EQ(proc::xla_device("", "TPU"), "TPU");
  EXPECT_EQ(proc::xla_device("", ""), "CPU");
  EXPECT_EQ(proc::xla_device("C\x01U", ""), "C?U");
  const auto maps = proc::scan_maps(
      "7f00-7f01 r-xp 0 08:01 1 /site/_XLAC.cpython-311-x86_64-linux-gnu.so\n"
      "7f02-7f03 r-xp 0 08:01 2 /site/_XLAC_cuda_functions.cpython-311-x86_64-linux-gnu.so\n"
      "7f04-7f05 r-xp 0 08:01 3 /site/torch_xla_cuda_plugin/lib/pjrt_c_api_gpu_plugin.so\n");
  EXPECT_EQ(maps.xla_lib, "/site/_XLAC.cpython-311-x86_64-linux-gnu.so");
  EXPECT_EQ(maps.pjrt_plugin, "CUDA");
  EXPECT_EQ(proc::scan_maps("7f00-7f01 r-xp 0 08:01 3 /site/libtpu/libtpu.so\n").pjrt_plugin, "TPU");

  // torch_xla/version.py beside _XLAC, through /proc/PID/root (ours here).
  const auto dir = std::filesystem::temp_directory_path() / ("xla_version_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "torch_xla");
  std::ofstream(dir / "torch_xla" / "version.py") << "# Autogenerated file, do not edit!\n__version__ = '2.9.0'\n";
  EXPECT_EQ(proc::torch_xla_version(::getpid(), (dir / "_XLAC.cpython-311-x86_64-linux-gnu.so").string()), "2.9.0");
  EXPECT_EQ(proc::torch_xla_version(::getpid(), "/nonexistent/_XLAC.so"), "");
  std::filesystem::remove_all(dir);

  EXPECT_EQ(xla_metric_name_text("CompileTime", 11), "CompileTime");
  EXPECT_EQ(xla_metric_name_text("Comp\xffTime", 9), "");
  EXPECT_EQ(xla_metric_name_text("x", 0), "");

  // A value sample found by its time in the metric's ring.
  const std::vector<XlaSample> ring{{1'000'000, 1}, {5'000'000, 2}, {5'050'000, 3}, {90'000'000, 4}};
  EXPECT_EQ(xla_sample_at(ring, 5'000'001)->value, 2);  // within the clock conversion's slack
  EXPECT_EQ(xla_sample_at(ring, 4'990'000)->value, 2);
  EXPECT_EQ(xla_sample_at(ring, 5'010'000)->value, 3);  // never an earlier call's sample
  EXPECT_FALSE(xla_sample_at(ring, 50'000'000));        // overwritten or never there
}

TEST(Xla, TransferBytesFromTorchXlasOwnSamples) {
  Stream s;
  constexpr std::uint64_t kOut = 0x5000, kIn = 0x6000;
  s.name(kOut, "OutboundData");
  s.name(kIn, "InboundData");
  auto value = [&](std::uint64_t metric, double v, std::uint32_t flags = 0) {
    lt_xla_value_event e{};
    e.hdr = {LT_EV_XLA_VALUE, sizeof e, kPid, kPid, 0, s.ts += us};
    e.metric = metric;
    e.value = v;
    e.flags = flags;
    s.feed(e);
  };
  s.rec(LT_XLA_TO_DEVICE, 0xc11e, 3);
  value(kOut, 4096);
  s.rec(LT_XLA_TO_DEVICE, 0xc11e, 1);
  value(kOut, 0, LT_XLA_VALUE_NOT_FOUND);  // could not be read back
  s.rec(LT_XLA_FROM_DEVICE, 0xc11e, 1);
  value(kIn, 8);
  value(kIn, 8);  // a second sample for one call: no call left for it
  const XlaReport rep = s.xla.finish();
  const XlaProcess& p = rep.procs.at(kPid);
  EXPECT_EQ(p.total.to_device.calls, 2u);
  EXPECT_EQ(p.total.to_device.tensors, 4u);
  EXPECT_EQ(p.total.to_device.sized, 1u);
  EXPECT_EQ(p.total.to_device.bytes, 4096u);
  EXPECT_EQ(p.total.from_device.bytes, 8u);
  EXPECT_EQ(p.values_lost, 2u);
  const std::string text = render_xla_report({0, {{kPid, p}}});
  EXPECT_NE(text.find("~4096"), std::string::npos) << text;  // one of two transfers' bytes known
  EXPECT_NE(text.find("2 transfer byte counts that could not be read back"), std::string::npos) << text;
}
