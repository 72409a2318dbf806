// Writes a trace shaped like a Lightning fit on CUDA, for the dashboard's GPU
// parts (tests/integration/test_dashboard.py) where no GPU is at hand:
//   make-gpu-trace OUT MANIFEST [STEPS] [busy|sync|tiny]
// The records are those a real recording holds (docs/design-gpu.md): the
// training loop's actions with Lightning's real names, GPU_LAUNCH records
// (CUPTI source) on the loop's thread inside the actions that launch, and,
// as the bridge's buffers flush, CUPTI kernel / memcpy / runtime records
// joined to those launches by correlation id.  Kernels run on two streams
// that overlap (forward and backward kernels beside a second stream's), one
// kernel runs past its step's end into the next step, and the GPU idles
// during the fetch, the hooks and the host-side optimizer work.  Every
// third step's fetch is slow (a spike), step 7's slower still (over twice the
// median); after every fifth training step a
// validation run of two batches.  `busy`: kernels fill the step's body and
// the fetch is short, so the GPU idles well under the finding's threshold.
// `sync`: as `busy`, and each training step ends its forward with
// an `.item()`: a long kernel, then cudaStreamSynchronize on the loop's
// thread until it ends (the host waits for the device); the manifest's
// "sync" lists those waits.  "loader": each training step's fetch and batch
// transfer (the dataloader part of its time).  `tiny`: as `busy`, but the forward and the
// backward launch 120 and 160 kernels of 5 us each, 25 us apart (a
// launch-bound step).
//
// MANIFEST (JSON) lists what was written, for the test to compute its own
// numbers: the attach time (the WINDOW begin), the training steps' spans (the fetch's begin to the last
// on_train_batch_end's end), the validation steps' spans, and every GPU
// interval (kind, stream, begin, end) in ns.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "user/tracefile/trace_writer.h"

using namespace lt;

namespace {

constexpr std::uint32_t kPid = 4242, kLoopTid = 4242, kCuptiTid = 4251;
constexpr std::uint64_t kUs = 1000, kMs = 1000 * kUs;
constexpr std::uint32_t kStreamMain = 7, kStreamSide = 13;
constexpr std::uint32_t kCbidLaunch = 211, kCbidMemcpyAsync = 41;  // cudaLaunchKernel_v7000, cudaMemcpyAsync_v3020
constexpr std::uint32_t kCbidStreamSync = 131;                     // cudaStreamSynchronize_v3020
const char* kKernels[] = {
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEvT_T0_T1_",
    "ampere_sgemm_128x64_tn",
    "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_7SumOpsIffEEjfLi4EEEEEvT1_",
    "_ZN2at6native25multi_tensor_apply_kernelEv",
};

// One record to write, at its time; written sorted by time (stable).
struct Rec {
  std::uint64_t ts;
  std::vector<unsigned char> bytes;
};

struct Interval {
  const char* kind;
  std::uint32_t stream;
  std::uint64_t begin, end;
};

struct Gen {
  std::vector<Rec> recs;
  std::vector<Interval> gpu;
  std::uint64_t key = 0x7f0000001000;
  std::uint32_t correlation = 100;

