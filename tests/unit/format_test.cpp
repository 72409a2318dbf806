// The shared text helpers (user/text/): every report's numbers and
// columns go through them, so each must give exactly the bytes of the
// printf format it replaced, and of the Python format it imitates.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "user/text/code_points.h"
#include "user/text/numbers.h"
#include "user/text/stats.h"
#include "user/text/utf8_text.h"

using namespace lt;

namespace {

std::string printf_str(const char* f, double v, int decimals) {
  char b[512];
  std::snprintf(b, sizeof b, f, decimals, v);
  return b;
}

// Values where rounding is decided: exact binary ties, near-ties, signs,
// zeros, non-finite, and values no 64-byte buffer holds.
std::vector<double> hard_values() {
  return {0.0,
          -0.0,
          0.5,
          1.5,
          2.5,
          0.125,
          0.375,
          -0.125,
          0.045,
          1.005,
          2.675,
          1234.5,
          0.0005,
          999.9995,
          1e22,
          1e300,
          -1e300,
          5e-324,
          1e-310,
          0.05,
          99.95,
          100.05,
          123456.75,
          9007199254740993.0,
          std::numeric_limits<double>::max(),
          NAN,
          -NAN,
          INFINITY,
          -INFINITY};
}

}  // namespace

// fixed/signed_fixed/percent replaced "%.*f", "%+.*f", "%.*f%%": byte for byte.
TEST(FormatNumbers, FixedIsPrintfOnHardValues) {
  for (double v : hard_values())
    for (int d = 0; d <= 9; ++d) {
      EXPECT_EQ(fixed(v, d), printf_str("%.*f", v, d)) << v << " " << d;
      EXPECT_EQ(signed_fixed(v, d), printf_str("%+.*f", v, d)) << v << " " << d;
      EXPECT_EQ(percent(v, d), printf_str("%.*f%%", v, d)) << v << " " << d;
    }
}

TEST(FormatNumbers, FixedIsPrintfOnRandomValues) {
  std::mt19937_64 rng(17);
  for (int i = 0; i < 50000; ++i) {
    double v;
    if (i % 2) {
      // Any finite double (random bits).
      const std::uint64_t bits = rng();
      std::memcpy(&v, &bits, sizeof v);
      if (!std::isfinite(v)) continue;
    } else {
      // Dyadic and decimal fractions of the size reports print: ties are common.
      v = static_cast<double>(rng() % 100000000) / static_cast<double>(1u << (rng() % 16));
      if (i % 4 == 0) v = static_cast<double>(rng() % 10000000) / 1e6;
    }
    const int d = static_cast<int>(rng() % 8);
    ASSERT_EQ(fixed(v, d), printf_str("%.*f", v, d)) << v << " " << d;
  }
}

// Python: f"{x:.3f}" etc. (checked with CPython 3.11).
TEST(FormatNumbers, MatchesPython) {
  EXPECT_EQ(fixed(0.125, 2), "0.12");
  EXPECT_EQ(fixed(0.375, 2), "0.38");
  EXPECT_EQ(fixed(2.675, 2), "2.67");
  EXPECT_EQ(fixed(2.5, 0), "2");
  EXPECT_EQ(fixed(3.5, 0), "4");
  EXPECT_EQ(fixed(-0.0, 1), "-0.0");
  EXPECT_EQ(signed_fixed(0.0, 3), "+0.000");
  EXPECT_EQ(signed_fixed(-1.2345, 3), "-1.234");
  EXPECT_EQ(percent(12.345, 2), "12.35%");  // 12.345 is 12.3450000000000006394884621841
  EXPECT_EQ(grouped(0), "0");
  EXPECT_EQ(grouped(999), "999");
  EXPECT_EQ(grouped(1000), "1,000");
  EXPECT_EQ(grouped(1234567), "1,234,567");
  EXPECT_EQ(grouped(18446744073709551615ull), "18,446,744,073,709,551,615");
  EXPECT_EQ(grouped_fixed(1234567.25, 1), "1,234,567.2");
  EXPECT_EQ(grouped_fixed(999.96, 1), "1,000.0");
  EXPECT_EQ(grouped_fixed(12.5, 3), "12.500");
}

