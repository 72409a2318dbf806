// ExactSum: the running partials give math.fsum's correctly rounded result
// for any number and order of values, in bounded memory.  The oracle is
// independent: values on a fixed binary grid summed exactly as 128-bit
// integers, rounded once.
#include "user/model/exact_sum.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "reports/simple/number_format.h"

using lt::ExactSum;

namespace {

constexpr int kScale = 83;  // values are multiples of 2^-83 below 2^19

// A random double in ±[2^-31, 2^19) with a full 53-bit mantissa: a
// multiple of 2^-83, so the exact sum of up to 2^20 of them fits in 128 bits.
double adversarial(std::mt19937_64& rng, bool signs) {
  const int exp = static_cast<int>(rng() % 50) - 30;
  const double mant = 1.0 + static_cast<double>(rng() >> 12) / 4503599627370496.0;  // [1, 2), 52 bits
  const double x = std::ldexp(mant, exp - 1);
  return signs && (rng() & 1) ? -x : x;
}

double exact_oracle(const std::vector<double>& xs) {
  __int128 acc = 0;
  for (double x : xs) acc += static_cast<__int128>(std::ldexp(x, kScale));  // exact: x is on the grid
  return std::ldexp(static_cast<double>(acc), -kScale);                     // one correctly rounded conversion
}

}  // namespace

TEST(ExactSum, EqualsFsumOfTheWholeListOnAdversarialValues) {
  std::mt19937_64 rng(20261201);
  for (int round = 0; round < 200; ++round) {
    const bool signs = round % 2;
    std::vector<double> xs;
    ExactSum s;
    const int n = 1 + static_cast<int>(rng() % 2000);
    for (int i = 0; i < n; ++i) {
      xs.push_back(adversarial(rng, signs));
      // Cancellation: the sum passes near zero again and again.
      if (signs && i % 7 == 6) xs.push_back(-xs[xs.size() - 3]);
    }
    for (double x : xs) s.add(x);
    ASSERT_EQ(s.value(), exact_oracle(xs)) << "round " << round;
    ASSERT_EQ(s.value(), lt::python_fsum(xs)) << "round " << round;
  }
}

TEST(ExactSum, HalfwayCasesRoundToEvenAsFsum) {
  // 1 + 2^-53 is exactly half-way between 1 and its successor: fsum gives 1;
  // with a further 2^-100 it is past half-way and rounds up.
  ExactSum a;
  a.add(1.0);
  a.add(std::ldexp(1.0, -53));
  EXPECT_EQ(a.value(), 1.0);
  a.add(std::ldexp(1.0, -100));
  EXPECT_EQ(a.value(), std::nextafter(1.0, 2.0));
  // math.fsum([1e16, 1.0, 1e-16]) == 10000000000000002.0
  ExactSum b;
  for (double x : {1e16, 1.0, 1e-16}) b.add(x);
  EXPECT_EQ(b.value(), 10000000000000002.0);
  ExactSum c;
  for (double x : {1e100, 1.0, -1e100}) c.add(x);
  EXPECT_EQ(c.value(), 1.0);
  EXPECT_EQ(ExactSum().value(), 0.0);
}

TEST(ExactSum, MillionsOfDurationsKeepAFewPartials) {
  // Durations as the aggregator makes them: nanoseconds / 1e9 (not binary
  // fractions, so every addition leaves a rounding error to keep), 4 M of
  // them, against a naive sum whose error grows.
  std::mt19937_64 rng(7);
  ExactSum s;
  std::size_t most = 0;
  double naive = 0;
  for (int i = 0; i < 4'000'000; ++i) {
    const double d = static_cast<double>(rng() % 50'000'000) / 1e9;
    s.add(d);
    naive += d;
    most = std::max(most, s.partials());
  }
  EXPECT_LE(most, 16u);  // measured: 12; the hard bound is kMaxPartials
  EXPECT_LE(most, ExactSum::kMaxPartials);
  EXPECT_NEAR(s.value(), naive, 1e-6 * naive);
}

TEST(ExactSum, AdversarialMagnitudesStayFarBelowTheBound) {
  std::mt19937_64 rng(11);
  ExactSum s;
  std::size_t most = 0;
  for (int i = 0; i < 1'000'000; ++i) {
    const double x =
        std::ldexp(1.0 + static_cast<double>(rng() >> 12) / 4503599627370496.0, static_cast<int>(rng() % 2000) - 1000);
    s.add(rng() & 1 ? -x : x);
    most = std::max(most, s.partials());
  }
  EXPECT_LE(most, 128u);  // measured: 95 (values spanning 2^-1000..2^1000, both signs)
}
