// Targets whose probes wait for something they have not loaded yet
// (libtorch for the op probes, CUDA for the GPU ones): the one poller that
// serves every library tracer.  At adoption each tracer has one attempt,
// in order; a tracer whose library is not there yet is tried again every
// interval until it succeeds or gives up, or the target is no longer ours.
// What an attempt does is the caller's.
#pragma once
#include <sys/types.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <utility>
#include <vector>

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

  PendingAttach(std::uint64_t interval_ns, AttemptFn attempt)
      : retry_{interval_ns, 0}, backstop_{std::max(kBackstopNs, interval_ns), 0}, attempt_(std::move(attempt)) {}
  // A target whose library loads are told (loaded() is called for each: a
  // probe on its loader, user/sources/libload.h) is tried at each load, and
  // by poll() only every kBackstopNs (or the interval, if longer: a test
  // that sets a long one proves the loads are told); the others every
  // interval.
  static constexpr std::uint64_t kBackstopNs = 5'000'000'000;

  // One more tracer to serve; its index.
  std::size_t add_tracer() { return tracers_++; }
  // Every tracer's first attempt, now, in order.  An exception from an
  // attempt (an error that must end the session) leaves the target not
  // waiting for that tracer, and the later tracers untried.
  void start(pid_t pid);
  // Counts the interval from `now_ns` (the loop's start).
  void start_clock(std::uint64_t now_ns) { retry_.last_ns = backstop_.last_ns = now_ns; }
  // Once an interval has passed since the last retry: every waiting
  // (tracer, target) whose target is still ours and not told of its loads
  // is tried again (told ones too once a backstop has passed), tracer by
  // tracer; those no longer ours stop waiting.
  void poll(std::uint64_t now_ns, const StillOursFn& still_ours);

  // An attempt now, out of turn, if the target waits for this tracer (a
  // library load stopped it).
  void retry(std::size_t tracer, pid_t pid) {
    if (waiting(tracer, pid)) attempt(tracer, pid, false);
  }
  bool waiting(std::size_t tracer, pid_t pid) const { return waiting_.count({tracer, pid}) != 0; }
  bool waiting(pid_t pid) const;  // for any tracer
  bool empty() const { return waiting_.empty(); }
  std::vector<pid_t> waiting_pids() const;  // each once
  // pid's loads are told from now on (or no more).
  void told(pid_t pid, bool yes) { yes ? (void)told_.insert(pid) : (void)told_.erase(pid); }
  bool told(pid_t pid) const { return told_.count(pid) != 0; }
  const std::set<pid_t>& told_pids() const { return told_; }
  // pid mapped a library: every tracer it waits for tries now.
  void loaded(pid_t pid);
  // When poll() next tries (UINT64_MAX: nothing waits).
  std::uint64_t next_due_ns() const;

 private:
  void attempt(std::size_t tracer, pid_t pid, bool first);
  Every retry_;
  Every backstop_;
  AttemptFn attempt_;
  std::set<pid_t> told_;
  std::size_t tracers_ = 0;
  std::set<std::pair<std::size_t, pid_t>> waiting_;  // (tracer, target)
};

}  // namespace lt
