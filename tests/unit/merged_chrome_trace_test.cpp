// The merged cluster traces go through the one Chrome-trace writer: GPU
// recordings (CUPTI-shaped records: launch API entries, runtime API calls,
// kernels and copies, as the bridge streams them) merged from two hosts keep
// every rank's kernel, copy and CUDA runtime rows and its ac2g launch ->
// kernel flows; and one rank through the merge is the single trace of its
// process but for the documented labelling, so the two cannot drift again.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/gpu.h"
#include "reports/cluster/merge.h"
#include "reports/cluster/merged_trace.h"
#include "reports/export/chrome_trace.h"
#include "user/cli/merge_output.h"
#include "user/tracefile/trace_writer.h"

using namespace lt;

namespace {

constexpr std::uint64_t us = 1'000, ms = 1'000'000, sec = 1'000'000'000;
constexpr std::uint32_t kCbidLaunch = 211, kCbidMemcpy = 41;  // cudaLaunchKernel_v7000, cudaMemcpyAsync_v3020
constexpr int kSteps = 5;
constexpr std::uint64_t kGpuBlock = 1'000'000'000;

struct GpuRank {
  int rank;
  std::uint32_t pid;
  std::uint16_t device;
};

struct Recording {
  Trace trace;
  std::uint64_t mono = 1000 * sec;

