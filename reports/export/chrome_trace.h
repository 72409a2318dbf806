// Chrome / Perfetto trace in PyTorch profiler (kineto) conventions:
// complete "X" events with cat "user_annotation" for Lightning actions
// and "cpu_op" for aten ops
// (nested per thread by time), process_name / thread_name metadata,
// distributedInfo for the rank, and ltrace-bpf's lost-event counts.
// Loads in Perfetto, chrome://tracing and Holistic Trace Analysis.
#pragma once
#include <ostream>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/gpu.h"
#include "reports/aggregate/ops.h"

namespace lt {
// Built from reports aggregated with keep_intervals = true.  With `ops`,
// every op call is a "cpu_op" slice (kineto's category); its end is an upper
// bound (args "end": "upper bound"): no probe sees an op return.
// With `gpu` (slices kept), kernels, copies and memsets are "kernel" /
// "gpu_memcpy" / "gpu_memset" slices on a GPU row per device and stream
// (kineto: pid = device, tid = stream), CUDA API calls "cuda_runtime" /
// "cuda_driver" slices on their thread, "ac2g" flows from each launch call
// to its kernel (by CUPTI correlation id), and NVTX ranges "nvtx" slices.
void write_chrome_trace(const ActionsReport& rep, std::ostream& out, const OpsReport* ops = nullptr,
                        const GpuReport* gpu = nullptr);
}  // namespace lt
