#include "reports/aggregate/device_stats.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#include "user/model/record_dispatch.h"

namespace lt {

const char* device_stat_name(DeviceStatKey k) {
  switch (k) {
    case DeviceStatKey::cpu_vm_percent:
      return "cpu_vm_percent";
    case DeviceStatKey::cpu_percent:
      return "cpu_percent";
    case DeviceStatKey::cpu_swap_percent:
      return "cpu_swap_percent";
    case DeviceStatKey::process_cpu_percent:
      return "process.cpu_percent";
    case DeviceStatKey::process_rss_mb:
      return "process.rss (MB)";
    case DeviceStatKey::gpu_utilization:
      return "utilization.gpu (%)";
    case DeviceStatKey::gpu_memory_used_mb:
      return "memory.used (MB)";
    case DeviceStatKey::gpu_memory_free_mb:
      return "memory.free (MB)";
    case DeviceStatKey::gpu_memory_utilization:
      return "utilization.memory (%)";
    case DeviceStatKey::gpu_temperature:
      return "temperature.gpu (\u00b0C)";
    case DeviceStatKey::gpu_power_w:
      return "power.draw (W)";
    case DeviceStatKey::gpu_sm_clock_mhz:
      return "clocks.sm (MHz)";
    case DeviceStatKey::gpu_process_memory_mb:
      return "process.memory.used (MB)";
  }
  return "?";
}

bool device_stat_is_memory(DeviceStatKey k) {
  return k == DeviceStatKey::process_rss_mb || k == DeviceStatKey::gpu_memory_used_mb ||
         k == DeviceStatKey::gpu_memory_free_mb || k == DeviceStatKey::gpu_process_memory_mb;
}

namespace {

constexpr std::uint32_t kNone32 = ~0u;
constexpr std::uint64_t kNone64 = ~0ull;
constexpr double kMiB = 1024.0 * 1024.0;

using StatId = std::pair<int, DeviceStatKey>;  // (device or -1, key): map order = report order

struct Bucket {
  std::map<StatId, StatSummary> stats;
  std::uint64_t samples = 0, first_ns = 0, last_ns = 0;

  void touch(std::uint64_t ts) {
    ++samples;
    if (!first_ns || ts < first_ns) first_ns = ts;
    if (ts > last_ns) last_ns = ts;
  }
  ActionDeviceStats take(std::string name) {
    ActionDeviceStats a;
    a.action = std::move(name);
    a.samples = samples;
    a.first_ns = first_ns;
    a.last_ns = last_ns;
    for (auto& [id, st] : stats) a.rows.push_back({id.first, id.second, st});
    return a;
  }
};

// A series of the whole run at an even spacing, bounded: every sample up
// to kRssSeriesMax, then every 2nd, 4th, ... (`stride`).
template <typename T>
void keep_bounded(std::vector<T>& v, std::uint64_t& seen, std::uint64_t& stride, const T& x) {
  if (seen++ % stride) return;
  if (v.size() == ProcessDeviceStats::kRssSeriesMax) {  // keep every other one; sample half as often
    std::size_t k = 0;
    for (std::size_t i = 0; i < v.size(); i += 2) v[k++] = v[i];
    v.resize(k);
    stride *= 2;
    if ((seen - 1) % stride) return;
  }
  v.push_back(x);
}

struct Proc {
  ProcessDeviceStats out;
  bool alive = true;
  std::set<int> uses;  // GPUs it holds memory on
  std::set<int> got;   // GPUs whose samples it was charged
  std::map<std::string, Bucket> actions;
  Bucket window;
  std::uint64_t prev_ts = 0, prev_cpu = kNone64;
  std::uint64_t rss_seen = 0, rss_stride = 1;  // out.rss_mb keeps every rss_stride-th sample
  std::uint64_t sched_seen = 0, sched_stride = 1;
  void add_sched(const ProcessDeviceStats::Sched& s) { keep_bounded(out.sched, sched_seen, sched_stride, s); }
  void add_rss(std::uint64_t ts, double mb) { keep_bounded(out.rss_mb, rss_seen, rss_stride, {ts, mb}); }
};

struct Fork {
  UntracedFork out;
  std::uint64_t seen = 0, stride = 1;
};

// Mean interval between consecutive samples of each source.
struct Intervals {
  std::map<std::uint64_t, std::uint64_t> last;  // source -> last ts
  std::uint64_t sum = 0, n = 0;
  void add(std::uint64_t source, std::uint64_t ts) {
    auto [it, fresh] = last.try_emplace(source, ts);
    if (!fresh) {
      if (ts > it->second) {
        sum += ts - it->second;
        ++n;
      }
      it->second = ts;
    }
  }
  std::uint64_t mean() const { return n ? sum / n : 0; }
};

}  // namespace

struct DeviceStatsAggregator::State {
  const ActionAggregator& actions;
  std::map<std::uint32_t, Proc> procs;
  std::vector<std::uint32_t> order;
  std::map<std::uint32_t, Fork> forks;  // FORK_STATS, by the fork's pid
  Intervals proc_intervals, device_intervals;
  bool gpu = false;
  bool verdict_samples = false, other_samples = false;  // PROC_STATS with and without LT_PROC_STATS_FOR_VERDICT