  template <typename R>
  void put(R& r, std::uint16_t kind, std::uint32_t pid, std::uint32_t tid, std::uint64_t ts) {
    r.hdr = {kind, sizeof r, pid, tid, 0, ts};
    trace.append(r);
  }
  void name(std::uint32_t pid, std::uint16_t kind, std::uint32_t id, const char* text) {
    lt_gpu_name_event e{};
    e.n.kind = kind;
    e.n.id = id;
    std::snprintf(e.n.text, sizeof e.n.text, "%s", text);
    e.n.len = e.n.total_len = static_cast<std::uint16_t>(std::strlen(text));
    put(e, LT_EV_GPU_NAME, pid, pid, mono);
  }
  void action(std::uint16_t kind, std::uint32_t pid, std::uint64_t key, const char* text, std::uint64_t ts) {
    lt_action_event e{};
    e.key = key;
    e.name_len = static_cast<std::uint32_t>(std::strlen(text));
    std::snprintf(e.name, sizeof e.name, "%s", text);
    put(e, kind, pid, pid, ts);
  }
  void launch(std::uint32_t pid, std::uint32_t tid, std::uint32_t corr, std::uint32_t cbid, std::uint16_t api,
              std::uint64_t ts) {
    lt_gpu_launch_event e{};
    e.correlation = corr;
    e.cbid = cbid;
    e.source = LT_LAUNCH_CUPTI;
    e.api = api;
    put(e, LT_EV_GPU_LAUNCH, pid, tid, ts);
  }
  void activity(std::uint32_t pid, const lt_gpu_activity& a, std::uint64_t ts) {
    lt_gpu_activity_event e{};
    e.a = a;
    put(e, LT_EV_GPU_ACTIVITY, pid, pid, ts);
  }
};

// One host's recording: per rank and step, a training batch in which the
// main thread launches a kernel and a second thread an H2D copy; CUPTI's
// records of both calls and of the device work arrive after the step.
Trace gpu_recording(const std::string& host, std::uint64_t realtime_at_attach, const std::vector<GpuRank>& ranks) {
  Recording r;
  lt_window_event w{};
  w.begin = 1;
  r.put(w, LT_EV_WINDOW, 0, 0, r.mono);
  lt_host_info_event hi{};
  hi.monotonic_ns = r.mono;
  hi.realtime_ns = realtime_at_attach;
  std::snprintf(hi.hostname, sizeof hi.hostname, "%s", host.c_str());
  r.put(hi, LT_EV_HOST_INFO, 0, 0, r.mono);
  for (const auto& k : ranks) {
    lt_proc_info_event p{};
    p.rank = k.rank;
    p.local_rank = k.device;
    p.world_size = 4;
    p.flags = LT_PROC_PYTHON;
    std::snprintf(p.cmdline, sizeof p.cmdline, "python train.py");
    r.put(p, LT_EV_PROC_INFO, k.pid, k.pid, r.mono);
    r.name(k.pid, LT_NAME_KERNEL, 1, "_Z10gemmKernelPKfS0_Pfi");
    r.name(k.pid, LT_NAME_RUNTIME_API, kCbidLaunch, "cudaLaunchKernel");
    r.name(k.pid, LT_NAME_RUNTIME_API, kCbidMemcpy, "cudaMemcpyAsync");
  }
  for (int s = 0; s < kSteps; ++s) {
    const std::uint64_t t = r.mono + 10 * ms + static_cast<std::uint64_t>(s) * 2 * ms;
    for (const auto& k : ranks) {
      const std::uint32_t corr = 10 + 2 * static_cast<std::uint32_t>(s);  // the same ids on every rank
      r.action(LT_EV_ACTION_BEGIN, k.pid, s + 1, "run_training_batch", t);
      r.launch(k.pid, k.pid, corr, kCbidLaunch, LT_API_LAUNCH, t + 100 * us);
      r.launch(k.pid, k.pid + 1, corr + 1, kCbidMemcpy, LT_API_MEMCPY, t + 120 * us);
      r.action(LT_EV_ACTION_END, k.pid, s + 1, "run_training_batch", t + 1 * ms);
      lt_gpu_activity api{};
      api.kind = LT_GPU_RUNTIME;
      api.cbid = kCbidLaunch;
      api.correlation = corr;
      api.tid = k.pid;
      api.start_ns = t + 100 * us;
      api.end_ns = t + 110 * us;
      r.activity(k.pid, api, t + 1500 * us);
      api.cbid = kCbidMemcpy;
      api.correlation = corr + 1;
      api.tid = k.pid + 1;
      api.start_ns = t + 120 * us;
      api.end_ns = t + 140 * us;
      r.activity(k.pid, api, t + 1500 * us);
      lt_gpu_activity kern{};
      kern.kind = LT_GPU_KERNEL;
      kern.correlation = corr;
      kern.name_id = 1;
      kern.stream = 7;
      kern.device = k.device;
      kern.grid[0] = kern.grid[1] = kern.grid[2] = 1;
      kern.block[0] = 128;
      kern.block[1] = kern.block[2] = 1;
      kern.start_ns = t + 200 * us;
      kern.end_ns = t + 700 * us;
      r.activity(k.pid, kern, t + 1500 * us);
      lt_gpu_activity copy{};
      copy.kind = LT_GPU_MEMCPY;
      copy.copy_kind = 1;
      copy.correlation = corr + 1;
      copy.bytes = 1 << 20;
      copy.stream = 7;
      copy.device = k.device;
      copy.start_ns = t + 150 * us;
      copy.end_ns = t + 250 * us;
      r.activity(k.pid, copy, t + 1500 * us);
    }
  }
  lt_window_event z{};
  r.put(z, LT_EV_WINDOW, 0, 0, r.mono + 60 * ms);
  return std::move(r.trace);
}

MergeInput aggregate(const std::string& file, const Trace& trace) {
  ActionAggregator actions(true);
  GpuAggregator gpu(actions, true);
  trace.for_each([&](const lt_event_header& h, const std::byte* p) {
    actions.add(h, p);
    gpu.add(h, p);
  });
  MergeInput in{file, actions.finish(), std::nullopt, std::nullopt};
  in.gpu = gpu.finish();
  return in;
}

// Two hosts, two GPU ranks each; node-b's wall clock 3 ms ahead.
std::vector<std::pair<std::string, Trace>> two_gpu_hosts() {
  const std::uint64_t wall = 1'800'000'000ull * sec;
  std::vector<std::pair<std::string, Trace>> v;
  v.emplace_back("node-a.ltrace", gpu_recording("node-a", wall, {{0, 100, 0}, {1, 101, 1}}));
  v.emplace_back("node-b.ltrace", gpu_recording("node-b", wall + 3 * ms, {{2, 200, 0}, {3, 201, 1}}));
  return v;
}

// ---- reading the documents: one event per line between the brackets ----

std::vector<std::string> events_of(const std::string& doc) {
  const std::string open = "\"traceEvents\": [\n", close = "\n],\n\"traceName\"";
  const auto b = doc.find(open), e = doc.rfind(close);
  EXPECT_NE(b, std::string::npos);
  EXPECT_NE(e, std::string::npos);
  std::vector<std::string> out;
  std::istringstream in(doc.substr(b + open.size(), e - b - open.size()));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == ',') line.pop_back();
    out.push_back(line);
  }
  return out;
}

