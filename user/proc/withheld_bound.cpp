#include "user/proc/withheld_bound.h"

#include <algorithm>

#include "user/proc/proc_stats.h"

namespace lt::proc {

namespace {
constexpr std::uint64_t kRecheckNs = 100'000'000;  // /proc read at most 10 times a second
}

bool withheld_bound_over(std::uint64_t start_ns, std::uint64_t now_ns, std::uint64_t base_ns, std::uint64_t max_ns,
                         std::uint64_t withheld_ns) {
  if (now_ns < start_ns) return false;
  const std::uint64_t elapsed = now_ns - start_ns;
  return elapsed >= max_ns || elapsed >= base_ns + withheld_ns;
}

WithheldBound::WithheldBound(std::uint64_t start_ns, std::uint64_t base_ns, std::uint64_t max_ns, WaitOf wait_of)
    : start_(start_ns), base_(base_ns), max_(max_ns), until_(start_ns + base_ns), wait_of_(std::move(wait_of)) {}

std::uint64_t WithheldBound::wait_of(pid_t pid) const {
  return wait_of_ ? wait_of_(pid) : longest_runqueue_wait(pid);
}

void WithheldBound::watch(pid_t pid) {
  baseline_.try_emplace(pid, wait_of(pid));
}

bool WithheldBound::over(std::uint64_t now_ns, const std::vector<pid_t>& pids) {
  if (now_ns < until_) return false;
  if (now_ns - checked_ < kRecheckNs && now_ns - start_ < max_) return false;
  checked_ = now_ns;
  std::uint64_t withheld = 0;
  for (pid_t pid : pids) {
    const std::uint64_t w = wait_of(pid);
    const auto [it, fresh] = baseline_.try_emplace(pid, w);
    withheld = std::max(withheld, w > it->second ? w - it->second : 0);
  }
  if (withheld_bound_over(start_, now_ns, base_, max_, withheld)) return true;
  until_ = std::min(start_ + base_ + withheld, start_ + max_);
  return false;
}

}  // namespace lt::proc
