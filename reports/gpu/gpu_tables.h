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

#include "reports/aggregate/duration_stat.h"

namespace lt {

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

}  // namespace lt