// A top-level field of an event (before its "args"), as written.
std::string field(const std::string& ev, const std::string& key) {
  const std::string head = ev.substr(0, ev.find("\"args\""));
  const auto at = head.find("\"" + key + "\": ");
  if (at == std::string::npos) return "";
  const auto b = at + key.size() + 4;
  auto e = head.find_first_of(",}", b);
  std::string v = head.substr(b, e - b);
  if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
  return v;
}

std::uint64_t num(const std::string& ev, const std::string& key) {
  return std::stoull(field(ev, key));
}

std::string us_text(std::int64_t ns) {
  return std::to_string(ns / 1000) + "." + std::to_string(1000 + ns % 1000).substr(1);
}

struct RankGpu {
  std::size_t kernels = 0, copies = 0, runtime = 0;
  std::set<std::string> kernel_ts, copy_ts;
};

}  // namespace

TEST(MergedChromeTrace, EveryRankHasKernelCopyAndRuntimeRowsAndLaunchFlows) {
  std::vector<MergeInput> in;
  for (auto& [file, trace] : two_gpu_hosts()) in.push_back(aggregate(file, trace));
  const MergePlan plan = plan_merge(in);
  ASSERT_EQ(plan.ranks.size(), 4u);
  std::ostringstream o;
  write_merged_trace(plan, o);
  const auto evs = events_of(o.str());

  std::map<std::uint64_t, RankGpu> rows;                // by GPU pid
  std::map<std::uint64_t, std::size_t> runtime_of;      // by rank pid
  std::map<std::string, std::string> starts, finishes;  // flow id -> event
  std::map<std::uint64_t, std::string> gpu_names;       // GPU pid -> process_name
  for (const auto& e : evs) {
    const std::string ph = field(e, "ph"), cat = field(e, "cat");
    if (ph == "X" && cat == "kernel") {
      rows[num(e, "pid")].kernels++;
      rows[num(e, "pid")].kernel_ts.insert(field(e, "ts"));
    } else if (ph == "X" && cat == "gpu_memcpy") {
      rows[num(e, "pid")].copies++;
      rows[num(e, "pid")].copy_ts.insert(field(e, "ts"));
    } else if (ph == "X" && cat == "cuda_runtime") {
      runtime_of[num(e, "pid")]++;
    } else if (ph == "s") {
      EXPECT_EQ(cat, "ac2g");
      EXPECT_TRUE(starts.emplace(field(e, "id"), e).second) << "flow id used twice: " << e;
    } else if (ph == "f") {
      EXPECT_TRUE(finishes.emplace(field(e, "id"), e).second) << "flow id used twice: " << e;
    } else if (ph == "M" && field(e, "name") == "process_name" && num(e, "pid") >= kGpuBlock) {
      gpu_names[num(e, "pid")] = e;
    }
  }
  EXPECT_EQ(starts.size(), 4u * 2 * kSteps);
  EXPECT_EQ(finishes.size(), starts.size());
  for (const auto& r : plan.ranks) {
    SCOPED_TRACE(r.label);
    const std::uint64_t pid = static_cast<std::uint64_t>(r.index);
    const std::uint16_t device = static_cast<std::uint16_t>(r.rank % 2);
    const std::uint64_t gpu = kGpuBlock + pid * 64 + device;  // never a rank's pid
    const RankGpu& g = rows[gpu];
    EXPECT_EQ(g.kernels, static_cast<std::size_t>(kSteps));
    EXPECT_EQ(g.copies, static_cast<std::size_t>(kSteps));
    EXPECT_EQ(runtime_of[pid], 2u * kSteps);  // on the rank's own process group
    EXPECT_TRUE(gpu_names[gpu].find("\"GPU " + std::to_string(device) + " (" + r.label + ")\"") != std::string::npos)
        << gpu_names[gpu];
    // The first kernel on the common clock (this host's wall clock + its correction).
    const std::uint64_t t0 = 1000 * sec + 10 * ms;
    EXPECT_TRUE(g.kernel_ts.count(us_text(r.common_ns(t0 + 200 * us)))) << us_text(r.common_ns(t0 + 200 * us));
    // Each launch on this rank's threads flows to a kernel or copy on its GPU row.
    std::size_t flows = 0;
    for (const auto& [id, s] : starts) {
      if (num(s, "pid") != pid) continue;
      ++flows;
      ASSERT_TRUE(finishes.count(id)) << s;
      const std::string& f = finishes.at(id);
      EXPECT_EQ(num(f, "pid"), gpu) << f;
      EXPECT_EQ(num(f, "tid"), 7u) << f;  // the stream
      EXPECT_TRUE(g.kernel_ts.count(field(f, "ts")) || g.copy_ts.count(field(f, "ts"))) << f;
      EXPECT_TRUE(num(s, "tid") == r.proc->meta.pid || num(s, "tid") == r.proc->meta.pid + 1) << s;
    }
    EXPECT_EQ(flows, 2u * kSteps);
  }
}

