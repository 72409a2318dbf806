#include "reports/aggregate/gc.h"

#include <algorithm>
#include <utility>

#include "reports/aggregate/sample_weight.h"
#include "user/model/record_dispatch.h"

namespace lt {

void GcAggregator::add(const lt_event_header& h, const std::byte* record) {
  visit_record(
      h, record,
      overloaded{[&](const lt_event_header& hh, const lt_py_gc_event& e) {
                   // A pause runs from its start to its end, on one thread:
                   // anything else is not a time this clock gave.
                   if (e.begin_ns == 0 || e.begin_ns > hh.ts_ns) return;
                   out_.procs[hh.pid].push_back({e.begin_ns, hh.ts_ns, e.collected, e.generation, hh.tid});
                 },
                 [&](const lt_event_header&, const lt_sampler_info_event& e) {
                   if (e.flags & LT_SAMPLER_ON_CPU) out_.period_ns = e.period_ns;
                 },
                 [&](const lt_event_header& hh, const lt_py_sample_event& e) {
                   if (hh.kind == LT_EV_PY_SAMPLE && (e.flags & LT_SAMPLE_IN_GC) && !(e.flags & LT_SAMPLE_IN_PROBE))
                     out_.sampled[hh.pid].push_back({hh.ts_ns, static_cast<std::uint32_t>(sample_weight(e))});
                 }});
}

GcReport GcAggregator::finish() {
  for (auto& [pid, v] : out_.procs)
    std::stable_sort(v.begin(), v.end(), [](const GcPause& a, const GcPause& b) { return a.begin_ns < b.begin_ns; });
  for (auto& [pid, v] : out_.sampled)
    std::stable_sort(v.begin(), v.end(), [](const GcSample& a, const GcSample& b) { return a.ts_ns < b.ts_ns; });
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

std::uint64_t gc_ns_within(const std::vector<GcSample>& samples, std::uint64_t period_ns, std::size_t& from,
                           std::uint64_t begin, std::uint64_t end) {
  while (from < samples.size() && samples[from].ts_ns < begin) ++from;
  std::uint64_t ns = 0;
  for (std::size_t i = from; i < samples.size() && samples[i].ts_ns < end; ++i) ns += samples[i].weight * period_ns;
  return ns;
}

}  // namespace lt