TEST(FormatNumbers, Durations) {
  EXPECT_EQ(ns_as_ms(1234567, 3), "1.235");
  EXPECT_EQ(ns_as_ms(-1500, 3), "-0.002");
  EXPECT_EQ(ns_as_s(1500000000, 6), "1.500000");
  EXPECT_EQ(ns_as_s(1, 3), "0.000");
  // The same bytes as the expressions they replaced: ns / 1e6, "%.3f".
  for (std::int64_t ns : {0LL, 1LL, 499LL, 500LL, 1500LL, 2500LL, 123456789LL, -987654321LL, 9007199254740993LL}) {
    EXPECT_EQ(ns_as_ms(ns, 3), printf_str("%.*f", ns / 1e6, 3));
    EXPECT_EQ(ns_as_s(ns, 6), printf_str("%.*f", ns / 1e9, 6));
  }
}

TEST(FormatNumbers, Hex) {
  EXPECT_EQ(hex(0), "0");
  EXPECT_EQ(hex(0x7f3a00001000ull), "7f3a00001000");
  EXPECT_EQ(hex(~0ull), "ffffffffffffffff");
  EXPECT_EQ(hex(0x0a, 2), "0a");
  EXPECT_EQ(hex(0x1f, 2, HexCase::upper), "1F");
  EXPECT_EQ(hex(0xabc, 2), "abc");  // a minimum, never a truncation
  for (std::uint64_t v : {0ull, 1ull, 0xffull, 0x1234ull, 0xdeadbeefcafeull}) {
    char b[32];
    std::snprintf(b, sizeof b, "%llx", static_cast<unsigned long long>(v));
    EXPECT_EQ(hex(v), b);
    std::snprintf(b, sizeof b, "%02X", static_cast<unsigned>(v & 0xff));
    EXPECT_EQ(hex(v & 0xff, 2, HexCase::upper), b);
  }
}

// Python's len / ljust / rjust / s[:n] count code points, not bytes.
TEST(FormatCodePoints, PadAndSlice) {
  EXPECT_EQ(cp_len(""), 0u);
  EXPECT_EQ(cp_len("temp °C"), 7u);
  EXPECT_EQ(cp_len("\xE2\x80\xA6"), 1u);
  // not UTF-8: as wide as the writers print it (utf8_text)
  for (const std::string& s : {std::string("a\xFF"
                                           "b"),
                               std::string("\x80"), std::string("x\xED\xA0\x80"), std::string("\xE2\x80")})
    EXPECT_EQ(cp_len(s), cp_len(utf8_text(s))) << utf8_text(s);
  EXPECT_EQ(pad_left("ab", 5), "   ab");
  EXPECT_EQ(pad_right("ab", 5), "ab   ");
  EXPECT_EQ(pad_left("°C", 4), "  °C");
  EXPECT_EQ(pad_right("°C", 4), "°C  ");
  EXPECT_EQ(pad_left("toolong", 3), "toolong");
  EXPECT_EQ(pad_right("toolong", 3), "toolong");
  EXPECT_EQ(pad_right("", 2), "  ");
  EXPECT_EQ(cp_prefix("a°bc", 2), "a°");
  EXPECT_EQ(cp_prefix("ab", 5), "ab");
}

TEST(FormatStats, Median) {
  EXPECT_EQ(median_of(std::vector<std::int64_t>{}), 0);
  EXPECT_EQ(median_of(std::vector<std::int64_t>{7}), 7);
  EXPECT_EQ(median_of(std::vector<std::int64_t>{9, 1, 5}), 5);
  EXPECT_EQ(median_of(std::vector<std::int64_t>{4, 1, 3, 2}), 2);  // 2.5 toward the lower
  EXPECT_EQ(median_of(std::vector<std::int64_t>{-3, -4}), -4);     // -3.5 toward the lower
  const std::int64_t big = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(median_of(std::vector<std::int64_t>{big, big - 2}), big - 1);  // no overflow
  EXPECT_DOUBLE_EQ(median_of(std::vector<double>{0.004, 0.001, 0.002, 0.003}), 0.0025);
  EXPECT_DOUBLE_EQ(median_of(std::vector<double>{}), 0.0);
}
