#include "reports/verdict/spans.h"

#include <algorithm>

namespace lt {

namespace {

// The first span that may end after `ts`: the one beginning at or before
// it, else the first.
Spans::const_iterator from(const Spans& spans, std::uint64_t ts) {
  auto it =
      std::upper_bound(spans.begin(), spans.end(), ts, [](std::uint64_t x, const Span& s) { return x < s.first; });
  return it == spans.begin() ? it : std::prev(it);
}

}  // namespace

Spans merged_spans(Spans v) {
  std::sort(v.begin(), v.end());
  Spans out;
  for (const auto& x : v)
    if (!out.empty() && x.first <= out.back().second)
      out.back().second = std::max(out.back().second, x.second);
    else
      out.push_back(x);
  return out;
}

std::uint64_t covered(const Spans& spans, std::uint64_t a, std::uint64_t b) {
  if (b <= a) return 0;
  std::uint64_t ns = 0;
  for (auto it = from(spans, a); it != spans.end() && it->first < b; ++it)
    if (it->second > a) ns += std::min(it->second, b) - std::max(it->first, a);
  return ns;
}

const Span* span_at(const Spans& spans, std::uint64_t ts) {
  const auto it = from(spans, ts);
  return it != spans.end() && it->first <= ts && ts < it->second ? &*it : nullptr;
}

}  // namespace lt
