// A running sum of doubles with no rounding error until it is read:
// Shewchuk's non-overlapping partials, as CPython's math.fsum keeps them
// (mathmodule.c msum), updated as each value arrives.  value() equals
// math.fsum over the whole series, bit for bit, yet the series itself is
// never stored: a live attach sums millions of durations in constant
// memory.  Finite inputs only (durations): the partials are
// non-overlapping doubles, each owning bits of its own among the 2098 bit
// positions from the smallest subnormal to the largest double, so there
// are never more than kMaxPartials of them whatever the number or order
// of the values (measured: 12 over 4 M durations, tests/unit/exact_sum_test.cpp).
#pragma once
#include <cstddef>
#include <vector>

namespace lt {

class ExactSum {
 public:
  static constexpr std::size_t kMaxPartials = 2098;

  void add(double x);
  // math.fsum's correctly rounded result (its half-way correction included).
  double value() const;
  std::size_t partials() const { return partials_.size(); }

 private:
  std::vector<double> partials_;  // increasing magnitude, non-overlapping
};

}  // namespace lt
