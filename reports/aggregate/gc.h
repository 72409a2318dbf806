// CPython's garbage collections (PY_GC records, the pygc source) per
// process, in time order: what the verdict's GC finding charges to the
// train steps they fall in (reports/verdict/findings.h).  For a CPython
// without gc probes, the stack samples taken inside a collection
// (LT_SAMPLE_IN_GC) instead: an estimate, samples x the period.
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include "bpf/events.h"

namespace lt {

struct GcPause {
  std::uint64_t begin_ns = 0, end_ns = 0;
  std::int64_t collected = 0;  // objects found unreachable (-1: the collection failed)
  std::int32_t generation = 0;
  std::uint32_t tid = 0;
};

// A stack sample taken inside a collection.
struct GcSample {
  std::uint64_t ts_ns = 0;
  std::uint32_t weight = 1;  // sampling periods it stands for (sample_weight.h)
};

struct GcReport {
  std::map<std::uint32_t, std::vector<GcPause>> procs;     // by pid, by start
  std::uint64_t period_ns = 0;                             // the on-CPU sampling period (0: none)
  std::map<std::uint32_t, std::vector<GcSample>> sampled;  // by pid, in time order
  bool any() const { return !procs.empty() || (period_ns && !sampled.empty()); }
};

class GcAggregator {
 public:
  void add(const lt_event_header& h, const std::byte* record);
  GcReport finish();  // each process's pauses by start

 private:
  GcReport out_;
};

// The time collections spent inside [begin, end) (each clipped to it), in
// ns; `pauses` in time order, `from` the first index that may overlap (moved
// on, so that consecutive windows in order cost one pass).
std::uint64_t gc_ns_within(const std::vector<GcPause>& pauses, std::size_t& from, std::uint64_t begin,
                           std::uint64_t end);
// The same from samples: the periods of those in [begin, end), in ns.
std::uint64_t gc_ns_within(const std::vector<GcSample>& samples, std::uint64_t period_ns, std::size_t& from,
                           std::uint64_t begin, std::uint64_t end);

}  // namespace lt