  explicit State(const ActionAggregator& a) : actions(a) {}

  Proc& proc(std::uint32_t pid) {
    auto [it, fresh] = procs.try_emplace(pid);
    if (fresh) {
      it->second.out.pid = pid;
      order.push_back(pid);
    }
    return it->second;
  }

  // The buckets a sample of `pid` at this point of the stream goes to.
  struct Target {
    Bucket& action;
    Bucket& window;
    void add(int device, DeviceStatKey k, double v) {
      action.stats[{device, k}].add(v);
      window.stats[{device, k}].add(v);
    }
  };
  Target charge(Proc& p, std::uint64_t ts) {
    std::string a = actions.innermost_action(p.out.pid, p.out.pid);
    Bucket& b = p.actions[a.empty() ? std::string(kNoAction) : a];
    b.touch(ts);
    p.window.touch(ts);
    return {b, p.window};
  }

  void proc_stats(const lt_event_header& h, const lt_proc_stats_event& e) {
    (e.flags & LT_PROC_STATS_FOR_VERDICT ? verdict_samples : other_samples) = true;
    proc_intervals.add(h.pid, h.ts_ns);
    Proc& p = proc(h.pid);
    p.alive = true;
    p.out.forks_scanned |= (e.flags & LT_PROC_STATS_FORKS_SCANNED) != 0;
    Target t = charge(p, h.ts_ns);
    if (e.vm_percent_x100 != kNone32) t.add(-1, DeviceStatKey::cpu_vm_percent, e.vm_percent_x100 / 100.0);
    if (e.cpu_percent_x100 != kNone32) t.add(-1, DeviceStatKey::cpu_percent, e.cpu_percent_x100 / 100.0);
    if (e.swap_percent_x100 != kNone32) t.add(-1, DeviceStatKey::cpu_swap_percent, e.swap_percent_x100 / 100.0);
    if (e.cpu_ns != kNone64) {
      if (p.prev_cpu != kNone64 && h.ts_ns > p.prev_ts && e.cpu_ns >= p.prev_cpu)
        t.add(-1, DeviceStatKey::process_cpu_percent,
              static_cast<double>(e.cpu_ns - p.prev_cpu) / static_cast<double>(h.ts_ns - p.prev_ts) * 100.0);
      p.prev_cpu = e.cpu_ns;
      p.prev_ts = h.ts_ns;
    }
    if (e.rss_bytes != kNone64) {
      t.add(-1, DeviceStatKey::process_rss_mb, static_cast<double>(e.rss_bytes) / kMiB);
      p.add_rss(h.ts_ns, static_cast<double>(e.rss_bytes) / kMiB);
    }
  }

