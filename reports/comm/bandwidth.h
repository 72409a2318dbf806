// nccl-tests' bandwidths (its doc/PERFORMANCE.md): algbw = S / time and
// busbw = algbw * a factor of the collective's pattern and the group size
// n, where S is nccl-tests' data size.  Shared by the c10d table and the
// NCCL table of `--report comm`.
#pragma once
#include <cstdint>
#include <string>

namespace lt {

enum class CommPattern {
  none,              // no bandwidth (barrier, unknown)
  all_reduce,        // S = the buffer; factor 2(n-1)/n
  rooted,            // broadcast, reduce: S = the buffer; factor 1
  per_rank_share,    // the gathers, the scatters, reduce-scatter, NCCL's all-to-all: the size is 1/n of S; (n-1)/n
  all_to_all_whole,  // torch's all_to_all_single: the size is S; factor (n-1)/n
  point_to_point,    // send, recv: S = the buffer; factor 1
};

// S from this rank's size in bytes; 0 where n is needed and unknown (n <= 0).
double nccl_tests_size(CommPattern p, std::uint64_t bytes, int n);
// The busbw factor; 0 unknown.
double nccl_tests_bus_factor(CommPattern p, int n);
// GB/s with three significant digits at least (gloo moves small messages: 0.0000198).
std::string format_gbps(double v);

}  // namespace lt
