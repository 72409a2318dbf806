#include "user/collector/pending_attach.h"

#include <vector>

namespace lt {

void PendingAttach::attempt(std::size_t tracer, pid_t pid, bool first) {
  waiting_.erase({tracer, pid});
  if (attempt_(tracer, pid, first) == Attempt::later) waiting_.insert({tracer, pid});
}

void PendingAttach::start(pid_t pid) {
  for (std::size_t t = 0; t < tracers_; ++t) attempt(t, pid, true);
}

bool PendingAttach::waiting(pid_t pid) const {
  for (const auto& [t, p] : waiting_)
    if (p == pid) return true;
  return false;
}

void PendingAttach::poll(std::uint64_t now_ns, const StillOursFn& still_ours) {
  if (waiting_.empty() || !retry_.due(now_ns)) return;
  // A copy: attempts change the set.
  const std::vector<std::pair<std::size_t, pid_t>> now(waiting_.begin(), waiting_.end());
  for (const auto& [t, pid] : now)
    if (still_ours(pid))
      attempt(t, pid, false);
    else
      waiting_.erase({t, pid});
}

}  // namespace lt
