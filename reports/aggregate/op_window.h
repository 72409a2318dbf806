// The op aggregator's accumulators (internal to reports/aggregate/ops*.cpp):
// a row's sums, and a window of rows over a stretch of one process's time.
#pragma once
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace lt::ops_detail {

struct Acc {
  std::uint64_t calls = 0, self = 0, total = 0;
  std::uint64_t self_cuda = 0, cuda_total = 0, cpu_exact = 0;
  std::int64_t cpu_mem = 0, self_cpu_mem = 0, cuda_mem = 0, self_cuda_mem = 0;
  std::uint64_t record_self_ns = 0, record_total_ns = 0;  // [pl][profile] rows: measured total, estimated self
  std::uint64_t span_self_ns = 0, span_total_ns = 0;      // the op observer's calls (OP_SPAN): measured
  bool device = false;
  Acc& operator+=(const Acc& a) {
    calls += a.calls;
    self += a.self;
    total += a.total;
    self_cuda += a.self_cuda;
    cuda_total += a.cuda_total;
    cpu_exact += a.cpu_exact;
    cpu_mem += a.cpu_mem;
    self_cpu_mem += a.self_cpu_mem;
    cuda_mem += a.cuda_mem;
    self_cuda_mem += a.self_cuda_mem;
    record_self_ns += a.record_self_ns;
    record_total_ns += a.record_total_ns;
    span_self_ns += a.span_self_ns;
    span_total_ns += a.span_total_ns;
    device |= a.device;
    return *this;
  }
};

// Ops of one process over a stretch of time: a batch, the gap after a
// batch's end hooks, the ops outside any batch, or a table's total.  When a
// window is merged into another, `forward` sends the GPU records that come
// later (kernels finish after their launch) to where its ops went.
struct Window;
using WindowPtr = std::shared_ptr<Window>;
struct Window {
  std::unordered_map<std::uint32_t, Acc> rows;
  std::vector<std::uint32_t> order;
  std::uint64_t samples = 0, in_probe = 0;
  std::uint64_t probe_calls = 0;  // calls the op probes counted (their times sampled)
  bool has_cuda = false;
  bool has_memory = false, has_cuda_memory = false;
  bool dropped = false;  // left out by --schedule
  WindowPtr forward;
  Acc& row(std::uint32_t name_id) {
    auto [it, fresh] = rows.try_emplace(name_id);
    if (fresh) order.push_back(name_id);
    return it->second;
  }
  bool empty() const { return rows.empty() && samples == 0; }
  // Adds this window to `to` and frees its rows.
  void merge_into(const WindowPtr& to) {
    for (auto id : order) {
      to->row(id) += rows[id];
    }
    to->samples += samples;
    to->in_probe += in_probe;
    to->probe_calls += probe_calls;
    to->has_cuda |= has_cuda;
    to->has_memory |= has_memory;
    to->has_cuda_memory |= has_cuda_memory;
    samples = in_probe = probe_calls = 0;  // they are `to`'s now (a window may be merged again: unknown)
    release();
    forward = to;
  }
  void drop() {
    release();
    dropped = true;
  }
  void release() {
    std::unordered_map<std::uint32_t, Acc>().swap(rows);
    std::vector<std::uint32_t>().swap(order);
  }
};

// Where a window's records now count (nullptr: left out).
inline Window* resolve(Window* w) {
  while (w && !w->dropped && w->forward) w = w->forward.get();
  return w && !w->dropped ? w : nullptr;
}

inline WindowPtr fresh_window() {
  return std::make_shared<Window>();
}

}  // namespace lt::ops_detail
