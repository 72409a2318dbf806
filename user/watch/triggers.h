// Watch mode's triggers: when the flight recorder's last minutes are worth
// keeping as a capture. Pure logic over the steps, exits and progress the
// watcher sees (reports/aggregate/live_steps.h), with the clock passed in,
// so every rule is tested on synthetic input.
//
//   slow-step  a train step longer than slow_factor x the rolling median of
//              the process's recent steps and longer than it by slow_floor,
//              once slow_warmup steps were seen (the first ones compile
//              and warm caches);
//   stall      no action of a live process ended for
//              max(stall_factor x median step, stall_min); once per stall;
//   memory     a process's resident memory, or the GPU memory it holds on
//              a device (NVML), grew past (1 + memory_growth) x its lowest
//              in the last memory_window, and by memory_floor at least;
//              then measured from there again; judged from the process's
//              memory_warmup-th train step (a job grows by hundreds of MiB
//              as it imports torch, builds its model and takes its first
//              steps: under --all every new job fired), or, where it has
//              no train step, memory_grace after its first sample; or an allocation
//              failed (torch's allocator ran out of memory, CPU or CUDA,
//              whether or not the job caught the error), at most once per
//              process in oom_quiet;
//   exit       a process ended with a non-zero status or a signal, or an
//              exception escaped Lightning's loop (it unwound the outermost
//              action of its thread: the run was interrupted, whether or
//              not the script then went on);
//   straggler  one rank last at most of the recent collectives
//              (straggler.h, judged by the watcher; fired here, rate-limited);
//   request    asked for (watch --capture-now, or SIGUSR1 to the watcher).
// Each kind fires at most max_per_day times in any 24 hours (Perfetto's
// max_per_24_h); what it suppresses is counted.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "reports/aggregate/live_steps.h"

namespace lt {

enum class TriggerKind { slow_step, stall, memory, exit, request, straggler };
// "slow-step", "stall", "memory", "exit", "request", "straggler"
const char* trigger_name(TriggerKind k);

struct TriggerOptions {
  bool slow = true, stall = true, memory = true, exit = true, straggler = true;
  bool request = true;  // off: --capture-now, SIGUSR1 and the socket's captures are refused
  double slow_factor = 2.0;
  std::uint64_t slow_floor_ns = 50'000'000;
  std::uint32_t slow_warmup = 10;
  std::uint32_t median_window = 101;  // steps in the rolling median
  double stall_factor = 10.0;
  std::uint64_t stall_min_ns = 60'000'000'000;
  double memory_growth = 0.5;
  std::uint64_t memory_floor_bytes = 256ull << 20;
  std::uint64_t memory_window_ns = 600'000'000'000;
  std::uint32_t memory_warmup = 10;                 // train steps before growth counts
  std::uint64_t memory_grace_ns = 300'000'000'000;  // ...or this long, in a process with none
  std::uint64_t oom_quiet_ns = 60'000'000'000;      // a job retrying in a loop: one capture
  unsigned max_per_day = 20;                        // per kind
};

struct Trigger {
  TriggerKind kind = TriggerKind::request;
  std::uint32_t pid = 0;
  std::uint64_t at_ns = 0;    // what it is about: the step's end, the last progress, the exit
  std::uint64_t seen_ns = 0;  // when it was found (a stall: bound past at_ns); 0: at_ns
  std::uint32_t step = 0;     // slow-step: the step's index; stall: steps done
  std::string what;           // one line for people
  // A user's request (the watcher's socket, not root's nor an admin's):
  // the capture holds that user's processes only, and is theirs.
  std::optional<std::uint32_t> for_uid;
  // A stall of a rank: the ranks watched here then (pid, rank), the stalled
  // one among them, whose threads the capture reads (a hang is every rank's
  // story: who waits in the collective, who never came). Empty otherwise.
  std::vector<std::pair<std::uint32_t, int>> peers;
  // A request's own after-window ("capture PID SECS"); 0: the watcher's.
  std::uint64_t after_ns = 0;
};

class TriggerPolicy {
 public:
  explicit TriggerPolicy(TriggerOptions o) : o_(o) {}
  std::optional<Trigger> on_step(const LiveStep& s, std::uint64_t now);
  // status: the kernel's wait status (exit code << 8 | signal).
  std::optional<Trigger> on_exit(std::uint32_t pid, std::uint32_t status, std::uint64_t ts, std::uint64_t now);
  // A live process whose last action ended at last_progress (0: none yet).
  std::optional<Trigger> check_stall(std::uint32_t pid, std::uint64_t last_progress, std::uint64_t now);
  // A resident-memory sample of pid (/proc, every 100 ms).
  std::optional<Trigger> on_rss(std::uint32_t pid, std::uint64_t rss_bytes, std::uint64_t ts, std::uint64_t now);
  // An NVML sample of the GPU memory pid holds on `device` (its CUDA
  // context and what torch's caching allocator reserved): the same growth
  // rule as resident memory, per device.
  std::optional<Trigger> on_gpu_mem(std::uint32_t pid, unsigned device, std::uint64_t bytes, std::uint64_t ts,
                                    std::uint64_t now);
  // torch's allocator failed to allocate `bytes` on device_type (c10::DeviceType:
  // 0 CPU, 1 CUDA) device_index in pid at ts.
  std::optional<Trigger> on_oom(std::uint32_t pid, std::uint64_t bytes, unsigned device_type, int device_index,
                                std::uint64_t ts, std::uint64_t now);
  // An exception unwound `action`, the outermost Lightning action open on
  // its thread (live_steps.h, ThrownAction), at ts.
  std::optional<Trigger> on_exception(std::uint32_t pid, std::uint64_t ts, const std::string& action,
                                      std::uint64_t now);
  // A capture asked for; for_uid: by that user (their own budget: one user
  // cannot spend root's, or another user's, captures of the day). Nothing
  // when requests are off (requests_on()).
  std::optional<Trigger> request(std::uint32_t pid, std::uint64_t now, const std::string& why,
                                 std::optional<std::uint32_t> for_uid = std::nullopt);
  bool requests_on() const { return o_.request; }
  // pid was named the straggler (straggler.h) at `ts`, after `steps` of its steps.
  std::optional<Trigger> on_straggler(std::uint32_t pid, std::uint64_t ts, std::uint32_t steps, const std::string& what,
                                      std::uint64_t now);
  // The median of pid's recent steps (0: none yet).
  std::uint64_t median_ns(std::uint32_t pid) const;
  // How long a stall of pid must last to fire.
  std::uint64_t stall_after_ns(std::uint32_t pid) const;
  std::uint64_t fired(TriggerKind k) const { return count(fired_, k); }
  std::uint64_t suppressed(TriggerKind k) const { return count(suppressed_, k); }
  void forget(std::uint32_t pid) { procs_.erase(pid); }
  // t fired, then joined a capture already pending (Watcher::on_trigger):
  // it takes none of its kind's budget.
  void refund(const Trigger& t);

