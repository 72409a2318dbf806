// CUPTI records, in the real CUDA 13 format, through the bridge's converter
// into the event stream, then through the aggregators: the joins (kernel ->
// launch -> op / action) and the CUDA columns of the op table.  The buffer is
// walked with libcupti's own cuptiActivityGetNextRecord when it loads (it
// does on this CPU-only machine), else with the bridge's size-based walker.
#include <cupti.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/gpu.h"
#include "reports/aggregate/ops.h"
#include "reports/export/chrome_trace.h"
#include "reports/ops/op_table.h"
#include "torchbridge/cupti_records.h"
#include "torchbridge/names.h"

using namespace lt;

namespace {

constexpr std::uint32_t kPid = 77, kMain = 77, kAutograd = 78;
constexpr const char* kTrain = "[Strategy]SingleDeviceStrategy.training_step";
constexpr const char* kGemm = "_Z10gemmKernelPKfS0_Pfi";  // void gemmKernel(float const*, float const*, float*, int)
constexpr std::uint32_t kCbidLaunch = 211;                // CUPTI's cudaLaunchKernel_v7000 in CUDA 13

ltb::NextRecordFn cupti_walker() {
  for (const char* so : {"/usr/local/cuda/lib64/libcupti.so.13", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"})
    if (void* h = dlopen(so, RTLD_NOW | RTLD_LOCAL))
      if (auto fn = reinterpret_cast<ltb::NextRecordFn>(dlsym(h, "cuptiActivityGetNextRecord"))) return fn;
  return ltb::next_record_by_size;
}

// Records of the session, in order, as the ring buffer would carry them.
struct Stream {
  ActionAggregator actions;
  OpAggregator ops{actions, {}};
  GpuAggregator gpu{actions, /*keep_slices=*/true};
  std::uint64_t t = 1'000'000;

  template <typename R>
  void feed(R& r, std::uint32_t tid = kMain) {
    r.hdr.size = sizeof r;
    r.hdr.pid = kPid;
    r.hdr.tid = tid;
    r.hdr.ts_ns = t += 1000;
    const auto* p = reinterpret_cast<const std::byte*>(&r);
    actions.add(r.hdr, p);
    ops.add(r.hdr, p);
    gpu.add(r.hdr, p);
  }
  void op_name(std::uint32_t op, const char* name) {
    lt_op_name_event e{};
    e.hdr.kind = LT_EV_OP_NAME;
    e.op = op;
    std::strncpy(e.name, name, sizeof e.name - 1);
    feed(e);
  }
  void action(std::uint16_t kind, std::uint64_t key, const char* name) {
    lt_action_event e{};
    e.hdr.kind = kind;
    e.key = key;
    e.name_len = static_cast<std::uint32_t>(std::strlen(name));
    std::strncpy(e.name, name, sizeof e.name - 1);
    feed(e);
  }
  void op(std::uint32_t op, std::uint16_t depth, std::uint32_t tid = kMain) {
    lt_op_event e{};
    e.hdr.kind = LT_EV_OP;
    e.op = op;
    e.depth = depth;
    feed(e, tid);
  }
  void launch(std::uint32_t corr, std::vector<std::uint32_t> ops, std::uint32_t tid = kMain) {
    lt_gpu_launch_event e{};
    e.hdr.kind = LT_EV_GPU_LAUNCH;
    e.correlation = corr;
    e.cbid = kCbidLaunch;
    e.source = LT_LAUNCH_CUPTI;
    e.api = LT_API_LAUNCH;
    e.nops = static_cast<std::uint16_t>(ops.size());
    for (std::size_t i = 0; i < ops.size(); ++i) e.ops[i] = ops[i];
    feed(e, tid);
  }
  void name(std::uint16_t kind, std::uint32_t id, const std::string& text) {
    lt_gpu_name_event e{};
    e.hdr.kind = LT_EV_GPU_NAME;
    e.n.kind = kind;
    e.n.id = id;
    e.n.len = static_cast<std::uint16_t>(text.size());
    e.n.total_len = static_cast<std::uint32_t>(text.size());
    std::memcpy(e.n.text, text.data(), text.size());
    feed(e);
  }
};

// The bridge's sink, writing GPU_NAME / GPU_ACTIVITY records into the stream
// (what the USDT probes and gpu.bpf.c do in a live session).
struct ToStream : ltb::ActivitySink {
  Stream& s;
  explicit ToStream(Stream& st) : s(st) {}
  void name(lt::u32 id, std::string_view text) override { s.name(LT_NAME_KERNEL, id, std::string(text)); }
  void enrich(lt::lt_gpu_activity&) override {}
  void activity(const lt::lt_gpu_activity* recs, lt::u32 n) override {
    for (lt::u32 i = 0; i < n; ++i) {
      lt_gpu_activity_event e{};
      e.hdr.kind = LT_EV_GPU_ACTIVITY;
      e.a = recs[i];
      s.feed(e, 999);  // CUPTI's own thread
    }
  }
};

class Buffer {
 public:
  Buffer() : data_(static_cast<uint8_t*>(aligned_alloc(8, kSize))) { std::memset(data_, 0, kSize); }
  ~Buffer() { free(data_); }
  template <class T>
  T* add(CUpti_ActivityKind kind) {
    auto* p = new (data_ + used_) T;
    std::memset(static_cast<void*>(p), 0, sizeof(T));
    p->kind = kind;
    used_ += sizeof(T);
    return p;
  }
  uint8_t* data() { return data_; }
  size_t used() const { return used_; }

 private:
  static constexpr size_t kSize = 16 * 1024;
  uint8_t* data_;
  size_t used_ = 0;
};

void kernel(Buffer& b, std::uint32_t corr, std::uint64_t start, std::uint64_t dur) {
  auto* k = b.add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  k->start = start;
  k->end = start + dur;
  k->correlationId = corr;
  k->name = kGemm;
  k->streamId = 7;
  k->gridX = k->gridY = k->gridZ = 1;
  k->blockX = 128;
  k->blockY = k->blockZ = 1;
}

void runtime(Buffer& b, std::uint32_t corr, std::uint64_t start, std::uint64_t dur) {
  auto* a = b.add<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
  a->cbid = static_cast<CUpti_CallbackId>(kCbidLaunch);
  a->start = start;
  a->end = start + dur;
  a->correlationId = corr;
}

void memcpy_htod(Buffer& b, std::uint32_t corr, std::uint64_t start, std::uint64_t dur, std::uint64_t bytes) {
  auto* m = b.add<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
  m->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m->bytes = bytes;
  m->start = start;
  m->end = start + dur;
  m->correlationId = corr;
}

// One training step: aten::linear -> aten::addmm launches a GEMM (corr 1);
// backward on autograd's thread: aten::mm launches another (corr 2); a
// batch copy outside any op (corr 3).  The CUPTI records come after the step
// ended, as flushed buffers do.
void one_step(Stream& s) {
  s.op_name(0, "aten::linear");
  s.op_name(1, "aten::addmm");
  s.op_name(2, "aten::mm");
  s.name(LT_NAME_RUNTIME_API, kCbidLaunch, "cudaLaunchKernel");
  s.action(LT_EV_ACTION_BEGIN, 1, kTrain);
  s.op(0, 1);
  s.op(1, 2);
  s.launch(1, {0, 1});
  s.op(2, 1, kAutograd);
  s.launch(2, {2}, kAutograd);
  s.launch(3, {});
  s.action(LT_EV_ACTION_END, 1, kTrain);
  Buffer b;
  kernel(b, 1, 5'000'000, 4000);
  runtime(b, 1, 4'990'000, 3000);
  kernel(b, 2, 5'010'000, 6000);
  runtime(b, 2, 5'005'000, 2000);
  memcpy_htod(b, 3, 5'020'000, 1500, 1 << 20);
  ltb::NameInterner names;
  ToStream sink(s);
  auto ws = ltb::walk_activity_buffer(b.data(), b.used(), cupti_walker(), names, 0, sink);
  EXPECT_EQ(ws.converted, 5u);
}

}  // namespace

TEST(BridgeGpuJoin, CudaColumnsOfTheOpTable) {
  Stream s;
  one_step(s);
  OpsReport rep = s.ops.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  ASSERT_EQ(rep.processes[0].tables.size(), 1u);
  const auto& t = rep.processes[0].tables[0];
  EXPECT_EQ(t.title, kTrain);
  EXPECT_TRUE(t.has_cuda);
  auto row = [&](const std::string& name) -> const OpRowData* {
    for (const auto& r : t.rows)
      if (r.name == name) return &r;
    return nullptr;
  };
  // The op that launched a kernel gets it as self time; every op around it as total.
  ASSERT_TRUE(row("aten::addmm"));
  EXPECT_EQ(row("aten::addmm")->self_cuda_ns, 4000u);
  EXPECT_EQ(row("aten::addmm")->cuda_total_ns, 4000u);
  ASSERT_TRUE(row("aten::linear"));
  EXPECT_EQ(row("aten::linear")->self_cuda_ns, 0u);
  EXPECT_EQ(row("aten::linear")->cuda_total_ns, 4000u);
  // A launch from autograd's thread joins as exactly.
  ASSERT_TRUE(row("aten::mm"));
  EXPECT_EQ(row("aten::mm")->self_cuda_ns, 6000u);
  // The kernel is a row of its own, demangled as torch shows it.
  const auto* k = row("gemmKernel(float const*, float const*, float*, int)");
  ASSERT_TRUE(k);
  EXPECT_TRUE(k->device_row);
  EXPECT_EQ(k->calls, 2u);
  EXPECT_EQ(k->self_cuda_ns, 10000u);
  // cudaLaunchKernel rows carry CUPTI's measured CPU time.
  ASSERT_TRUE(row("cudaLaunchKernel"));
  EXPECT_EQ(row("cudaLaunchKernel")->calls, 2u);
  EXPECT_EQ(row("cudaLaunchKernel")->cpu_exact_ns, 5000u);
  ASSERT_TRUE(row("Memcpy HtoD"));
  EXPECT_EQ(row("Memcpy HtoD")->cuda_total_ns, 1500u);

  // And rendered in torch's layout with the device columns.
  std::vector<OpRow> rows;
  for (const auto& r : t.rows) {
    OpRow o{r.name, "", r.cpu_exact_ns / 1e3, r.cpu_exact_ns / 1e3, r.calls};
    o.self_cuda_us = r.self_cuda_ns / 1e3;
    o.cuda_total_us = r.cuda_total_ns / 1e3;
    o.device_event = r.device_row;
    rows.push_back(o);
  }
  OpTableOptions opt;
  opt.sort_by = "cuda_time_total";
  opt.device = "cuda";
  const std::string table = render_op_table(rows, opt);
  EXPECT_NE(table.find("Self CUDA"), std::string::npos);
  EXPECT_NE(table.find("Self CUDA time total: 11.500us"), std::string::npos) << table;
}

TEST(BridgeGpuJoin, KernelsSummaryAndTimePerAction) {
  Stream s;
  one_step(s);
  GpuReport rep = s.gpu.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  const auto& p = rep.processes[0];
  EXPECT_EQ(p.source, "CUPTI");
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(p.kernels[0].name, "gemmKernel(float const*, float const*, float*, int)");
  EXPECT_EQ(p.kernels[0].durations_ns, (std::vector<std::uint64_t>{4000, 6000}));
  ASSERT_EQ(p.memops.size(), 1u);
  EXPECT_EQ(p.memops[0].name, "[CUDA memcpy Host-to-Device]");
  ASSERT_EQ(p.apis.size(), 1u);
  EXPECT_EQ(p.apis[0].name, "cudaLaunchKernel");
  // Kernels launched in the step, on either thread, are the step's.
  GpuActionRow step;
  for (const auto& a : p.actions)
    if (a.action == kTrain) step = a;
  EXPECT_EQ(step.kernels, 2u);
  EXPECT_EQ(step.kernel_ns, 10000u);
  EXPECT_EQ(step.copies, 1u);
  EXPECT_EQ(step.copy_bytes, 1u << 20);
  EXPECT_EQ(step.launches, 3u);
  EXPECT_EQ(p.unmatched_records, 0u);
  // The timeline keeps each kernel with its launching thread (the ac2g flow).
  int kernels = 0;
  for (const auto& sl : rep.slices)
    if (sl.kind == LT_GPU_KERNEL) {
      ++kernels;
      EXPECT_EQ(sl.tid, sl.correlation == 1 ? kMain : kAutograd);
      EXPECT_NE(sl.launch_ns, 0u);
    }
  EXPECT_EQ(kernels, 2);
}

TEST(BridgeGpuJoin, KernelWithoutItsLaunchIsCountedNotAttributed) {
  Stream s;
  s.action(LT_EV_ACTION_BEGIN, 1, kTrain);
  s.action(LT_EV_ACTION_END, 1, kTrain);
  Buffer b;
  kernel(b, 42, 1'000'000, 500);  // launched before the attach
  ltb::NameInterner names;
  ToStream sink(s);
  ltb::walk_activity_buffer(b.data(), b.used(), cupti_walker(), names, 0, sink);
  GpuReport rep = s.gpu.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  EXPECT_EQ(rep.processes[0].unmatched_records, 1u);
  EXPECT_EQ(rep.processes[0].kernels.size(), 1u);
}

namespace {
std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}
}  // namespace

TEST(BridgeGpuJoin, ChromeTraceHasKernelRowsAndLaunchFlows) {
  Stream s;
  one_step(s);
  auto actions = s.actions.finish();
  auto ops = s.ops.finish();
  auto gpu = s.gpu.finish();
  std::ostringstream out;
  write_chrome_trace(actions, out, &ops, &gpu);
  const std::string j = out.str();
  // kineto's categories and arguments
  EXPECT_EQ(count(j, "\"cat\": \"kernel\""), 2u);
  EXPECT_EQ(count(j, "\"cat\": \"gpu_memcpy\""), 1u);
  EXPECT_EQ(count(j, "\"cat\": \"cuda_runtime\""), 2u);
  EXPECT_NE(j.find("\"name\": \"gemmKernel(float const*, float const*, float*, int)\""), std::string::npos);
  EXPECT_NE(j.find("\"stream\": 7, \"correlation\": 1,"), std::string::npos) << j;
  EXPECT_NE(j.find("\"grid\": [1, 1, 1], \"block\": [128, 1, 1]"), std::string::npos);
  // one ac2g arrow per kernel and copy: from the launching thread to the
  // device row (pid = device 0, tid = stream)
  EXPECT_EQ(count(j, "\"ph\": \"s\""), 3u);
  EXPECT_EQ(count(j, "\"ph\": \"f\""), 3u);
  EXPECT_NE(j.find("{\"ph\": \"s\", \"id\": 2, \"pid\": 77, \"tid\": 78,"), std::string::npos) << j;
  EXPECT_NE(j.find("{\"ph\": \"f\", \"id\": 2, \"pid\": 0, \"tid\": 7,"), std::string::npos) << j;
  EXPECT_NE(j.find("\"name\": \"process_name\", \"pid\": 0, \"tid\": 0, \"args\": {\"name\": \"GPU 0\"}"),
            std::string::npos);
  // runtime calls on the thread that made them
  EXPECT_NE(j.find("\"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 77, \"tid\": 78"),
            std::string::npos);
}
