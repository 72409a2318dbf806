#include "reports/comm/bandwidth.h"

#include "user/text/numbers.h"

namespace lt {

double nccl_tests_size(CommPattern p, std::uint64_t bytes, int n) {
  const double b = static_cast<double>(bytes);
  switch (p) {
    case CommPattern::all_reduce:
    case CommPattern::rooted:
    case CommPattern::all_to_all_whole:
    case CommPattern::point_to_point:
      return b;
    case CommPattern::per_rank_share:
      return n > 0 ? b * n : 0.0;
    case CommPattern::none:
      break;
  }
  return 0.0;
}

double nccl_tests_bus_factor(CommPattern p, int n) {
  if (n <= 0) return 0.0;
  const double d = n;
  switch (p) {
    case CommPattern::all_reduce:
      return 2.0 * (d - 1) / d;
    case CommPattern::per_rank_share:
    case CommPattern::all_to_all_whole:
      return (d - 1) / d;
    case CommPattern::rooted:
    case CommPattern::point_to_point:
      return 1.0;
    case CommPattern::none:
      break;
  }
  return 0.0;
}

std::string format_gbps(double v) {
  int decimals = 2;
  for (double x = v; x < 1.0 && decimals < 12; x *= 10) ++decimals;
  return fixed(v, decimals);
}

}  // namespace lt
