// GPU summary tables in the layout of `nsys stats` (its default "column"
// format): cuda_gpu_kern_sum, cuda_gpu_mem_time_sum, cuda_gpu_mem_size_sum,
// cuda_api_sum and nvtx_sum.  Pure functions: no I/O.
//
// The layout, as nsys prints it:
//  * every line starts with one space, columns are joined by two spaces;
//  * a column is as wide as its widest cell or its header; headers are centred
//    (Python's "{:^w}": an odd leftover space goes to the right), numbers are
//    right-aligned, the text columns (Name, Style, Range, Operation) are
//    left-aligned and padded to the column width, trailing spaces included;
//  * a line of dashes (one run per column) under the header;
//  * text longer than 100 characters is cut to 99 and "…" (nsys's default
//    column limit); widths and cuts count code points, not bytes;
//  * numbers: integers and one-decimal values with "," thousands separators
//    (Total/Min/Max/Instances/Count/Num Calls integers; Avg/Med/StdDev one
//    decimal), Time (%) one decimal, megabytes (10^6 bytes) three decimals;
//  * rows sorted by total time (sizes: total bytes) descending, ties by name;
//  * Med is the median of the values (the mean of the middle two for an even
//    count), StdDev the sample standard deviation (n - 1), 0 for one value.
// The tables carry no title and no blank lines around them; the caller adds
// those.  Each function returns "" when it has no rows.
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

// cuda_gpu_kern_sum:
//  Time (%)  Total Time (ns)  Instances  Avg (ns)  Med (ns)  Min (ns)  Max (ns)  StdDev (ns)  Name
std::string render_gpu_kern_sum(std::vector<DurationStat> kernels);

// cuda_gpu_mem_time_sum:
//  Time (%)  Total Time (ns)  Count  Avg (ns)  Med (ns)  Min (ns)  Max (ns)  StdDev (ns)  Operation
std::string render_gpu_mem_time_sum(std::vector<DurationStat> operations);

// cuda_gpu_mem_size_sum (from `bytes`; durations are not used):
//  Total (MB)  Count  Avg (MB)  Med (MB)  Min (MB)  Max (MB)  StdDev (MB)  Operation
std::string render_gpu_mem_size_sum(std::vector<DurationStat> operations);

// cuda_api_sum:
//  Time (%)  Total Time (ns)  Num Calls  Avg (ns)  Med (ns)  Min (ns)  Max (ns)  StdDev (ns)  Name
std::string render_api_sum(std::vector<DurationStat> calls);

// nvtx_sum; a range of a named domain is shown "domain:range", as nsys does:
//  Time (%)  Total Time (ns)  Instances  Avg (ns)  Med (ns)  Min (ns)  Max (ns)  StdDev (ns)  Style  Range
std::string render_nvtx_sum(std::vector<DurationStat> ranges);

// nsys's operation name for a CUpti_ActivityMemcpyKind: 1 HtoD
// "[CUDA memcpy Host-to-Device]", 2 DtoH, 3 HtoA, 4 AtoH, 5 AtoA, 6 AtoD,
// 7 DtoA, 8 DtoD "[CUDA memcpy Device-to-Device]", 9 HtoH, 10 PtoP
// "[CUDA memcpy Peer-to-Peer]"; anything else "[CUDA memcpy Unknown]".
std::string memcpy_operation_name(std::uint8_t copy_kind);
// "[CUDA memset]".
std::string memset_operation_name();

}  // namespace lt
