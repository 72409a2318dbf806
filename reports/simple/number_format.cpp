#include "reports/simple/number_format.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "user/model/exact_sum.h"

namespace lt {

std::string python_format_5(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  constexpr int precision = 5;
  char buf[64];
  // glibc rounds correctly (round-half-even on the exact binary value), as
  // CPython's dtoa does.
  std::snprintf(buf, sizeof buf, "%.*e", precision - 1, x);
  const char* e = std::strchr(buf, 'e');
  int exp10 = std::atoi(e + 1);
  if (exp10 < -4 || exp10 >= precision - 1) {
    std::string mant(buf, static_cast<std::size_t>(e - buf));
    if (mant.find('.') != std::string::npos) {
      while (mant.back() == '0') mant.pop_back();
      if (mant.back() == '.') mant.pop_back();
    }
    char ex[16];
    std::snprintf(ex, sizeof ex, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    return mant + ex;
  }
  std::snprintf(buf, sizeof buf, "%.*f", precision - 1 - exp10, x);
  std::string s(buf);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.push_back('0');
  } else {
    s += ".0";
  }
  return s;
}

double python_fsum(const std::vector<double>& xs) {
  ExactSum sum;
  for (double x : xs) sum.add(x);
  return sum.value();
}

std::string expand_tabs(const std::string& s, int tabsize) {
  std::string out;
  int col = 0;
  for (char c : s) {
    if (c == '\t') {
      int spaces = tabsize - (col % tabsize);
      out.append(spaces, ' ');
      col += spaces;
    } else {
      out.push_back(c);
      col = (c == '\n' || c == '\r') ? 0 : col + 1;
    }
  }
  return out;
}

}  // namespace lt
