// A bound on a wait for a target's own progress that grows by the CPU the
// machine withheld from it: `base` after `start`, plus how much longer the
// waited-for processes sat in the run queue since then (their longest
// thread's schedstat wait, proc::longest_runqueue_wait), `max` at most. A
// loaded machine that gives the target no turn does not fail the wait (a
// CI run beside a build failed an op observer's handshake, and a 3 s attach
// wait for an injected bridge, that way). Used by Session::await_bridges
// (3 s, 30 s at most) and each phase of the op observer's handshake (2 s,
// 30 s). /proc is read only once `base` is up, and at most every 100 ms.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

namespace lt::proc {

// The rule, pure: over once `elapsed` reaches base + withheld, or max.
bool withheld_bound_over(std::uint64_t start_ns, std::uint64_t now_ns, std::uint64_t base_ns, std::uint64_t max_ns,
                         std::uint64_t withheld_ns);

class WithheldBound {
 public:
  using WaitOf = std::function<std::uint64_t(pid_t)>;  // default: longest_runqueue_wait
  WithheldBound() = default;
  WithheldBound(std::uint64_t start_ns, std::uint64_t base_ns, std::uint64_t max_ns, WaitOf wait_of = {});
  // pid's wait now is its baseline (one first seen in over() starts there).
  void watch(pid_t pid);
  // Whether the wait for `pids` is over at `now`: the most any of them was
  // withheld since it was watched counts.
  bool over(std::uint64_t now_ns, const std::vector<pid_t>& pids);

 private:
  std::uint64_t wait_of(pid_t pid) const;
  std::uint64_t start_ = 0, base_ = 0, max_ = 0;
  std::uint64_t until_ = 0, checked_ = 0;
  WaitOf wait_of_;
  std::map<pid_t, std::uint64_t> baseline_;
};

}  // namespace lt::proc
