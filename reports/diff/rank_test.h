// The statistics `ltrace-bpf diff` decides with (issue 34): the
// Mann-Whitney U test (two-sided, normal approximation with the tie and
// continuity corrections; benchstat's default), the Hodges-Lehmann shift
// (the median of every B - A difference) with its distribution-free
// confidence interval, and Holm's correction for the number of rows
// compared. Pure functions, tested against exact enumeration.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace lt {

struct RankTest {
  double u = 0;           // U of B over A: pairs (a, b) with b > a, ties counted 1/2
  double p = 1;           // two-sided p-value (1 when either side is empty)
  double shift = 0;       // Hodges-Lehmann: median of b - a over every pair
  double lo = 0, hi = 0;  // its confidence interval (level given)
};

// a, b: samples (any order). level: the interval's confidence (0.95).
RankTest rank_test(std::vector<double> a, std::vector<double> b, double level = 0.95);

// Past this many pairs, the shift and its interval are selected from the
// differences without forming them (memory and time O(n + m)).
inline constexpr std::size_t kFormedDifferences = std::size_t{1} << 22;
// The r-th smallest (1-based, 1 <= r <= n*m) of every b_j - a_i; a and b
// sorted ascending, neither empty.
double kth_difference(const std::vector<double>& a, const std::vector<double>& b, std::uint64_t r);

// Holm-Bonferroni: adjusted p-values, same order as given (each <= 1).
std::vector<double> holm(const std::vector<double>& p);

// The standard normal's upper tail, P(Z > z), and its inverse.
double normal_upper_tail(double z);
double normal_quantile(double p);  // P(Z <= q) = p, 0 < p < 1

}  // namespace lt