 private:
  struct Proc {
    std::deque<std::uint64_t> recent;  // the last median_window step durations
    // recent's median, computed when asked after a change: each step and
    // each stall check asks (3 % of the watcher's CPU, copied and
    // partitioned at every ask).
    mutable std::uint64_t median = 0;
    mutable bool median_known = false;
    std::uint32_t seen = 0;
    std::uint64_t stalled_at = 0;  // the last_progress a stall fired for (0: none)
    // (time, rss) with rss increasing: the window's lowest is the front.
    std::deque<std::pair<std::uint64_t, std::uint64_t>> rss_low;
    std::map<unsigned, std::deque<std::pair<std::uint64_t, std::uint64_t>>> gpu_low;  // per device
    std::uint64_t first_memory_ts = 0;  // its first memory sample (0: none yet)
    std::uint64_t oom_at = 0;           // the last out-of-memory that fired (0: none)
  };
  std::optional<Trigger> fire(Trigger t, std::uint64_t now);
  // The growth rule on one series of samples (time, bytes), its window's
  // lowest kept in `low`: "from X MiB to Y MiB (+P%) in T s", or nothing.
  std::optional<std::string> grew(std::deque<std::pair<std::uint64_t, std::uint64_t>>& low, std::uint64_t bytes,
                                  std::uint64_t ts) const;
  // Whether p's memory is judged at ts: past its warm-up (memory_warmup
  // steps, or memory_grace with none). Until then its series stay empty,
  // so that the growth is measured from the warm-up's end.
  bool memory_judged(Proc& p, std::uint64_t ts) const;
  static std::uint64_t count(const std::map<TriggerKind, std::uint64_t>& m, TriggerKind k) {
    auto it = m.find(k);
    return it == m.end() ? 0 : it->second;
  }
  TriggerOptions o_;
  std::map<std::uint32_t, Proc> procs_;
  // When each kind fired, the last 24 h; a user's requests apart, by uid.
  using BudgetKey = std::pair<TriggerKind, std::int64_t>;  // (kind, the requesting uid or -1)
  static BudgetKey budget_key(const Trigger& t) {
    return {t.kind, t.for_uid ? static_cast<std::int64_t>(*t.for_uid) : -1};
  }
  std::map<BudgetKey, std::deque<std::uint64_t>> times_;
  std::map<TriggerKind, std::uint64_t> fired_, suppressed_;
};

}  // namespace lt