  template <class E>
  void put(E& e, std::uint16_t kind, std::uint64_t ts, std::uint32_t tid = kLoopTid) {
    e.hdr = {kind, sizeof e, kPid, tid, 0, ts};
    Rec r{ts, std::vector<unsigned char>(sizeof e)};
    std::memcpy(r.bytes.data(), &e, sizeof e);
    recs.push_back(std::move(r));
  }
  // An action [b, e) on the loop's thread.
  void action(const std::string& name, std::uint64_t b, std::uint64_t e) {
    lt_action_event a{};
    a.key = key += 0x40;
    std::snprintf(a.name, sizeof a.name, "%s", name.c_str());
    a.name_len = static_cast<lt::u32>(name.size());
    put(a, LT_EV_ACTION_BEGIN, b);
    put(a, LT_EV_ACTION_END, e);
  }
  void name(std::uint16_t kind, std::uint32_t id, const char* text, std::uint64_t ts) {
    lt_gpu_name_event n{};
    n.n.kind = kind;
    n.n.id = id;
    n.n.len = n.n.total_len = static_cast<lt::u16>(std::min<std::size_t>(std::strlen(text), LT_GPU_NAME_CHUNK));
    std::memcpy(n.n.text, text, n.n.len);
    put(n, LT_EV_GPU_NAME, ts, kCuptiTid);
  }
  // A launch at `at` on the loop's thread and, flushed later, its runtime
  // record and its kernel (or copy) on `stream` running [gb, ge).
  void launch(std::uint64_t at, std::uint32_t stream, std::uint64_t gb, std::uint64_t ge, int kernel, bool copy) {
    const std::uint32_t c = ++correlation;
    lt_gpu_launch_event l{};
    l.correlation = c;
    l.cbid = copy ? kCbidMemcpyAsync : kCbidLaunch;
    l.source = LT_LAUNCH_CUPTI;
    l.api = copy ? LT_API_MEMCPY : LT_API_LAUNCH;
    put(l, LT_EV_GPU_LAUNCH, at);
    lt_gpu_activity_event rt{};
    rt.a.kind = LT_GPU_RUNTIME;
    rt.a.correlation = c;
    rt.a.cbid = l.cbid;
    rt.a.tid = kLoopTid;
    rt.a.start_ns = at;
    rt.a.end_ns = at + 6 * kUs;
    put(rt, LT_EV_GPU_ACTIVITY, ge + 20 * kUs, kCuptiTid);  // the buffer flushed after the work ended
    lt_gpu_activity_event g{};
    g.a.kind = copy ? LT_GPU_MEMCPY : LT_GPU_KERNEL;
    g.a.correlation = c;
    g.a.name_id = copy ? 0 : static_cast<lt::u32>(kernel + 1);
    g.a.stream = stream;
    g.a.context = 1;
    g.a.start_ns = gb;
    g.a.end_ns = ge;
    if (copy) {
      g.a.bytes = 8 << 20;
      g.a.copy_kind = 1;  // HtoD
    } else {
      g.a.grid[0] = 1024, g.a.grid[1] = g.a.grid[2] = 1;
      g.a.block[0] = 256, g.a.block[1] = g.a.block[2] = 1;
      g.a.registers = 32;
    }
    put(g, LT_EV_GPU_ACTIVITY, ge + 20 * kUs, kCuptiTid);
    gpu.push_back({copy ? "memcpy" : "kernel", stream, gb, ge});
  }
};

struct Span {
  std::uint64_t begin, end;
};

// cudaStreamSynchronize on the loop's thread over [b, e): its API entry
// (GPU_LAUNCH, a sync) and, flushed later, its runtime record.
void stream_sync(Gen& g, std::uint64_t b, std::uint64_t e) {
  const std::uint32_t c = ++g.correlation;
  lt_gpu_launch_event l{};
  l.correlation = c;
  l.cbid = kCbidStreamSync;
  l.source = LT_LAUNCH_CUPTI;
  l.api = LT_API_SYNC;
  g.put(l, LT_EV_GPU_LAUNCH, b);
  lt_gpu_activity_event rt{};
  rt.a.kind = LT_GPU_RUNTIME;
  rt.a.correlation = c;
  rt.a.cbid = kCbidStreamSync;
  rt.a.tid = kLoopTid;
  rt.a.start_ns = b;
  rt.a.end_ns = e;
  g.put(rt, LT_EV_GPU_ACTIVITY, e + 20 * kUs, kCuptiTid);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 5) {
    std::fprintf(stderr, "usage: make-gpu-trace OUT MANIFEST [STEPS] [busy|sync|tiny]\n");
    return 2;
  }
  const int steps = argc > 3 ? std::atoi(argv[3]) : 12;
  const std::string mode = argc > 4 ? argv[4] : "";
  const bool sync = mode == "sync", tiny = mode == "tiny";
  const bool busy = mode == "busy" || sync || tiny;
  if (steps < 1 || steps > 100000) {
    std::fprintf(stderr, "make-gpu-trace: STEPS must be 1..100000\n");
    return 2;
  }
  Gen g;
  const std::uint64_t t0 = 50'000 * kMs;  // CLOCK_MONOTONIC of the attach
  {
    lt_window_event w{};
    w.begin = 1;
    g.put(w, LT_EV_WINDOW, t0);
    lt_host_info_event h{};
    h.monotonic_ns = t0;
    h.realtime_ns = 1'796'214'800'000'000'000ull;
    std::snprintf(h.hostname, sizeof h.hostname, "gpu-node-1");
    std::snprintf(h.tool, sizeof h.tool, "ltrace-bpf 0.1.0");
    g.put(h, LT_EV_HOST_INFO, t0);
    lt_proc_info_event p{};
    p.rank = p.local_rank = p.world_size = -1;
    p.py_major = 3, p.py_minor = 11;
    p.flags = LT_PROC_PYTHON;
    std::snprintf(p.comm, sizeof p.comm, "python");
    std::snprintf(p.cmdline, sizeof p.cmdline, "python train_gpu.py --accelerator cuda (synthetic: make-gpu-trace)");
    std::snprintf(p.torch_version, sizeof p.torch_version, "2.5.1+cu124");
    g.put(p, LT_EV_PROC_INFO, t0);
    lt_gpu_status_event s{};
    s.s.state = LT_BRIDGE_ACTIVE;
    std::snprintf(s.s.detail, sizeof s.s.detail, "CUPTI active (synthetic trace)");
    g.put(s, LT_EV_GPU_STATUS, t0 + kUs, kCuptiTid);
    for (int k = 0; k < 4; ++k) g.name(LT_NAME_KERNEL, static_cast<std::uint32_t>(k + 1), kKernels[k], t0 + 2 * kUs);
    g.name(LT_NAME_RUNTIME_API, kCbidLaunch, "cudaLaunchKernel", t0 + 2 * kUs);
    g.name(LT_NAME_RUNTIME_API, kCbidMemcpyAsync, "cudaMemcpyAsync", t0 + 2 * kUs);
    g.name(LT_NAME_RUNTIME_API, kCbidStreamSync, "cudaStreamSynchronize_v3020", t0 + 2 * kUs);
    g.name(LT_NAME_DEVICE, 0, "NVIDIA H100 80GB HBM3 (synthetic)", t0 + 2 * kUs);
  }
  const std::string M = "[LightningModule]GpuModel.", S = "[Strategy]SingleDeviceStrategy.";
  std::vector<Span> train, val, waits, loader;
  std::uint64_t t = t0 + 10 * kMs;
  const std::uint64_t epoch_begin = t - kMs;
  for (int i = 0; i < steps; ++i) {
    const std::uint64_t s = t;
    // The fetch: the GPU waits for it (every third one slow).
    const std::uint64_t fetch = busy ? 100 * kUs : i == 7 ? 30 * kMs : i % 3 == 2 ? 9 * kMs : 2 * kMs;
    g.action("[_TrainingEpochLoop].train_dataloader_next", s, s + fetch);
    std::uint64_t c = s + fetch + 10 * kUs;
    // The batch to the device: one host-to-device copy.
    g.action(S + "batch_to_device", c, c + 200 * kUs);
    loader.push_back({s, s + fetch});
    loader.push_back({c, c + 200 * kUs});
    g.action(M + "transfer_batch_to_device", c + 20 * kUs, c + 180 * kUs);
    g.launch(c + 50 * kUs, kStreamMain, c + 70 * kUs, c + 170 * kUs, 0, true);
    c += 210 * kUs;
    g.action("[Callback]TQDMProgressBar.on_train_batch_start", c, c + 40 * kUs);
    g.action(M + "on_train_batch_start", c + 50 * kUs, c + 60 * kUs);
    c += 70 * kUs;
    // The body: optimizer_step wraps the closure (training_step, zero_grad, backward).
    const std::uint64_t rb = c, ob = rb + 10 * kUs;
    std::uint64_t k = ob + 20 * kUs;
    // sync: an `.item()` after the forward's kernels: a 1.5 ms kernel and
    // the host waiting for it (the forward's host part grows by as much).
    const std::uint64_t item = sync ? 1800 * kUs : 0;
    const std::uint64_t fwd_end = k + 3 * kMs + item;
    g.action(S + "training_step", k, fwd_end);
    g.action(M + "training_step", k + 10 * kUs, fwd_end - 10 * kUs);
    // Forward: 8 kernels on the main stream, a reduction on the side stream
    // beside every other one (overlapping).
    for (int j = 0; tiny && j < 120; ++j) {
      const std::uint64_t at = k + 30 * kUs + static_cast<std::uint64_t>(j) * 25 * kUs;
      g.launch(at, kStreamMain, at + 10 * kUs, at + 15 * kUs, j % 2, false);
    }
    for (int j = 0; !tiny && j < 8; ++j) {
      const std::uint64_t at = k + 30 * kUs + static_cast<std::uint64_t>(j) * 350 * kUs;
      const std::uint64_t len = busy ? 360 * kUs : 250 * kUs;
      g.launch(at, kStreamMain, at + 15 * kUs, at + 15 * kUs + len, j % 2, false);
      if (j % 2 == 0) g.launch(at + 8 * kUs, kStreamSide, at + 100 * kUs, at + 300 * kUs, 2, false);
    }
    if (sync) {
      const std::uint64_t at = k + 3 * kMs - 200 * kUs;  // after the last forward kernel ends
      const std::uint64_t ke = at + 15 * kUs + 1500 * kUs;
      g.launch(at, kStreamMain, at + 15 * kUs, ke, 2, false);
      stream_sync(g, at + 20 * kUs, ke + 10 * kUs);
      waits.push_back({at + 20 * kUs, ke + 10 * kUs});
    }
    k = fwd_end + 10 * kUs;
    g.action(M + "optimizer_zero_grad", k, k + 60 * kUs);
    k += 70 * kUs;
    const std::uint64_t bwd_end = k + 4 * kMs;
    g.action(S + "backward", k, bwd_end);
    for (int j = 0; tiny && j < 160; ++j) {
      const std::uint64_t at = k + 20 * kUs + static_cast<std::uint64_t>(j) * 25 * kUs;
      g.launch(at, kStreamMain, at + 10 * kUs, at + 15 * kUs, 1, false);
    }
    for (int j = 0; !tiny && j < 10; ++j) {
      const std::uint64_t at = k + 20 * kUs + static_cast<std::uint64_t>(j) * 390 * kUs;
      const std::uint64_t len = busy ? 400 * kUs : 300 * kUs;
      g.launch(at, j % 3 == 1 ? kStreamSide : kStreamMain, at + 25 * kUs, at + 25 * kUs + len, 1, false);
    }
    // The optimizer's own time: host work (idle GPU), then the fused step.
    k = bwd_end + 800 * kUs;
    const std::uint64_t adam = busy ? 900 * kUs : 700 * kUs;
    g.launch(k, kStreamMain, k + 20 * kUs, k + 20 * kUs + adam, 3, false);
    const std::uint64_t oe = k + 100 * kUs;
    g.action(M + "optimizer_step", ob, oe);
    g.action("run_training_batch", rb, oe + 10 * kUs);
    c = oe + 20 * kUs;
    g.action("[Callback]TQDMProgressBar.on_train_batch_end", c, c + 300 * kUs);
    g.action(M + "on_train_batch_end", c + 310 * kUs, c + 400 * kUs);
    const std::uint64_t e = c + 400 * kUs;
    train.push_back({s, e});
    t = e + 30 * kUs;
    // Validation after every fifth training step: two batches.
    if (i % 5 == 4) {
      const std::uint64_t vb = t;
      for (int v = 0; v < 2; ++v) {
        const std::uint64_t b = t;
        g.action("[_EvaluationLoop].val_next", b, b + kMs);
        const std::uint64_t sb = b + kMs + 20 * kUs;
        g.action(S + "validation_step", sb, sb + 2 * kMs);
        g.action(M + "validation_step", sb + 10 * kUs, sb + 2 * kMs - 10 * kUs);
        for (int j = 0; j < 5; ++j) {
          const std::uint64_t at = sb + 30 * kUs + static_cast<std::uint64_t>(j) * 350 * kUs;
          g.launch(at, kStreamMain, at + 15 * kUs, at + 265 * kUs, 1, false);
        }
        const std::uint64_t he = sb + 2 * kMs + 100 * kUs;
        g.action(M + "on_validation_batch_end", sb + 2 * kMs + 10 * kUs, he);
        val.push_back({b, he});
        t = he + 20 * kUs;
      }
      g.action("[_EvaluationLoop].run", vb - 10 * kUs, t);
      t += 30 * kUs;
    }
  }
  g.action("run_training_epoch", epoch_begin, t + kMs);
  {
    lt_window_event w{};
    w.begin = 0;
    g.put(w, LT_EV_WINDOW, t + 5 * kMs);
  }
  std::stable_sort(g.recs.begin(), g.recs.end(), [](const Rec& a, const Rec& b) { return a.ts < b.ts; });
  try {
    lt::tracefile::TraceWriter w(argv[1]);
    for (const auto& r : g.recs) w.append(r.bytes.data(), r.bytes.size());
    w.close();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make-gpu-trace: %s\n", e.what());
    return 1;
  }
  std::ofstream m(argv[2]);
  auto spans = [&](const char* key, const std::vector<Span>& v) {
    m << "\"" << key << "\":[";
    for (std::size_t i = 0; i < v.size(); ++i) m << (i ? "," : "") << "[" << v[i].begin << "," << v[i].end << "]";
    m << "]";
  };
  m << "{\"pid\":" << kPid << ",\"attach_ns\":" << t0 << ",";
  spans("train", train);
  m << ",";
  spans("validation", val);
  m << ",";
  spans("sync", waits);
  m << ",";
  spans("loader", loader);
  m << ",\"gpu\":[";
  for (std::size_t i = 0; i < g.gpu.size(); ++i)
    m << (i ? "," : "") << "[\"" << g.gpu[i].kind << "\"," << g.gpu[i].stream << "," << g.gpu[i].begin << ","
      << g.gpu[i].end << "]";
  m << "]}\n";
  return m.good() ? 0 : 1;
}
