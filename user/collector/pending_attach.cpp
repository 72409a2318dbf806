#include "user/collector/pending_attach.h"

#include <vector>

namespace lt {

void PendingAttach::attempt(pid_t pid, bool first) {
  waiting_.erase(pid);
  if (attempt_(pid, first) == Attempt::later) waiting_.insert(pid);
}

void PendingAttach::start(pid_t pid) {
  attempt(pid, true);
}

void PendingAttach::poll(std::uint64_t now_ns, const StillOursFn& still_ours) {
  if (waiting_.empty() || !retry_.due(now_ns)) return;
  // A copy: attempts change the set.
  const std::vector<pid_t> now(waiting_.begin(), waiting_.end());
  for (pid_t pid : now)
    if (still_ours(pid))
      attempt(pid, false);
    else
      waiting_.erase(pid);
}

}  // namespace lt
