// The raw values of one row of a GPU summary table (reports/gpu/gpu_tables.h),
// as the GPU aggregator collects them, and the names nsys gives memory
// operations.  Kept under the aggregators so that they do not depend on the
// renderers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lt {

// One row's raw values: what nsys's SQL aggregates from the trace.  Entries
// with the same key (name, and for NVTX also style and domain) are merged
// into one row; an entry without values (no durations, or for the size table
// no bytes) gives no row.
struct DurationStat {
  // Kernel name (as the caller wants it shown: demangled, or short_kernel_name),
  // CUDA API function (cudaLaunchKernel, ...), memory operation
  // (memcpy_operation_name / memset_operation_name), or NVTX range message.
  std::string name;
  std::vector<std::uint64_t> durations_ns;  // one per instance / call
  std::vector<std::uint64_t> bytes;         // cuda_gpu_mem_size_sum only: one per copy or memset
  std::string style;                        // nvtx_sum only: "PushPop" or "StartEnd"
  std::string domain;                       // nvtx_sum only: "" = the default domain
};

// nsys's operation name for a CUpti_ActivityMemcpyKind: 1 HtoD
// "[CUDA memcpy Host-to-Device]", 2 DtoH, 3 HtoA, 4 AtoH, 5 AtoA, 6 AtoD,
// 7 DtoA, 8 DtoD "[CUDA memcpy Device-to-Device]", 9 HtoH, 10 PtoP
// "[CUDA memcpy Peer-to-Peer]"; anything else "[CUDA memcpy Unknown]".
std::string memcpy_operation_name(std::uint8_t copy_kind);
// "[CUDA memset]".
std::string memset_operation_name();

}  // namespace lt
