// torch's operator table (prof.key_averages().table(sort_by=..., row_limit=...),
// i.e. _build_table in torch/autograd/profiler_util.py, torch 2.15), byte for
// byte: the CPU columns, and the device columns ("Self CUDA", "Self CUDA %",
// "CUDA total", "CUDA time avg", footer "Self CUDA time total: ...") when the
// rows carry device time, and with profile_memory the memory columns ("CPU
// Mem", "Self CPU Mem", and "CUDA Mem", "Self CUDA Mem" when a row has device
// memory), torch 2.15's _format_memory ("1.50 MB", "-512 B").  No stacks, no overload names, no
// node ids, no FLOPs.  A pure function: no I/O.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lt {

// One aggregated operator, like torch's FunctionEventAvg.
struct OpRow {
  std::string name;          // "aten::add"
  std::string input_shapes;  // torch's str(list), e.g. "[[2, 3], [2, 3], []]"; "" when not grouped by shapes
  double self_cpu_us = 0;    // self CPU time total, microseconds
  double cpu_total_us = 0;   // CPU time total, microseconds
  std::uint64_t calls = 0;
  // Device time (torch's self_device_time_total / device_time_total), in
  // microseconds.  For a CPU op: the time of the kernels it launched (self:
  // its own, total: with its children's); for a device-side row (a kernel, a
  // memcpy, a memset, a GPU user annotation): its own time, both equal, with
  // the CPU times 0.  Runtime calls (cudaLaunchKernel) have none.
  double self_cuda_us = 0, cuda_total_us = 0;
  // Whether torch adds this row's self device time to "Self CUDA time total",
  // the base of "Self CUDA %": true for device-side events (kernels, memcpy,
  // memset), false for CPU ops, runtime calls and GPU user annotations (whose
  // share can then exceed 100%, as in torch).
  bool device_event = false;
  // Bytes allocated minus freed while the op ran (torch's cpu_memory_usage,
  // self_cpu_memory_usage, device_memory_usage, self_device_memory_usage).
  std::int64_t cpu_mem = 0, self_cpu_mem = 0, cuda_mem = 0, self_cuda_mem = 0;
};

struct OpTableOptions {
  // torch's sort_by: cpu_time (the per-call average), cpu_time_total,
  // self_cpu_time_total, count; cuda_time (the per-call average of
  // cuda_total_us), cuda_time_total, self_cuda_time_total (and the same with
  // xpu_/privateuse1_/device_); cpu_memory_usage, self_cpu_memory_usage,
  // cuda_memory_usage, self_cuda_memory_usage (the memory fields); flops
  // (always zero here, so it keeps the input order).  "" = no sort.  Anything else throws
  // std::invalid_argument (torch raises AttributeError).
  std::string sort_by = "cpu_time_total";
  int row_limit = 20;  // negative = all rows
  // Adds torch's "Input Shapes" column.  As in torch, the column is only shown
  // when at least one row has a non-empty shape list (not "" and not "[]").
  bool with_input_shapes = false;
  // The CPU times are sampled estimates: the five CPU time headers and the
  // CPU footer get a "~" suffix ("Self CPU~", "Self CPU time total~: ...").  A
  // column whose header then outgrows torch's 12 characters ("CPU time avg~")
  // is widened to fit it, so the table stays aligned.  The device headers and
  // footer never get it: device times are measured (CUPTI), not sampled.
  bool estimated = false;
  // torch's use_device: "" = CPU only (no device columns whatever the rows
  // hold; torch itself refuses device time without a device; sorting by a
  // cuda_ key still uses the fields), or "cuda"/"CUDA" (shown upper-cased, as
  // torch does).  With a device, the four device columns and the device footer
  // appear when some row has self_cuda_us > 0 (torch's has_device_time).  The
  // device headers keep torch's 12-character columns, so "CUDA time avg"
  // overhangs by one, as in torch.
  std::string device;
  // torch's profile_memory: the CPU memory columns, and with a device the
  // device ones when some row has self_cuda_mem > 0 (has_device_mem).
  bool profile_memory = false;
  // The memory cells as exact byte counts ("1048576") instead of torch's
  // rounded units: for scripts and tests (--memory-bytes).
  bool memory_bytes = false;
};

// The table text, ending in "\n" like torch's; "" when there are no rows.
std::string render_op_table(std::vector<OpRow> rows, const OpTableOptions& opt);

}  // namespace lt
