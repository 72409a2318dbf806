// Targets whose probes wait for something they have not loaded yet
// (libtorch for the op probes, CUDA for the GPU ones): one attach attempt
// at adoption, then one every interval until it succeeds or gives up, or
// the target is no longer ours.  One poller per kind of probe; what an
// attempt does is the caller's.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <set>

#include "user/collector/every.h"

namespace lt {

class PendingAttach {
 public:
  enum class Attempt {
    done,   // attached, or given up for good (said by the attempt)
    later,  // not possible yet: try again next interval
  };
  // first: the attempt at adoption (an error may end the session then;
  // a retry's error is only a note).
  using AttemptFn = std::function<Attempt(pid_t pid, bool first)>;
  using StillOursFn = std::function<bool(pid_t)>;

  PendingAttach(std::uint64_t interval_ns, AttemptFn attempt) : retry_{interval_ns, 0}, attempt_(std::move(attempt)) {}

  // The first attempt, now.  An exception from the attempt (an error that
  // must end the session) leaves the target not waiting.
  void start(pid_t pid);
  // Counts the interval from `now_ns` (the loop's start).
  void start_clock(std::uint64_t now_ns) { retry_.last_ns = now_ns; }
  // Once an interval has passed since the last retry: every waiting target
  // that is still ours is tried again; the others stop waiting.
  void poll(std::uint64_t now_ns, const StillOursFn& still_ours);

  // An attempt now, out of turn, if `pid` waits (a library load stopped it).
  void retry(pid_t pid) {
    if (waiting(pid)) attempt(pid, false);
  }
  bool waiting(pid_t pid) const { return waiting_.count(pid) != 0; }
  bool empty() const { return waiting_.empty(); }

 private:
  void attempt(pid_t pid, bool first);
  Every retry_;
  AttemptFn attempt_;
  std::set<pid_t> waiting_;
};

}  // namespace lt