  void device_stats(const lt_event_header& h, const lt_device_stats_event& e) {
    gpu = true;
    const int dev = static_cast<int>(e.device);
    device_intervals.add(0x1'0000'0000ull | e.device, h.ts_ns);
    // Who uses this GPU (the sampler lists only targets).
    for (int i = 0; i < 4; ++i)
      if (e.proc_pid[i] && e.proc_mem_bytes[i] != kNone64 && e.proc_mem_bytes[i] > 0)
        proc(e.proc_pid[i]).uses.insert(dev);
    std::vector<Proc*> to;
    for (auto pid : order) {
      Proc& p = procs[pid];
      if (p.alive && p.uses.count(dev)) to.push_back(&p);
    }
    if (to.empty()) {
      // Nobody known on it: the live processes with no known GPU yet, among
      // the Lightning ones if any is alive (not DataLoader workers).
      bool any_lightning = false;
      for (auto pid : order)
        if (procs[pid].alive && !actions.begin_order(pid).empty()) any_lightning = true;
      for (auto pid : order) {
        Proc& p = procs[pid];
        if (p.alive && p.uses.empty() && (!any_lightning || !actions.begin_order(pid).empty())) to.push_back(&p);
      }
    }
    for (Proc* p : to) {
      p->got.insert(dev);
      Target t = charge(*p, h.ts_ns);
      if (e.gpu_util_pct != kNone32) t.add(dev, DeviceStatKey::gpu_utilization, e.gpu_util_pct);
      if (e.mem_used_bytes != kNone64) {
        t.add(dev, DeviceStatKey::gpu_memory_used_mb, static_cast<double>(e.mem_used_bytes) / kMiB);
        if (e.mem_total_bytes != kNone64 && e.mem_total_bytes >= e.mem_used_bytes)
          t.add(dev, DeviceStatKey::gpu_memory_free_mb,
                static_cast<double>(e.mem_total_bytes - e.mem_used_bytes) / kMiB);
      }
      if (e.mem_util_pct != kNone32) t.add(dev, DeviceStatKey::gpu_memory_utilization, e.mem_util_pct);
      if (e.temperature_c != kNone32) t.add(dev, DeviceStatKey::gpu_temperature, e.temperature_c);
      if (e.power_mw != kNone32) t.add(dev, DeviceStatKey::gpu_power_w, e.power_mw / 1000.0);
      if (e.sm_clock_mhz != kNone32) t.add(dev, DeviceStatKey::gpu_sm_clock_mhz, e.sm_clock_mhz);
      for (int i = 0; i < 4; ++i)
        if (e.proc_pid[i] == p->out.pid && e.proc_mem_bytes[i] != kNone64) {
          t.add(dev, DeviceStatKey::gpu_process_memory_mb, static_cast<double>(e.proc_mem_bytes[i]) / kMiB);
          break;
        }
    }
  }
};

DeviceStatsAggregator::DeviceStatsAggregator(const ActionAggregator& actions) : s_(std::make_unique<State>(actions)) {}
DeviceStatsAggregator::~DeviceStatsAggregator() = default;

void DeviceStatsAggregator::add(const lt_event_header& h, const std::byte* p) {
  auto& s = *s_;
  visit_record(
      h, p,
      overloaded{[&](const lt_event_header& h, const lt_proc_info_event& e) {
                   Proc& pr = s.proc(h.pid);
                   pr.alive = true;
                   pr.out.rank = e.rank;
                   pr.out.local_rank = e.local_rank;
                   pr.out.world_size = e.world_size;
                   pr.out.comm.assign(e.comm, strnlen(e.comm, sizeof e.comm));
                 },
                 [&](const lt_event_header& h, const lt_proc_event&) {
                   if (h.kind != LT_EV_PROC_EXIT) return;
                   if (auto it = s.procs.find(h.pid); it != s.procs.end()) it->second.alive = false;
                 },
                 [&](const lt_event_header& h, const lt_proc_stats_event& e) {
                   if (h.pid != 0) s.proc_stats(h, e);
                 },
                 [&](const lt_event_header& h, const lt_thread_sched_event& e) {
                   // The main thread's (the sampler's only one);
                   // a process without /proc samples gets no row.
                   const auto it = s.procs.find(h.pid);
                   if (h.pid == 0 || h.tid != h.pid || it == s.procs.end()) return;
                   if (e.cpu_ns == ~0ull || e.runq_ns == ~0ull) return;
                   it->second.add_sched({h.ts_ns, e.cpu_ns, e.runq_ns});
                 },
                 [&](const lt_event_header& h, const lt_fork_stats_event& e) {
                   if (h.pid == 0 || e.target == 0) return;
                   auto& f = s.forks[h.pid];
                   if (f.out.target != e.target) f = Fork{};  // a reused pid: another fork
                   f.out.pid = h.pid;
                   f.out.target = e.target;
                   f.out.via_forkserver = (e.flags & LT_FORK_STATS_VIA_FORKSERVER) != 0;
                   if (e.cpu_ns != ~0ull)
                     keep_bounded(f.out.sched, f.seen, f.stride, ProcessDeviceStats::Sched{h.ts_ns, e.cpu_ns, 0});
                 },
                 [&](const lt_event_header& h, const lt_device_stats_event& e) { s.device_stats(h, e); }});
}

DeviceStatsReport DeviceStatsAggregator::finish() {
  auto& s = *s_;
  DeviceStatsReport rep;
  rep.gpu = s.gpu;
  rep.for_verdict = s.verdict_samples && !s.other_samples && !s.gpu;
  rep.period_ns = s.proc_intervals.n ? s.proc_intervals.mean() : s.device_intervals.mean();
  for (auto& [pid, f] : s.forks) rep.untraced_forks.push_back(std::move(f.out));
  for (auto pid : s.order) {
    Proc& p = s.procs[pid];
    if (!p.window.samples) continue;
    ProcessDeviceStats out = std::move(p.out);
    out.has_actions = !s.actions.begin_order(pid).empty();
    out.devices.assign(p.got.begin(), p.got.end());
    out.window = p.window.take("");
    // The Advanced report's order: actions as they first began, then those
    // that began before attach (by name), then time outside them.
    auto emit = [&](const std::string& name) {
      auto it = p.actions.find(name);
      if (it == p.actions.end()) return;
      out.actions.push_back(it->second.take(name));
      p.actions.erase(it);
    };
    for (auto& n : s.actions.begin_order(pid))
      if (n != kNoAction) emit(n);
    std::vector<std::string> rest;
    for (auto& [n, b] : p.actions)
      if (n != kNoAction) rest.push_back(n);
    for (auto& n : rest) emit(n);
    emit(kNoAction);
    rep.processes.push_back(std::move(out));
  }
  return rep;
}

}  // namespace lt
