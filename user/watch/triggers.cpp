#include "user/watch/triggers.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "user/text/utf8_text.h"

namespace lt {

namespace {
constexpr std::uint64_t kDayNs = 86'400'000'000'000ull;

std::string seconds(std::uint64_t ns) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f s", ns / 1e9);
  return b;
}
std::string bytes_text(std::uint64_t b) {
  char t[48];
  if (b >= (1ull << 30))
    std::snprintf(t, sizeof t, "%.2f GiB", b / 1073741824.0);
  else
    std::snprintf(t, sizeof t, "%.1f MiB", b / 1048576.0);
  return t;
}

}  // namespace

const char* trigger_name(TriggerKind k) {
  switch (k) {
    case TriggerKind::slow_step:
      return "slow-step";
    case TriggerKind::stall:
      return "stall";
    case TriggerKind::memory:
      return "memory";
    case TriggerKind::exit:
      return "exit";
    case TriggerKind::request:
      return "request";
    case TriggerKind::straggler:
      return "straggler";
  }
  return "?";
}

std::uint64_t TriggerPolicy::median_ns(std::uint32_t pid) const {
  auto it = procs_.find(pid);
  if (it == procs_.end() || it->second.recent.empty()) return 0;
  const Proc& p = it->second;
  if (!p.median_known) {
    std::vector<std::uint64_t> v(p.recent.begin(), p.recent.end());
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    p.median = v[v.size() / 2];
    p.median_known = true;
  }
  return p.median;
}

std::uint64_t TriggerPolicy::stall_after_ns(std::uint32_t pid) const {
  // Bounded before the cast: a factor of 10^6 on an hours-long median is
  // past 2^64 ns.
  const double after = std::min(o_.stall_factor * static_cast<double>(median_ns(pid)), 1e18);
  return std::max(static_cast<std::uint64_t>(after), o_.stall_min_ns);
}

std::optional<Trigger> TriggerPolicy::fire(Trigger t, std::uint64_t now) {
  auto& times = times_[budget_key(t)];
  while (!times.empty() && now - times.front() >= kDayNs) times.pop_front();
  if (times.size() >= o_.max_per_day) {
    ++suppressed_[t.kind];
    return std::nullopt;
  }
  times.push_back(now);
  ++fired_[t.kind];
  return t;
}

std::optional<Trigger> TriggerPolicy::on_step(const LiveStep& s, std::uint64_t now) {
  Proc& p = procs_[s.pid];
  // Judged against the steps before it, then counted.
  const std::uint64_t median = median_ns(s.pid);
  const std::uint64_t d = s.duration_ns();
  const bool slow = o_.slow && p.seen >= o_.slow_warmup && median > 0 && d > o_.slow_factor * median &&
                    d >= median + o_.slow_floor_ns;
  ++p.seen;
  p.recent.push_back(d);
  while (p.recent.size() > o_.median_window) p.recent.pop_front();
  p.median_known = false;
  if (!slow) return std::nullopt;
  char what[160];
  std::snprintf(what, sizeof what, "train step %u took %s, %.1fx the median %s of the last %zu", s.index,
                seconds(d).c_str(), static_cast<double>(d) / median, seconds(median).c_str(), p.recent.size() - 1);
  return fire({TriggerKind::slow_step, s.pid, s.end_ns, 0, s.index, what}, now);
}

std::optional<Trigger> TriggerPolicy::on_exit(std::uint32_t pid, std::uint32_t status, std::uint64_t ts,
                                              std::uint64_t now) {
  procs_.erase(pid);
  if (!o_.exit || status == 0) return std::nullopt;
  const unsigned sig = status & 0x7f, code = (status >> 8) & 0xff;
  const std::string what =
      sig ? "killed by signal " + std::to_string(sig) : "exited with status " + std::to_string(code);
  return fire({TriggerKind::exit, pid, ts, 0, 0, what}, now);
}

std::optional<Trigger> TriggerPolicy::on_exception(std::uint32_t pid, std::uint64_t ts, const std::string& action,
                                                   std::uint64_t now) {
  if (!o_.exit) return std::nullopt;
  const std::uint32_t seen = procs_.count(pid) ? procs_[pid].seen : 0;
  return fire({TriggerKind::exit, pid, ts, 0, seen,
               "an exception escaped Lightning's loop: it unwound " + utf8_text(action) + " (the run was interrupted)"},
              now);
}

std::optional<Trigger> TriggerPolicy::check_stall(std::uint32_t pid, std::uint64_t last_progress, std::uint64_t now) {
  if (!o_.stall || last_progress == 0 || now < last_progress) return std::nullopt;
  Proc& p = procs_[pid];
  if (p.stalled_at == last_progress) return std::nullopt;  // fired for this stall already
  const std::uint64_t after = stall_after_ns(pid);
  if (now - last_progress < after) return std::nullopt;
  p.stalled_at = last_progress;
  const std::uint64_t median = median_ns(pid);
  const std::string what = "no Lightning action ended for " + seconds(now - last_progress) + " (stall bound " +
                           seconds(after) + (median ? ", median step " + seconds(median) : ", no step seen") + ")";
  return fire({TriggerKind::stall, pid, last_progress, now, p.seen, what}, now);
}

