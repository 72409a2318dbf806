// Order statistics the reports share.
#pragma once
#include <algorithm>
#include <cstddef>
#include <vector>

namespace lt {

// The median; of an even count, the point halfway between the middle two,
// as lo + (hi - lo) / 2 (no overflow; for integers rounded toward lo).
// T{} for none.  Takes a copy: it reorders.
template <typename T>
T median_of(std::vector<T> v) {
  if (v.empty()) return T{};
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  const T hi = v[mid];
  if (v.size() % 2) return hi;
  const T lo = *std::max_element(v.begin(), v.begin() + mid);
  return lo + (hi - lo) / 2;
}

}  // namespace lt
