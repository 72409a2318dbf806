#include "user/model/exact_sum.h"

#include <cmath>
#include <utility>

namespace lt {

void ExactSum::add(double x) {
  std::size_t i = 0;
  for (std::size_t j = 0; j < partials_.size(); ++j) {
    double y = partials_[j];
    if (std::fabs(x) < std::fabs(y)) std::swap(x, y);
    const double hi = x + y;
    const double lo = y - (hi - x);
    if (lo != 0.0) partials_[i++] = lo;
    x = hi;
  }
  partials_.resize(i);
  partials_.push_back(x);
}

double ExactSum::value() const {
  if (partials_.empty()) return 0.0;
  // Sum from the top, with CPython's half-way correction.
  std::size_t n = partials_.size();
  double hi = partials_[--n], lo = 0.0;
  while (n > 0) {
    const double x = hi;
    const double y = partials_[--n];
    hi = x + y;
    const double yr = hi - x;
    lo = y - yr;
    if (lo != 0.0) break;
  }
  if (n > 0 && ((lo < 0.0 && partials_[n - 1] < 0.0) || (lo > 0.0 && partials_[n - 1] > 0.0))) {
    const double y = lo * 2.0;
    const double x = hi + y;
    const double yr = x - hi;
    if (y == yr) hi = x;
  }
  return hi;
}

}  // namespace lt