namespace {

// The documented differences between a process in a single trace and the
// same process as a rank of a merge: its process_name / process_labels
// text and a process_sort_index.  Those metadata lines are dropped.
std::vector<std::string> without_labels(std::vector<std::string> evs) {
  std::vector<std::string> out;
  for (auto& e : evs) {
    const std::string name = field(e, "name");
    if (field(e, "ph") == "M" && (name == "process_name" || name == "process_labels" || name == "process_sort_index"))
      continue;
    out.push_back(e);
  }
  return out;
}

// In the merged trace a rank's pid is its index and its GPU rows are in the
// index's pid block: back to the OS pid and kineto's pid = device.
std::string unmerged(std::string e, std::uint64_t index, std::uint64_t os_pid) {
  const std::string key = "\"pid\": ";
  const auto at = e.find(key);
  if (at == std::string::npos) return e;
  const auto b = at + key.size(), end = e.find(',', b);
  const std::uint64_t pid = std::stoull(e.substr(b, end - b));
  std::uint64_t to = pid;
  if (pid == index) to = os_pid;
  if (pid >= kGpuBlock + index * 64 && pid < kGpuBlock + index * 64 + 64) to = pid - kGpuBlock - index * 64;
  return e.replace(b, end - b, std::to_string(to));
}

}  // namespace

