// Targets whose probes wait for something they have not loaded yet
// (libtorch for the op probes, CUDA for the GPU ones): the one poller that
// serves every library tracer.  At adoption each tracer has one attempt,
// in order; a tracer whose library is not there yet is tried again every
// interval until it succeeds or gives up, or the target is no longer ours.
// What an attempt does is the caller's.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <utility>

#include "user/collector/every.h"

namespace lt {

class PendingAttach {
 public:
  enum class Attempt {
    done,   // attached, or given up for good (said by the attempt)
    later,  // not possible yet: try again next interval
  };
  // tracer: the index add_tracer() gave; first: the attempt at adoption (an
  // error may end the session then; a retry's error is only a note).
  using AttemptFn = std::function<Attempt(std::size_t tracer, pid_t pid, bool first)>;
  using StillOursFn = std::function<bool(pid_t)>;

  PendingAttach(std::uint64_t interval_ns, AttemptFn attempt) : retry_{interval_ns, 0}, attempt_(std::move(attempt)) {}

  // One more tracer to serve; its index.
  std::size_t add_tracer() { return tracers_++; }
  // Every tracer's first attempt, now, in order.  An exception from an
  // attempt (an error that must end the session) leaves the target not
  // waiting for that tracer, and the later tracers untried.
  void start(pid_t pid);
  // Counts the interval from `now_ns` (the loop's start).
  void start_clock(std::uint64_t now_ns) { retry_.last_ns = now_ns; }
  // Once an interval has passed since the last retry: every waiting
  // (tracer, target) whose target is still ours is tried again, tracer by
  // tracer; the others stop waiting.
  void poll(std::uint64_t now_ns, const StillOursFn& still_ours);

  // An attempt now, out of turn, if the target waits for this tracer (a
  // library load stopped it).
  void retry(std::size_t tracer, pid_t pid) {
    if (waiting(tracer, pid)) attempt(tracer, pid, false);
  }
  bool waiting(std::size_t tracer, pid_t pid) const { return waiting_.count({tracer, pid}) != 0; }
  bool waiting(pid_t pid) const;  // for any tracer
  bool empty() const { return waiting_.empty(); }

 private:
  void attempt(std::size_t tracer, pid_t pid, bool first);
  Every retry_;
  AttemptFn attempt_;
  std::size_t tracers_ = 0;
  std::set<std::pair<std::size_t, pid_t>> waiting_;  // (tracer, target)
};

}  // namespace lt
