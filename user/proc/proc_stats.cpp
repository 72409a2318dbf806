#include "user/proc/proc_stats.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <ctime>

#include "user/proc/procfs.h"
#include "user/proc/thread_status.h"
#include "user/text/numbers.h"

namespace lt::proc {

namespace {

bool parse_u64(std::string_view s, std::uint64_t& v) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// Whitespace-separated tokens of one line, one at a time.
struct Tokens {
  std::string_view s;
  std::string_view next() {
    std::size_t b = s.find_first_not_of(" \t");
    if (b == std::string_view::npos) {
      s = {};
      return {};
    }
    std::size_t e = s.find_first_of(" \t", b);
    std::string_view t = s.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b);
    s = e == std::string_view::npos ? std::string_view() : s.substr(e);
    return t;
  }
};

// A /proc/meminfo value ("MemTotal:   16318084 kB") in bytes.
std::optional<std::uint64_t> meminfo_value(std::string_view meminfo, std::string_view key) {
  std::size_t at = 0;
  while (at < meminfo.size()) {
    std::size_t eol = meminfo.find('\n', at);
    std::string_view line = meminfo.substr(at, eol == std::string_view::npos ? std::string_view::npos : eol - at);
    at = eol == std::string_view::npos ? meminfo.size() : eol + 1;
    Tokens t{line};
    if (t.next() != key) continue;
    std::uint64_t v = 0;
    if (!parse_u64(t.next(), v)) return std::nullopt;
    return v * 1024;  // psutil: every value * 1024 (all are kB)
  }
  return std::nullopt;
}

// psutil's calculate_avail_vmem (kernels without MemAvailable, or a 0 there).
double fallback_available(std::string_view meminfo, std::string_view zoneinfo, long page_size) {
  double free = static_cast<double>(meminfo_value(meminfo, "MemFree:").value_or(0));
  double fallback = free + static_cast<double>(meminfo_value(meminfo, "Cached:").value_or(0));
  auto active = meminfo_value(meminfo, "Active(file):");
  auto inactive = meminfo_value(meminfo, "Inactive(file):");
  auto slab = meminfo_value(meminfo, "SReclaimable:");
  if (!active || !inactive || !slab || zoneinfo.empty()) return fallback;
  double low = 0;
  std::size_t at = 0;
  while (at < zoneinfo.size()) {
    std::size_t eol = zoneinfo.find('\n', at);
    std::string_view line = zoneinfo.substr(at, eol == std::string_view::npos ? std::string_view::npos : eol - at);
    at = eol == std::string_view::npos ? zoneinfo.size() : eol + 1;
    Tokens t{line};
    std::string_view first = t.next();
    if (first.substr(0, 3) != "low") continue;
    std::uint64_t v = 0;
    if (parse_u64(t.next(), v)) low += static_cast<double>(v);
  }
  low *= static_cast<double>(page_size);
  double avail = free - low;
  double pagecache = static_cast<double>(*active + *inactive);
  pagecache -= std::min(pagecache / 2, low);
  avail += pagecache;
  avail += static_cast<double>(*slab) - std::min(static_cast<double>(*slab) / 2.0, low);
  return std::trunc(avail);
}

std::uint64_t monotonic_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

std::uint32_t x100(double v) {
  if (!(v >= 0)) return 0;
  return static_cast<std::uint32_t>(std::llround(v * 100));
}

}  // namespace

double round1(double x) {
  return std::strtod(fixed(x, 1).c_str(), nullptr);
}

std::optional<double> vm_percent(std::string_view meminfo, std::string_view zoneinfo, long page_size) {
  auto total = meminfo_value(meminfo, "MemTotal:");
  if (!total) return std::nullopt;
  auto mem_available = meminfo_value(meminfo, "MemAvailable:");
  double avail = mem_available && *mem_available != 0 ? static_cast<double>(*mem_available)
                                                      : fallback_available(meminfo, zoneinfo, page_size);
  const double t = static_cast<double>(*total);
  if (avail < 0)
    avail = 0;
  else if (avail > t)
    avail = static_cast<double>(meminfo_value(meminfo, "MemFree:").value_or(0));  // a container's distorted view
  if (t == 0) return 0.0;
  return round1((t - avail) / t * 100);
}

