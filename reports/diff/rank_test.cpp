#include "reports/diff/rank_test.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace lt {

double normal_upper_tail(double z) {
  return 0.5 * std::erfc(z / std::sqrt(2.0));
}

// Acklam's rational approximation, refined by one Newton step on erfc
// (|error| < 1e-12 over (0, 1)).
double normal_quantile(double p) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  double q, x;
  if (p < 0.02425) {
    q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p > 1 - 0.02425) {
    q = std::sqrt(-2 * std::log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else {
    q = p - 0.5;
    const double r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  }
  const double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  const double u = e * std::sqrt(2 * M_PI) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

// The r-th smallest (1-based) of every b_j - a_i, a and b sorted, without
// forming the n*m differences (a run of 100,000 steps a side would be 10^10
// of them): bisection on the value, counting the differences <= d by one
// sweep of both (O(n + m) each), down to a tenth of a nanosecond (durations
// are whole nanoseconds, in seconds: distinct differences are ~1e-9 apart);
// then the smallest difference past the last value known to count fewer
// than r, stepped on while it counts fewer (exact for any input).
double kth_difference(const std::vector<double>& a, const std::vector<double>& b, std::uint64_t r) {
  auto count_le = [&](double d) {
    std::uint64_t c = 0;
    std::size_t j = 0;
    for (double x : a) {  // x grows, so b_j - x <= d holds for more j
      while (j < b.size() && b[j] - x <= d) ++j;
      c += j;
    }
    return c;
  };
  double lo = b.front() - a.back(), hi = b.back() - a.front();
  if (count_le(lo) >= r) return lo;
  for (int i = 0; i < 200 && hi - lo > 1e-10; ++i) {
    const double mid = lo + (hi - lo) / 2;
    if (mid <= lo || mid >= hi) break;
    (count_le(mid) >= r ? hi : lo) = mid;
  }
  // count_le(lo) < r <= count_le(hi): the r-th is in (lo, hi].
  for (;;) {
    double next = hi;
    std::size_t j = 0;
    for (double x : a) {
      while (j < b.size() && b[j] - x <= lo) ++j;
      if (j < b.size()) next = std::min(next, b[j] - x);
    }
    if (next >= hi || count_le(next) >= r) return next;
    lo = next;  // a difference ranked below r in (lo, hi]: past it
  }
}

RankTest rank_test(std::vector<double> a, std::vector<double> b, double level) {
  RankTest r;
  const std::size_t n = a.size(), m = b.size();
  if (!n || !m) return r;
  // Ranks of the pooled samples, ties at their mean rank.
  std::vector<std::pair<double, int>> all;
  all.reserve(n + m);
  for (double x : a) all.emplace_back(x, 0);
  for (double x : b) all.emplace_back(x, 1);
  std::sort(all.begin(), all.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  double rank_sum_b = 0, ties = 0;
  for (std::size_t i = 0; i < all.size();) {
    std::size_t j = i;
    while (j < all.size() && all[j].first == all[i].first) ++j;
    const double mean_rank = (i + 1 + j) / 2.0;
    const double t = static_cast<double>(j - i);
    ties += t * t * t - t;
    for (std::size_t k = i; k < j; ++k)
      if (all[k].second) rank_sum_b += mean_rank;
    i = j;
  }
  const double N = static_cast<double>(n + m), nn = static_cast<double>(n), mm = static_cast<double>(m);
  r.u = rank_sum_b - mm * (mm + 1) / 2;
  const double mean = nn * mm / 2;
  const double var = nn * mm / 12 * ((N + 1) - ties / (N * (N - 1)));
  if (var > 0) {
    const double z = (std::fabs(r.u - mean) - 0.5) / std::sqrt(var);
    r.p = std::min(1.0, 2 * normal_upper_tail(std::max(0.0, z)));
  }
  // Hodges-Lehmann: the median of the n*m differences, and the interval
  // between the differences ranked k and n*m + 1 - k, k from U's
  // distribution (normal approximation). Up to 4 M differences are formed
  // and sorted; past that, each one needed is selected (kth_difference).
  const std::size_t k = n * m;
  const double zq = normal_quantile(1 - (1 - level) / 2);
  const double c = std::floor(mean - zq * std::sqrt(nn * mm * (N + 1) / 12));
  const std::size_t lo = std::min(c >= 1 ? static_cast<std::size_t>(c) - 1 : 0, k - 1);
  const std::size_t hi = std::min(c >= 1 ? k - static_cast<std::size_t>(c) : k - 1, k - 1);
  if (k <= kFormedDifferences) {
    std::vector<double> diffs;
    diffs.reserve(k);
    for (double x : a)
      for (double y : b) diffs.push_back(y - x);
    std::sort(diffs.begin(), diffs.end());
    r.shift = k % 2 ? diffs[k / 2] : (diffs[k / 2 - 1] + diffs[k / 2]) / 2;
    r.lo = diffs[lo];
    r.hi = diffs[hi];
    return r;
  }
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  auto nth = [&](std::size_t i) { return kth_difference(a, b, i + 1); };  // 0-based, as above
  r.shift = k % 2 ? nth(k / 2) : (nth(k / 2 - 1) + nth(k / 2)) / 2;
  r.lo = nth(lo);
  r.hi = nth(hi);
  return r;
}

std::vector<double> holm(const std::vector<double>& p) {
  std::vector<std::size_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return p[x] < p[y]; });
  std::vector<double> out(p.size());
  double running = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const double adj = std::min(1.0, p[order[i]] * static_cast<double>(p.size() - i));
    running = std::max(running, adj);  // adjusted p-values never decrease along the order
    out[order[i]] = running;
  }
  return out;
}

}  // namespace lt
