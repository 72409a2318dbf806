#include "user/collector/pending_attach.h"

#include <algorithm>
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
  if (waiting_.empty()) return;
  // Each clock on its own: the backstop must not wait for the interval's.
  const bool retry = retry_.due(now_ns), backstop = backstop_.due(now_ns);
  if (!retry && !backstop) return;
  // A copy: attempts change the set.
  const std::vector<std::pair<std::size_t, pid_t>> now(waiting_.begin(), waiting_.end());
  for (const auto& [t, pid] : now)
    if (!still_ours(pid))
      waiting_.erase({t, pid});
    else if (told_.count(pid) ? backstop : retry)
      attempt(t, pid, false);
}

void PendingAttach::loaded(pid_t pid) {
  for (std::size_t t = 0; t < tracers_; ++t) retry(t, pid);
}

std::vector<pid_t> PendingAttach::waiting_pids() const {
  std::set<pid_t> pids;
  for (const auto& [t, p] : waiting_) pids.insert(p);
  return {pids.begin(), pids.end()};
}

std::uint64_t PendingAttach::next_due_ns() const {
  bool polled = false;
  for (const auto& [t, p] : waiting_) polled |= !told_.count(p);
  if (waiting_.empty()) return UINT64_MAX;
  const std::uint64_t backstop = backstop_.last_ns + backstop_.period_ns + 1;
  return polled ? std::min(backstop, retry_.last_ns + retry_.period_ns + 1) : backstop;
}

}  // namespace lt
