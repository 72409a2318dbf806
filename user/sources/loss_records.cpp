#include "user/sources/loss_records.h"

#include <algorithm>
#include <tuple>

namespace lt {

namespace {

lt_proc_drops_event record(std::uint32_t pid, std::uint16_t kind, std::uint16_t cause, std::uint64_t n,
                           std::uint64_t ts_ns) {
  lt_proc_drops_event e{};
  e.hdr.kind = LT_EV_PROC_DROPS;
  e.hdr.size = sizeof e;
  e.hdr.pid = e.hdr.tid = pid;
  e.hdr.ts_ns = ts_ns;
  e.lost_kind = kind;
  e.cause = cause;
  e.count = n;
  return e;
}

}  // namespace

std::vector<lt_proc_drops_event> loss_records(const std::vector<LossCount>& attributed, const lt_drop_counters& totals,
                                              std::uint64_t ts_ns) {
  std::vector<lt_proc_drops_event> out;
  std::uint64_t by_cause[4] = {};
  for (auto& l : attributed) {
    if (!l.count || l.key.cause == 0 || l.key.cause > 3) continue;
    out.push_back(record(l.key.tgid, l.key.kind, l.key.cause, l.count, ts_ns));
    by_cause[l.key.cause] += l.count;
  }
  // Stable order for the trace: by process, then kind, then cause.
  std::sort(out.begin(), out.end(), [](const lt_proc_drops_event& a, const lt_proc_drops_event& b) {
    return std::tie(a.hdr.pid, a.lost_kind, a.cause) < std::tie(b.hdr.pid, b.lost_kind, b.cause);
  });
  const std::uint64_t total[4] = {0, totals.ringbuf_full, totals.read_faults, totals.unreadable};
  for (std::uint16_t c = 1; c <= 3; ++c)
    if (total[c] > by_cause[c]) out.push_back(record(0, LT_EV_NONE, c, total[c] - by_cause[c], ts_ns));
  return out;
}

}  // namespace lt