std::optional<double> swap_percent(std::string_view meminfo) {
  auto total = meminfo_value(meminfo, "SwapTotal:");
  auto free = meminfo_value(meminfo, "SwapFree:");
  if (!total || !free) return std::nullopt;
  if (*total == 0) return 0.0;
  double used = static_cast<double>(*total) - static_cast<double>(*free);
  return round1(used / static_cast<double>(*total) * 100);
}

std::optional<CpuTimes> parse_cpu_line(std::string_view proc_stat) {
  std::string_view line = proc_stat.substr(0, proc_stat.find('\n'));
  Tokens t{line};
  if (t.next() != "cpu") return std::nullopt;
  CpuTimes out{};
  std::size_t n = 0;
  for (; n < out.size(); ++n) {
    std::string_view tok = t.next();
    if (tok.empty()) break;
    if (!parse_u64(tok, out[n])) return std::nullopt;
  }
  if (n < 4) return std::nullopt;  // user nice system idle at least
  return out;
}

double cpu_percent_between(const CpuTimes& before, const CpuTimes& after) {
  CpuTimes d{};
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = after[i] > before[i] ? after[i] - before[i] : 0;
  // fields: 0 user 1 nice 2 system 3 idle 4 iowait 5 irq 6 softirq 7 steal 8 guest 9 guest_nice
  double total = 0;
  for (auto v : d) total += static_cast<double>(v);
  total -= static_cast<double>(d[8]) + static_cast<double>(d[9]);
  double busy = total - static_cast<double>(d[3]) - static_cast<double>(d[4]);
  if (total <= 0) return 0.0;
  return round1(busy / total * 100);
}

std::optional<std::uint64_t> parse_pid_stat_ticks(std::string_view pid_stat) {
  std::size_t close = pid_stat.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  Tokens t{pid_stat.substr(close + 1)};
  // After the command: field 3 (state) is token 0; utime (14) is 11, stime (15) is 12.
  std::string_view tok;
  for (int i = 0; i <= 11; ++i) tok = t.next();
  std::uint64_t utime = 0, stime = 0;
  if (!parse_u64(tok, utime)) return std::nullopt;
  if (!parse_u64(t.next(), stime)) return std::nullopt;
  return utime + stime;
}

std::optional<ThreadSched> parse_schedstat(std::string_view text) {
  Tokens t{text.substr(0, text.find('\n'))};
  ThreadSched s;
  if (!parse_u64(t.next(), s.cpu_ns) || !parse_u64(t.next(), s.runq_ns) || !parse_u64(t.next(), s.timeslices))
    return std::nullopt;
  return s;
}

std::optional<std::uint64_t> parse_statm_resident(std::string_view statm) {
  Tokens t{statm.substr(0, statm.find('\n'))};
  t.next();  // size
  std::uint64_t v = 0;
  if (!parse_u64(t.next(), v)) return std::nullopt;
  return v;
}

ProcStats::ProcStats(std::string proc_root)
    : root_(std::move(proc_root)), ticks_(sysconf(_SC_CLK_TCK)), page_(sysconf(_SC_PAGESIZE)) {
  if (ticks_ <= 0) ticks_ = 100;
  if (page_ <= 0) page_ = 4096;
}

SystemStats ProcStats::system() {
  SystemStats s;
  std::string meminfo = read_bounded(root_ + "/meminfo", 16384);
  if (auto vm = [&]() -> std::optional<double> {
        auto avail = meminfo_value(meminfo, "MemAvailable:");
        // /proc/zoneinfo only for psutil's fallback (rare: MemAvailable is there since 3.14).
        std::string zoneinfo = avail && *avail ? std::string() : read_bounded(root_ + "/zoneinfo", 1 << 20);
        return vm_percent(meminfo, zoneinfo, page_);
      }()) {
    s.vm_percent = *vm;
    s.vm_ok = true;
  }
  if (auto sw = swap_percent(meminfo)) {
    s.swap_percent = *sw;
    s.swap_ok = true;
  }
  // The first line is all we need; the file can be long (one line per CPU, interrupts).
  if (auto now = parse_cpu_line(read_bounded(root_ + "/stat", 512))) {
    s.cpu_percent = last_cpu_ ? cpu_percent_between(*last_cpu_, *now) : 0.0;
    last_cpu_ = now;
    s.cpu_ok = true;
  }
  return s;
}