TEST(MergedChromeTrace, OneRankThroughTheMergeIsItsSingleTrace) {
  const Trace trace = gpu_recording("node-a", 1'800'000'000ull * sec, {{1, 4242, 1}});
  MergeInput in = aggregate("one.ltrace", trace);
  // with op slices too, on two threads
  OpsReport ops;
  ops.names = {"aten::mm", "aten::copy_", "## forward ##"};
  const auto& iv = in.actions.processes.at(0).intervals.at(0);
  ops.intervals.push_back({4242, 4242, 0, 1, iv.begin_ns + 50 * us, iv.begin_ns + 90 * us});
  ops.intervals.push_back({4242, 4243, 1, 1, iv.begin_ns + 60 * us, iv.begin_ns + 130 * us});
  // the op observer's record_function() scope: measured, a user annotation
  ops.intervals.push_back({4242, 4242, 2, 1, iv.begin_ns + 40 * us, iv.begin_ns + 95 * us, true, true});
  in.ops = ops;

  std::ostringstream single;
  write_chrome_trace(in.actions, single, &*in.ops, &*in.gpu);
  EXPECT_NE(single.str().find("\"cat\": \"user_annotation\", \"name\": \"## forward ##\""), std::string::npos);
  EXPECT_NE(single.str().find("\"cat\": \"cpu_op\", \"name\": \"aten::mm\""), std::string::npos);
  const auto fwd = single.str().find("\"name\": \"## forward ##\"");
  ASSERT_NE(fwd, std::string::npos);
  EXPECT_EQ(single.str().substr(fwd, single.str().find('\n', fwd) - fwd).find("upper bound"), std::string::npos)
      << "its end was measured";
  const auto want = without_labels(events_of(single.str()));
  ASSERT_GE(want.size(), 9u * kSteps);  // per step: a batch, 2 API calls, a kernel, a copy, 2 flows of 2 events
  ASSERT_NE(single.str().find("\"cat\": \"kernel\""), std::string::npos);
  ASSERT_NE(single.str().find("\"ph\": \"s\""), std::string::npos);

  std::vector<MergeInput> inputs;
  inputs.push_back(std::move(in));
  const MergePlan plan = plan_merge(inputs);
  ASSERT_EQ(plan.ranks.size(), 1u);
  ASSERT_EQ(plan.ranks[0].clock_offset_ns, 0);
  // The rank trace: kineto's pids (OS pid, pid = device), event for event.
  std::ostringstream rank;
  write_rank_trace(plan, 0, rank);
  EXPECT_EQ(without_labels(events_of(rank.str())), want);
  // The merged trace: the same, once its pids are mapped back.
  std::ostringstream merged;
  write_merged_trace(plan, merged);
  std::vector<std::string> got;
  for (const auto& e : without_labels(events_of(merged.str()))) got.push_back(unmerged(e, 1, 4242));
  EXPECT_EQ(got, want);
  // ...and its labels are the rank's.
  EXPECT_NE(merged.str().find("\"pid\": 1000000065, \"tid\": 0, \"args\": {\"name\": \"GPU 1 (rank 1)\"}"),
            std::string::npos);
  EXPECT_NE(merged.str().find("\"pid\": 1, \"tid\": 0, \"args\": {\"name\": \"rank 1 (node-a, pid 4242)\"}"),
            std::string::npos);
}

// `report DIR --merge --chrome FILE` reads the GPU records of the files.
TEST(MergedChromeTrace, MergeOfTraceFilesKeepsTheirGpuRows) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("lt-merge-gpu-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "traces");
  for (auto& [file, trace] : two_gpu_hosts()) {
    tracefile::TraceWriter w((dir / "traces" / file).string());
    trace.for_each([&](const lt_event_header& h, const std::byte* p) { w.append(p, h.size); });
    w.close();
  }
  auto inputs = read_merge_inputs((dir / "traces").string(), false, {}, true);
  ASSERT_EQ(inputs.size(), 2u);
  MergeOptions mo;
  mo.chrome_path = (dir / "merged.json").string();
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  EXPECT_EQ(write_merged_reports(inputs, mo), 4);
  testing::internal::GetCapturedStdout();
  testing::internal::GetCapturedStderr();
  std::ifstream f(dir / "merged.json");
  const std::string doc((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::size_t kernels = 0, starts = 0;
  for (const auto& e : events_of(doc)) {
    kernels += field(e, "cat") == "kernel";
    starts += field(e, "ph") == "s";
  }
  EXPECT_EQ(kernels, 4u * kSteps);
  EXPECT_EQ(starts, 4u * 2 * kSteps);
  fs::remove_all(dir);
}
