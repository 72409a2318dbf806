// CPU and memory statistics from /proc, as psutil computes them on Linux, so
// the numbers match what Lightning's DeviceStatsMonitor logs (accelerators/
// cpu.py get_cpu_stats: cpu_vm_percent, cpu_percent, cpu_swap_percent), plus
// one target process's CPU time and resident memory.  Reads a few small
// files with read(2): no allocation per sample beyond the path strings.
#pragma once
#include <sys/types.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "bpf/events.h"

namespace lt::proc {

// psutil's system-wide figures, rounded to 0.1 as psutil rounds them.
struct SystemStats {
  double vm_percent = 0;                                // psutil.virtual_memory().percent
  double swap_percent = 0;                              // psutil.swap_memory().percent (0 without swap)
  double cpu_percent = 0;                               // psutil.cpu_percent(): since the previous sample (first: 0.0)
  bool vm_ok = false, swap_ok = false, cpu_ok = false;  // read (else the record says ~0)
};

// /proc/PID/task/TID/schedstat: time on a CPU, time runnable on a run
// queue (both ns), timeslices.
struct ThreadSched {
  std::uint64_t cpu_ns = 0, runq_ns = 0, timeslices = 0;
};
std::optional<ThreadSched> parse_schedstat(std::string_view text);

struct ProcessStats {
  std::uint64_t cpu_ns = 0;     // utime + stime of every thread so far
  std::uint64_t rss_bytes = 0;  // statm resident pages * page size (psutil memory_info().rss)
};

// The "cpu" line of /proc/stat: user nice system idle iowait irq softirq
// steal guest guest_nice, in clock ticks (fields a kernel lacks are 0).
using CpuTimes = std::array<std::uint64_t, 10>;

class ProcStats {
 public:
  // `proc_root`: where procfs is mounted ("/proc"; tests pass a directory
  // with files of known content).
  explicit ProcStats(std::string proc_root = "/proc");

  // System-wide memory and CPU.  cpu_percent compares with the previous
  // call of this object (psutil's interval=None): the first call gives 0.0.
  SystemStats system();
  // One process; nullopt when it is gone or unreadable.
  std::optional<ProcessStats> process(pid_t pid) const;
  // Its resident memory alone (statm), bytes.
  std::optional<std::uint64_t> rss_bytes(pid_t pid) const;
  // One thread's scheduling; nullopt when gone, unreadable, or the kernel
  // keeps no such accounting (CONFIG_SCHED_INFO).
  std::optional<ThreadSched> thread(pid_t pid, pid_t tid) const;
  // A THREAD_SCHED record (ts_ns = CLOCK_MONOTONIC now).
  static lt_thread_sched_event sched_record(pid_t pid, pid_t tid, const ThreadSched& s);
  // A FORK_STATS record for an untraced fork of `target` (ts_ns = now);
  // what could not be read is ~0.
  static lt_fork_stats_event fork_record(pid_t pid, pid_t target, bool via_forkserver,
                                         const std::optional<ThreadSched>& main_thread,
                                         std::optional<std::uint64_t> rss_bytes);

  // A PROC_STATS record for `pid` (header: pid = tid = the process, cpu 0,
  // ts_ns = CLOCK_MONOTONIC now); what could not be read is ~0.
  static lt_proc_stats_event record(pid_t pid, const SystemStats& sys, const std::optional<ProcessStats>& p);

  long clock_ticks() const { return ticks_; }
  long page_size() const { return page_; }

 private:
  std::string root_;
  long ticks_, page_;
  std::optional<CpuTimes> last_cpu_;
};

// The longest any thread of pid has waited for a CPU so far (schedstat's
// run-queue time, ns): what a loaded machine withheld from the job. Waits
// that are bounded in time grow by its growth (handshakes with the bridge,
// the attach's wait for it).
std::uint64_t longest_runqueue_wait(pid_t pid);

// The parsers, pure (tests).
// Memory percentages as psutil (MemAvailable; its fallback when missing or 0
// uses MemFree, Active(file), Inactive(file), SReclaimable and the "low"
// watermarks of /proc/zoneinfo, passed as `zoneinfo`).
std::optional<double> vm_percent(std::string_view meminfo, std::string_view zoneinfo, long page_size);
std::optional<double> swap_percent(std::string_view meminfo);
std::optional<CpuTimes> parse_cpu_line(std::string_view proc_stat);
// psutil.cpu_percent between two readings: fields clipped at 0, guest and
// guest_nice out of the total (they are inside user and nice), idle and
// iowait out of busy; rounded to 0.1; 0.0 when no time passed.
double cpu_percent_between(const CpuTimes& before, const CpuTimes& after);
// utime + stime (ticks) from /proc/PID/stat; the command name may hold
// spaces and parentheses.
std::optional<std::uint64_t> parse_pid_stat_ticks(std::string_view pid_stat);
// Resident pages (second field) from /proc/PID/statm.
std::optional<std::uint64_t> parse_statm_resident(std::string_view statm);
// Python's round(x, 1): correctly rounded from the exact binary value, ties to
// even (glibc's printf rounds the same way).
double round1(double x);

}  // namespace lt::proc
