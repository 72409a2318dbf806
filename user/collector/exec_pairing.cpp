#include "user/collector/exec_pairing.h"

namespace lt {

void ExecPairing::record(pid_t pid, std::uint64_t now_ns) {
  Pending& p = pending_[pid];
  if (p.records == 0 && p.verdicts == 0) p.since_ns = now_ns;
  ++p.records;
}

void ExecPairing::verdict(pid_t pid, bool held, bool python, std::uint64_t now_ns) {
  Pending& p = pending_[pid];
  if (p.records == 0 && p.verdicts == 0) p.since_ns = now_ns;
  ++p.verdicts;
  // Sticky: a held process is paused until it is adopted, so it cannot
  // exec again; a verdict that comes later in time is about an earlier
  // image (an exec record's own "no CPython" is taken while the ring is
  // read, after the holder's verdicts).
  p.held |= held;
  p.python |= python;
}

std::vector<ExecPairing::Ready> ExecPairing::ready(std::uint64_t now_ns) {
  std::vector<Ready> out;
  for (auto it = pending_.begin(); it != pending_.end();) {
    Pending& p = it->second;
    // Every record has its verdict (the session takes verdicts before it
    // reads the ring, so a verdict's record is never behind it). A process
    // that exec'd twice before we looked (env, then python) is adopted
    // once, as its latest image.
    const bool paired = p.records > 0 && p.verdicts >= p.records;
    if (paired || now_ns - p.since_ns >= patience_ns_) {
      out.push_back({it->first, p.verdicts > 0 && p.held, p.verdicts > 0 && !p.python});
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

}  // namespace lt
