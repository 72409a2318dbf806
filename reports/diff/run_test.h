// The test `ltrace-bpf diff` decides with when a side has several runs
// (issue 34): two runs of one job differ by more than their steps' spread
// (measured: -1.5 % to +1.3 % in the median step between runs of one fit on
// this machine: a process has an effect of its own -- memory layout, CPU
// frequency, neighbours), so a rank test over the steps of one run per side
// calls that a change. Over runs, each run gives one number per row, and
// the test is Welch's t on those numbers; with a single run on one side,
// the other side's variance between runs stands for both (Student's t,
// pooled: "is this run out of line with the baseline runs?").
// Pure functions, tested against tabulated values.
#pragma once
#include <vector>

namespace lt {

struct RunTest {
  double shift = 0;       // mean(b) - mean(a)
  double lo = 0, hi = 0;  // its confidence interval
  double p = 1;           // two-sided
  double df = 0;          // degrees of freedom (0: no test: a side empty, both single, or no spread on either)
};

// a, b: one value per run. level: the interval's confidence (0.95).
RunTest run_test(const std::vector<double>& a, const std::vector<double>& b, double level = 0.95);

// Student's t with `df` degrees of freedom: P(T > t), and its inverse.
double student_t_upper_tail(double t, double df);
double student_t_quantile(double p, double df);  // P(T <= q) = p, 0 < p < 1

}  // namespace lt
