// Chrome / Perfetto trace in PyTorch profiler (kineto) conventions: the one
// writer of every Chrome trace ltrace-bpf makes (`--chrome`, and the merged
// and per-rank traces of reports/cluster, which only choose what goes in).
//
// Complete "X" events with cat "user_annotation" for Lightning actions and
// "cpu_op" for aten ops (nested per thread by time), process_name /
// thread_name metadata, distributedInfo for the rank, and ltrace-bpf's
// lost-event counts.  Loads in Perfetto, chrome://tracing and Holistic
// Trace Analysis.
#pragma once
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/gpu.h"
#include "reports/aggregate/memory.h"
#include "reports/aggregate/ops.h"
#include "reports/aggregate/xla.h"
#include "reports/export/export_range.h"

namespace lt {

// Built from reports aggregated with keep_intervals = true.  With `ops`,
// every op call is a "cpu_op" slice (kineto's category); its end is an upper
// bound (args "end": "upper bound"): no probe sees an op return.
// With `gpu` (slices kept), kernels, copies and memsets are "kernel" /
// "gpu_memcpy" / "gpu_memset" slices on a GPU row per device and stream
// (kineto: pid = device, tid = stream), CUDA API calls "cuda_runtime" /
// "cuda_driver" slices on their thread, "ac2g" flows from each launch call
// to its kernel (by CUPTI correlation id), and NVTX ranges "nvtx" slices.
// With `memory` (events kept), each allocator event is kineto's memory
// instant: "ph": "i", "s": "t", cat "cpu_instant_event", name "[memory]"
// ("[OutOfMemory]" for a failed allocation), args "Device Type", "Device Id",
// "Addr", "Bytes" (negative for a free; 0: a free whose size is unknown),
// "Total Allocated", "Total Reserved", on the allocating thread, as
// torch.profiler(profile_memory=True) writes them: TensorBoard's and HTA's
// memory views read these.
// Every process with actions, ops or memory events gets a process group
// under its OS pid.  "ltrace_bpf": {"attach_ns": ...} is the attach on the
// trace's clock (integer nanoseconds; "ts" is in microseconds): --window
// counts from it.  With `range` (--steps/--window), only the events it
// keeps (export_range.h).
// With `xla` (slices kept), torch_xla's timed compiles, executions and
// transfers are "xla" slices on their calling thread ("XLA compile", ...).
void write_chrome_trace(const ActionsReport& rep, std::ostream& out, const OpsReport* ops = nullptr,
                        const GpuReport* gpu = nullptr, const MemoryReport* memory = nullptr,
                        const RangeFilter* range = nullptr, const XlaReport* xla = nullptr);

// ---- The writer's parameters, for documents of several recordings ----

// One process of a recording as the document shows it.
// An instant on one of a process's threads (a collective's arrival in a
// merged trace): "ph": "i", thread scope.
struct ChromeMarker {
  std::uint32_t tid = 0;
  std::uint64_t ts_ns = 0;  // the recording's own clock
  std::string name, category;
  std::string args;  // JSON members ("\"k\": 1"), "" none
};

// A slice on one of a process's threads: "ph": "X".
struct ChromeSlice {
  std::uint32_t tid = 0;
  std::uint64_t begin_ns = 0, end_ns = 0;  // the recording's own clock
  std::string name, category;
  std::string args;  // JSON members, "" none
};

struct ChromeProcess {
  const ProcessActions* proc = nullptr;
  std::uint64_t pid = 0;  // its pid in the document (its CPU rows)
  std::string name;       // process_name
  std::string labels;     // process_labels
  int sort_index = -1;    // process_sort_index, of its GPU rows too; -1: none
  std::string gpu_label;  // when several processes have GPU rows: "GPU <device> (<gpu_label>)"
  std::vector<ChromeMarker> markers;
  std::vector<ChromeSlice> slices;  // torch_xla's compiles, executions, transfers (cat "xla")
};

// One recording (one trace file's reports) and which of it goes in.
struct ChromeSource {
  const ActionsReport* actions = nullptr;
  const OpsReport* ops = nullptr;        // op slices of the listed processes
  const GpuReport* gpu = nullptr;        // GPU slices (kept) of the listed processes
  const MemoryReport* memory = nullptr;  // allocator events (kept) of the listed processes
  std::int64_t clock_offset_ns = 0;      // added to every time, after the recording's own clock pair
  std::vector<ChromeProcess> processes;
  // GPU slices of processes not listed go in too, under their OS pid.
  bool unlisted_gpu = false;
  // --steps/--window resolved for this recording; null: everything.
  const RangeFilter* range = nullptr;
  bool keeps(std::uint32_t os_pid, std::uint64_t begin_ns, std::uint64_t end_ns) const {
    return !range || range->keeps(os_pid, begin_ns, end_ns);
  }
  // A GPU slice: by its own times, or by its launch's (a step's kernels stay with it).
  bool keeps(const GpuSlice& s) const {
    return keeps(s.pid, s.begin_ns, s.end_ns) || (s.launch_ns && keeps(s.pid, s.launch_ns, s.launch_ns));
  }
};

// The "ltrace_bpf" lost-event counts.
struct ChromeLosses {
  std::uint64_t ringbuf_drops = 0, unreadable_names = 0, open_at_detach = 0, ended_before_attach = 0,
                estimated_durations = 0;
  bool complete = false;
};
ChromeLosses chrome_losses(const ActionsReport& rep);                              // every process
ChromeLosses chrome_losses(const ActionsReport& rep, const ProcessActions& proc);  // one

struct ChromeDocument {
  // distributedInfo, written first on its own line: Holistic Trace Analysis
  // takes a file's rank from the first line matching "rank":\s+(\d+)
  // (hta/common/trace_file.py), so nothing before it names a rank.
  int rank = 0, world_size = 1;
  bool absolute_time = false;  // "baseTimeNanoseconds": 0 (times already wall clock)
  std::string hostname;        // "" none
  // Members the caller adds first to the "ltrace_bpf" object, as JSON text
  // ("\"merged\": true, ..."), then the losses when given.
  std::string ltrace_members;
  std::optional<ChromeLosses> losses;
  // Each process's GPU rows in their own pid block even when only one
  // process has some: the document's pids are small numbers (ranks) that
  // kineto's pid = device would collide with.
  bool gpu_pid_blocks = false;
  std::vector<ChromeSource> sources;
};

// Events in order: each source's processes (metadata, actions, ops), then
// its GPU slices and flows; last, the GPU stream rows' names.  GPU rows of a
// process are under pid = device when only one process in the document has
// GPU slices (and no gpu_pid_blocks), else 1e9 + 64 * its pid + device,
// named "GPU <device> (<gpu_label>)"; flow ids are the CUPTI correlation id,
// plus 2^32 * the process's place among the GPU processes when there are
// several (correlation ids are per process).
void write_chrome_document(const ChromeDocument& doc, std::ostream& out);

// The document of one recording, as write_chrome_trace writes it (also the
// Perfetto writer's input).  The reports must outlive it.
ChromeDocument recording_document(const ActionsReport& rep, const OpsReport* ops, const GpuReport* gpu,
                                  const MemoryReport* memory, const RangeFilter* range = nullptr,
                                  const XlaReport* xla = nullptr);

}  // namespace lt
