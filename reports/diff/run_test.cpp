#include "reports/diff/run_test.h"

#include <cmath>
#include <limits>

namespace lt {

namespace {

// The regularized incomplete beta function I_x(a, b), by its continued
// fraction (modified Lentz), on the side where it converges fast.
double beta_fraction(double a, double b, double x) {
  constexpr double tiny = 1e-300, eps = 1e-15;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  if (std::fabs(d) < tiny) d = tiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 500; ++m) {
    const double m2 = 2.0 * m;
    double num = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
    d = 1 + num * d;
    c = 1 + num / c;
    if (std::fabs(d) < tiny) d = tiny;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    h *= d * c;
    num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
    d = 1 + num * d;
    c = 1 + num / c;
    if (std::fabs(d) < tiny) d = tiny;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    const double step = d * c;
    h *= step;
    if (std::fabs(step - 1) < eps) break;
  }
  return h;
}

double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front =
      std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * beta_fraction(a, b, x) / a;
  return 1 - front * beta_fraction(b, a, 1 - x) / b;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double variance(const std::vector<double>& v, double m) {  // the sample variance (n - 1)
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / static_cast<double>(v.size() - 1);
}

}  // namespace

double student_t_upper_tail(double t, double df) {
  if (std::isnan(t) || df <= 0) return std::numeric_limits<double>::quiet_NaN();
  const double tail = 0.5 * incomplete_beta(df / 2, 0.5, df / (df + t * t));
  return t >= 0 ? tail : 1 - tail;
}

double student_t_quantile(double p, double df) {
  if (!(p > 0 && p < 1) || df <= 0) return std::numeric_limits<double>::quiet_NaN();
  if (p < 0.5) return -student_t_quantile(1 - p, df);
  // P(T > q) = 1 - p: the upper tail falls as q grows; bisect.
  double lo = 0, hi = 1;
  while (student_t_upper_tail(hi, df) > 1 - p && hi < 1e12) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = (lo + hi) / 2;
    (student_t_upper_tail(mid, df) > 1 - p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

RunTest run_test(const std::vector<double>& a, const std::vector<double>& b, double level) {
  RunTest r;
  if (a.empty() || b.empty()) return r;
  const double ma = mean(a), mb = mean(b);
  r.shift = r.lo = r.hi = mb - ma;
  const double na = static_cast<double>(a.size()), nb = static_cast<double>(b.size());
  double se2 = 0;
  if (a.size() >= 2 && b.size() >= 2) {  // Welch
    const double qa = variance(a, ma) / na, qb = variance(b, mb) / nb;
    se2 = qa + qb;
    const double den = qa * qa / (na - 1) + qb * qb / (nb - 1);
    r.df = den > 0 ? se2 * se2 / den : na + nb - 2;
  } else if (a.size() >= 2 || b.size() >= 2) {  // one run against the other side's runs
    const auto& many = a.size() >= 2 ? a : b;
    const double s2 = variance(many, a.size() >= 2 ? ma : mb);
    se2 = s2 * (1 / na + 1 / nb);
    r.df = static_cast<double>(many.size()) - 1;
  } else {
    return r;  // one run each: no variance between runs to test against
  }
  if (se2 <= 0) {
    // Every run alike on each side: no spread to test against. Alike
    // values are a quantum, not certainty: a sampled line's per-run median
    // is a whole number of sampling periods, and three runs of it may tie
    // (an audit: a one-sample shift at p = 0, beside the measured op of
    // that line at p = 0.21). No test, as with one run each.
    r.df = 0;
    return r;
  }
  const double se = std::sqrt(se2);
  r.p = std::fmin(1.0, 2 * student_t_upper_tail(std::fabs(r.shift) / se, r.df));
  const double q = student_t_quantile(0.5 + level / 2, r.df);
  r.lo = r.shift - q * se;
  r.hi = r.shift + q * se;
  return r;
}

}  // namespace lt