// The window's lowest, kept as a monotonic queue: a sample removes every
// later-kept one above it, so the front is the minimum.
std::optional<std::string> TriggerPolicy::grew(std::deque<std::pair<std::uint64_t, std::uint64_t>>& low,
                                               std::uint64_t bytes, std::uint64_t ts) const {
  while (!low.empty() && low.back().second >= bytes) low.pop_back();
  low.emplace_back(ts, bytes);
  while (low.size() > 1 && ts - low.front().first > o_.memory_window_ns) low.pop_front();
  const std::uint64_t base = low.front().second;
  if (bytes < base + o_.memory_floor_bytes || bytes < base * (1 + o_.memory_growth)) return std::nullopt;
  char what[160];
  std::snprintf(what, sizeof what, "from %.1f MiB to %.1f MiB (+%.0f%%) in %s", base / 1048576.0, bytes / 1048576.0,
                100.0 * (bytes - base) / base, seconds(ts - low.front().first).c_str());
  low.clear();  // measured from here on
  low.emplace_back(ts, bytes);
  return what;
}

bool TriggerPolicy::memory_judged(Proc& p, std::uint64_t ts) const {
  if (!p.first_memory_ts) p.first_memory_ts = ts;
  if (p.seen >= o_.memory_warmup) return true;
  return p.seen == 0 && ts >= p.first_memory_ts + o_.memory_grace_ns;
}

std::optional<Trigger> TriggerPolicy::on_rss(std::uint32_t pid, std::uint64_t rss, std::uint64_t ts,
                                             std::uint64_t now) {
  if (!o_.memory || !rss) return std::nullopt;
  Proc& p = procs_[pid];
  if (!memory_judged(p, ts)) return std::nullopt;
  auto g = grew(p.rss_low, rss, ts);
  if (!g) return std::nullopt;
  return fire({TriggerKind::memory, pid, ts, 0, p.seen, "resident memory grew " + *g}, now);
}

std::optional<Trigger> TriggerPolicy::on_gpu_mem(std::uint32_t pid, unsigned device, std::uint64_t bytes,
                                                 std::uint64_t ts, std::uint64_t now) {
  if (!o_.memory || !bytes) return std::nullopt;
  Proc& p = procs_[pid];
  if (!memory_judged(p, ts)) return std::nullopt;
  auto g = grew(p.gpu_low[device], bytes, ts);
  if (!g) return std::nullopt;
  return fire({TriggerKind::memory, pid, ts, 0, p.seen, "GPU memory on CUDA:" + std::to_string(device) + " grew " + *g},
              now);
}

std::optional<Trigger> TriggerPolicy::on_oom(std::uint32_t pid, std::uint64_t bytes, unsigned device_type,
                                             int device_index, std::uint64_t ts, std::uint64_t now) {
  if (!o_.memory) return std::nullopt;
  Proc& p = procs_[pid];
  if (p.oom_at && ts >= p.oom_at && ts - p.oom_at < o_.oom_quiet_ns) {
    ++suppressed_[TriggerKind::memory];  // the same episode: its capture is coming
    return std::nullopt;
  }
  p.oom_at = ts;
  std::string device = device_type == 0   ? std::string("CPU")
                       : device_type == 1 ? "CUDA:" + std::to_string(device_index)
                                          : "device type " + std::to_string(device_type);
  return fire({TriggerKind::memory, pid, ts, 0, p.seen,
               "out of memory: an allocation of " + bytes_text(bytes) + " on " + device + " failed"},
              now);
}

std::optional<Trigger> TriggerPolicy::on_straggler(std::uint32_t pid, std::uint64_t ts, std::uint32_t steps,
                                                   const std::string& what, std::uint64_t now) {
  if (!o_.straggler) return std::nullopt;
  return fire({TriggerKind::straggler, pid, ts, 0, steps, what}, now);
}

std::optional<Trigger> TriggerPolicy::request(std::uint32_t pid, std::uint64_t now, const std::string& why,
                                              std::optional<std::uint32_t> for_uid) {
  if (!o_.request) return std::nullopt;
  Trigger t{TriggerKind::request, pid, now, 0, 0, why};
  t.for_uid = for_uid;
  return fire(std::move(t), now);
}

void TriggerPolicy::refund(const Trigger& t) {
  auto it = times_.find(budget_key(t));
  if (it == times_.end() || it->second.empty()) return;
  it->second.pop_back();
  if (auto f = fired_.find(t.kind); f != fired_.end() && f->second) --f->second;
}

}  // namespace lt
