// diff's test over runs (reports/diff/run_test.h): Student's t against
// tabulated quantiles and an integral of its density; Welch's t on a
// worked example; and, simulated, why a test over runs is needed.
#include "reports/diff/run_test.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "reports/diff/rank_test.h"

using namespace lt;

namespace {

// P(T > t) by Simpson's rule over the density: an independent way.
double tail_by_integral(double t, double df) {
  const double c = std::exp(std::lgamma((df + 1) / 2) - std::lgamma(df / 2)) / std::sqrt(df * M_PI);
  auto pdf = [&](double x) { return c * std::pow(1 + x * x / df, -(df + 1) / 2); };
  const int n = 20000;
  const double h = t / n;
  double s = pdf(0) + pdf(t);
  for (int i = 1; i < n; ++i) s += pdf(i * h) * (i % 2 ? 4 : 2);
  return 0.5 - s * h / 3;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

TEST(RunTest, StudentsTAgreesWithTablesAndItsDensity) {
  // Two-sided 95 % quantiles, from the usual tables.
  EXPECT_NEAR(student_t_quantile(0.975, 1), 12.7062, 1e-3);
  EXPECT_NEAR(student_t_quantile(0.975, 2), 4.3027, 1e-3);
  EXPECT_NEAR(student_t_quantile(0.975, 4), 2.7764, 1e-3);
  EXPECT_NEAR(student_t_quantile(0.975, 10), 2.2281, 1e-3);
  EXPECT_NEAR(student_t_quantile(0.975, 30), 2.0423, 1e-3);
  EXPECT_NEAR(student_t_quantile(0.025, 4), -2.7764, 1e-3);
  // Closed forms: the Cauchy (df 1) and df 2.
  EXPECT_NEAR(student_t_upper_tail(1, 1), 0.25, 1e-12);
  EXPECT_NEAR(student_t_upper_tail(1, 2), 0.5 - 1 / (2 * std::sqrt(3.0)), 1e-12);
  EXPECT_NEAR(student_t_upper_tail(-1, 1), 0.75, 1e-12);
  for (double df : {1.5, 3.0, 6.0, 8.7, 40.0})
    for (double t : {0.3, 1.0, 2.19, 4.0}) EXPECT_NEAR(student_t_upper_tail(t, df), tail_by_integral(t, df), 1e-7);
}

TEST(RunTest, WelchOnAWorkedExample) {
  // Means 2.5 and 4.5, both variances 5/3: se = sqrt(5/6), df = 6.
  const RunTest r = run_test({1, 2, 3, 4}, {3, 4, 5, 6});
  EXPECT_DOUBLE_EQ(r.shift, 2.0);
  EXPECT_NEAR(r.df, 6.0, 1e-9);
  const double se = std::sqrt(5.0 / 6.0);
  EXPECT_NEAR(r.p, 2 * tail_by_integral(2.0 / se, 6), 1e-7);
  EXPECT_NEAR(r.hi - r.shift, student_t_quantile(0.975, 6) * se, 1e-9);
  // One run against four: the four's variance stands for both.
  const RunTest one = run_test({1, 2, 3, 4}, {6});
  EXPECT_NEAR(one.df, 3.0, 1e-12);
  EXPECT_NEAR(one.p, 2 * tail_by_integral(3.5 / std::sqrt(5.0 / 3.0 * 1.25), 3), 1e-7);
  // One run each: nothing to test against.
  EXPECT_EQ(run_test({1}, {2}).df, 0);
  EXPECT_EQ(run_test({}, {2, 3}).p, 1);
  // Every run alike on each side (a sampled line's medians: whole periods):
  // no spread to test against, so no test, not p = 0.
  const RunTest tied = run_test({10, 10, 10}, {15, 15, 15});
  EXPECT_EQ(tied.df, 0);
  EXPECT_EQ(tied.p, 1);
  EXPECT_EQ(tied.shift, 5);
}

// Runs of one job differ by a run effect of their own (here 0.6 % of the
// step, about what bench/diff_aa.py measured between runs) on top of the
// steps' own spread (1 %). A rank test over one run's steps per side takes
// the run effect for a change; the test over five runs a side keeps its
// false positives at the level asked and still finds a 2 % regression.
TEST(RunTest, OverRunsTheRunEffectIsNoChangeAndTwoPercentIsFound) {
  std::mt19937 rng(7);
  std::normal_distribution<double> unit(0, 1);
  auto run_steps = [&](double mean) {
    const double effect = 0.006 * mean * unit(rng);
    std::vector<double> steps(30);
    for (auto& s : steps) s = mean + effect + 0.01 * mean * unit(rng);
    return steps;
  };
  auto side = [&](double mean, int runs) {
    std::vector<double> medians;
    for (int i = 0; i < runs; ++i) medians.push_back(median(run_steps(mean)));
    return medians;
  };
  const int repeats = 300;
  int aa_runs = 0, ab_runs = 0, aa_steps = 0;
  for (int i = 0; i < repeats; ++i) {
    aa_runs += run_test(side(0.1, 5), side(0.1, 5)).p < 0.05;
    const RunTest r = run_test(side(0.1, 5), side(0.102, 5));
    ab_runs += r.p < 0.05 && r.shift >= 0.001;  // diff's floor: 1 % of the step
    aa_steps += rank_test(run_steps(0.1), run_steps(0.1)).p < 0.05;
  }
  EXPECT_LE(aa_runs, repeats * 0.085) << aa_runs;  // 5 % expected; 8.5 %: 3 sigma of 300 draws
  EXPECT_GE(ab_runs, repeats * 0.95) << ab_runs;
  EXPECT_GE(aa_steps, repeats * 0.25) << aa_steps;  // the rank test over one run's steps cries wolf
}
