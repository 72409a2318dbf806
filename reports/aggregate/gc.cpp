#include "reports/aggregate/gc.h"

#include <algorithm>
#include <utility>

#include "user/model/record_dispatch.h"

namespace lt {

void GcAggregator::add(const lt_event_header& h, const std::byte* record) {
  visit_record(h, record, [&](const lt_event_header& hh, const lt_py_gc_event& e) {
    // A pause runs from its start to its end, on one thread: anything else
    // is not a time this clock gave.
    if (e.begin_ns == 0 || e.begin_ns > hh.ts_ns) return;
    out_.procs[hh.pid].push_back({e.begin_ns, hh.ts_ns, e.collected, e.generation, hh.tid});
  });
}

GcReport GcAggregator::finish() {
  for (auto& [pid, v] : out_.procs)
    std::stable_sort(v.begin(), v.end(), [](const GcPause& a, const GcPause& b) { return a.begin_ns < b.begin_ns; });
  return std::move(out_);
}

std::uint64_t gc_ns_within(const std::vector<GcPause>& pauses, std::size_t& from, std::uint64_t begin,
                           std::uint64_t end) {
  while (from < pauses.size() && pauses[from].end_ns <= begin) ++from;
  std::uint64_t ns = 0;
  for (std::size_t i = from; i < pauses.size() && pauses[i].begin_ns < end; ++i) {
    const std::uint64_t b = std::max(begin, pauses[i].begin_ns), e = std::min(end, pauses[i].end_ns);
    if (e > b) ns += e - b;
  }
  return ns;
}

}  // namespace lt
