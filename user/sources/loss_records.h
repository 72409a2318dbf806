// PROC_DROPS records from the BPF loss counters at detach: one per
// (process, record kind, cause) the bounded per-process table holds, and
// one with pid 0 per cause for what the table could not hold, so the
// records always add up to the global totals (lt_drop_counters).
#pragma once
#include <vector>

#include "bpf/events.h"

namespace lt {

struct LossCount {
  lt_loss_key key;
  std::uint64_t count;
};

// ts_ns goes into every header (the detach time).
std::vector<lt_proc_drops_event> loss_records(const std::vector<LossCount>& attributed, const lt_drop_counters& totals,
                                              std::uint64_t ts_ns);

}  // namespace lt
