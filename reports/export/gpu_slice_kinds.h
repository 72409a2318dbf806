// What the trace exports call a GPU slice: its category (kineto's names,
// which HTA and Perfetto's importers know) and whether it runs on the device.
#pragma once
#include <cstdint>

#include "bpf/events.h"
#include "reports/aggregate/gpu.h"

namespace lt {

inline const char* gpu_category(std::uint16_t kind) {
  switch (kind) {
    case LT_GPU_KERNEL:
      return "kernel";
    case LT_GPU_MEMCPY:
      return "gpu_memcpy";
    case LT_GPU_MEMSET:
      return "gpu_memset";
    case LT_GPU_RUNTIME:
      return "cuda_runtime";
    case LT_GPU_DRIVER:
      return "cuda_driver";
    default:
      return "nvtx";
  }
}

// Kernels, copies and sets run on a stream; API calls and NVTX on a thread.
inline bool on_device(const GpuSlice& s) {
  return s.kind == LT_GPU_KERNEL || s.kind == LT_GPU_MEMCPY || s.kind == LT_GPU_MEMSET;
}

}  // namespace lt