std::optional<ProcessStats> ProcStats::process(pid_t pid) const {
  const std::string dir = root_ + "/" + std::to_string(pid);
  auto ticks = parse_pid_stat_ticks(read_bounded(dir + "/stat", 4096));
  auto pages = parse_statm_resident(read_bounded(dir + "/statm", 512));
  if (!ticks || !pages) return std::nullopt;
  ProcessStats p;
  const auto tck = static_cast<std::uint64_t>(ticks_);
  p.cpu_ns = *ticks / tck * 1000000000ull + *ticks % tck * 1000000000ull / tck;
  p.rss_bytes = *pages * static_cast<std::uint64_t>(page_);
  return p;
}

std::optional<std::uint64_t> ProcStats::rss_bytes(pid_t pid) const {
  auto pages = parse_statm_resident(read_bounded(root_ + "/" + std::to_string(pid) + "/statm", 512));
  if (!pages) return std::nullopt;
  return *pages * static_cast<std::uint64_t>(page_);
}

std::optional<ThreadSched> ProcStats::thread(pid_t pid, pid_t tid) const {
  return parse_schedstat(
      read_bounded(root_ + "/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/schedstat", 256));
}

namespace {

// A user-space record's header, stamped now.
lt_event_header sampled_header(lt_event_kind kind, std::size_t size, pid_t pid, pid_t tid) {
  return {static_cast<std::uint16_t>(kind),
          static_cast<std::uint16_t>(size),
          static_cast<std::uint32_t>(pid),
          static_cast<std::uint32_t>(tid),
          0,
          monotonic_now()};
}

}  // namespace

lt_thread_sched_event ProcStats::sched_record(pid_t pid, pid_t tid, const ThreadSched& s) {
  lt_thread_sched_event e{};
  e.hdr = sampled_header(LT_EV_THREAD_SCHED, sizeof e, pid, tid);
  e.cpu_ns = s.cpu_ns;
  e.runq_ns = s.runq_ns;
  e.timeslices = s.timeslices;
  return e;
}

lt_fork_stats_event ProcStats::fork_record(pid_t pid, pid_t target, bool via_forkserver,
                                           const std::optional<ThreadSched>& main_thread,
                                           std::optional<std::uint64_t> rss) {
  lt_fork_stats_event e{};
  e.hdr = sampled_header(LT_EV_FORK_STATS, sizeof e, pid, pid);
  e.target = static_cast<std::uint32_t>(target);
  e.flags = via_forkserver ? LT_FORK_STATS_VIA_FORKSERVER : 0;
  e.cpu_ns = main_thread ? main_thread->cpu_ns : ~0ull;
  e.rss_bytes = rss ? *rss : ~0ull;
  return e;
}

lt_proc_stats_event ProcStats::record(pid_t pid, const SystemStats& sys, const std::optional<ProcessStats>& p) {
  lt_proc_stats_event e{};
  e.hdr = sampled_header(LT_EV_PROC_STATS, sizeof e, pid, pid);
  e.cpu_ns = p ? p->cpu_ns : ~0ull;
  e.rss_bytes = p ? p->rss_bytes : ~0ull;
  e.vm_percent_x100 = sys.vm_ok ? x100(sys.vm_percent) : ~0u;
  e.swap_percent_x100 = sys.swap_ok ? x100(sys.swap_percent) : ~0u;
  e.cpu_percent_x100 = sys.cpu_ok ? x100(sys.cpu_percent) : ~0u;
  return e;
}

std::uint64_t longest_runqueue_wait(pid_t pid) {
  const ProcStats stats;
  std::uint64_t most = 0;
  for (pid_t tid : task_ids(pid))
    if (auto t = stats.thread(pid, tid)) most = std::max(most, t->runq_ns);
  return most;
}

}  // namespace lt::proc
