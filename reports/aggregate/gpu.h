// GPU activity per process: what the bridge's CUPTI records and NVTX calls
// (or, without CUPTI, the libcudart / libcuda entry probes) say, joined to
// Lightning actions through the launch records.
//
// The join is exact: the bridge fires a GPU_LAUNCH on the calling thread at
// each launch / copy / sync API entry with CUPTI's correlation id, and every
// kernel, copy and API record carries the same id.  A kernel's time goes to
// the action open on the launching thread at the launch (or, for threads
// outside any action such as autograd's, the action open on the process's
// main thread).  Records arrive late (CUPTI buffers are flushed ~every
// 100 ms), so nothing here depends on their order with the actions.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/duration_stat.h"
#include "user/model/trace.h"

namespace lt {

// GPU work of one Lightning action (by name, summed over its calls).
struct GpuActionRow {
  std::string action;  // "" = outside any action
  std::uint64_t kernels = 0, kernel_ns = 0;
  std::uint64_t copies = 0, copy_ns = 0, copy_bytes = 0;  // memcpy + memset
  std::uint64_t launches = 0;                             // launch API calls made in it
  std::uint64_t syncs = 0, sync_ns = 0;                   // host waits for the device (sync API calls)
};

// One GPU or CUDA API interval on the timeline (exports).
struct GpuSlice {
  std::uint32_t pid = 0;
  std::uint16_t kind = 0;  // LT_GPU_*; LT_GPU_RUNTIME/DRIVER on the calling thread
  std::uint16_t device = 0;
  std::uint32_t stream = 0, tid = 0;  // tid: the calling thread (API slices; kernels: the launching thread, 0 unknown)
  std::uint64_t begin_ns = 0, end_ns = 0;
  std::uint32_t correlation = 0;
  std::uint32_t name = 0;       // index into GpuReport::names
  std::uint64_t launch_ns = 0;  // kernels / copies: when the launching API call began (flow source), 0 unknown
  std::uint64_t bytes = 0;
  std::uint32_t grid[3] = {}, block[3] = {}, registers = 0, shared_mem = 0;
};

struct GpuProcess {
  std::uint32_t pid = 0;
  std::string source;                                               // "CUPTI", "uprobes", ... (how the data was had)
  std::vector<std::string> status;                                  // the bridge's reports, in order, deduplicated
  std::vector<DurationStat> kernels, memops, apis, nvtx;            // by total time, descending
  std::vector<std::pair<std::string, std::uint64_t>> probed_calls;  // uprobe mode: function -> calls
  std::vector<GpuActionRow> actions;                                // order of first GPU use
  std::uint64_t launches = 0;                                       // GPU_LAUNCH records
  std::uint64_t unmatched_records = 0;  // kernels/copies whose launch was not seen (issued before attach)
  std::uint64_t dropped = 0;            // records CUPTI dropped (its buffers were full)
  bool late = false;                    // bridge injected into a running process
};

struct GpuReport {
  std::vector<GpuProcess> processes;  // processes with any GPU record, first-seen order
  std::vector<std::string> names;     // slice name index -> text
  std::vector<GpuSlice> slices;       // kept only when asked
  bool any() const { return !processes.empty(); }
};

class GpuAggregator {
 public:
  // Add each record after `actions` has seen it.
  GpuAggregator(const ActionAggregator& actions, bool keep_slices);
  ~GpuAggregator();
  void add(const lt_event_header& h, const std::byte* record);
  GpuReport finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace lt
