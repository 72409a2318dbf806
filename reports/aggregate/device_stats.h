// Device statistics (PROC_STATS from /proc, DEVICE_STATS from NVML) per
// process and per Lightning action, under the keys Lightning's
// DeviceStatsMonitor logs.  A sample is charged to the innermost action open
// on the process's main thread (tid == pid) at the sample's time, as the
// ActionAggregator sees the stream (StackAggregator does the same for stack
// samples); outside every action it goes to kNoAction.  Every sample of a
// process also counts in its whole-window summary.
//
// GPU samples (pid 0) go to the processes that use that GPU (seen in the
// record's proc_pid with memory > 0, in this record or an earlier one); while
// no live target is known to use it, to the live processes not yet known on
// any GPU, among those that have begun a Lightning action if any has (so
// DataLoader workers get none).
#pragma once
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/stacks.h"  // kNoAction

namespace lt {

enum class DeviceStatKey : std::uint8_t {
  // PROC_STATS, system-wide: Lightning's get_cpu_stats (psutil), its order
  cpu_vm_percent,
  cpu_percent,
  cpu_swap_percent,
  // PROC_STATS, this process (ours)
  process_cpu_percent,  // CPU time / wall time * 100 between two samples (> 100 with threads)
  process_rss_mb,
  // DEVICE_STATS: Lightning's old nvidia-smi based get_nvidia_gpu_stats, its order
  gpu_utilization,
  gpu_memory_used_mb,
  gpu_memory_free_mb,
  gpu_memory_utilization,
  gpu_temperature,
  // DEVICE_STATS (ours)
  gpu_power_w,
  gpu_sm_clock_mhz,
  gpu_process_memory_mb,  // GPU memory of this process on that GPU
};
// "cpu_vm_percent", ..., "utilization.gpu (%)", "memory.used (MB)", ...
// MB are MiB (2^20 bytes), as nvidia-smi's.
const char* device_stat_name(DeviceStatKey k);
bool device_stat_is_memory(DeviceStatKey k);

struct StatSummary {
  std::uint64_t count = 0;
  double sum = 0;
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  void add(double v) {
    ++count;
    sum += v;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  double mean() const { return count ? sum / static_cast<double>(count) : 0.0; }
};

struct DeviceStatRow {
  int device = -1;  // GPU index; -1 for CPU and process keys
  DeviceStatKey key{};
  StatSummary stat;
};

struct ActionDeviceStats {
  std::string action;               // kNoAction outside every action; "" for the whole window
  std::vector<DeviceStatRow> rows;  // CPU keys first, then each GPU in index order; keys in enum order
  std::uint64_t samples = 0;        // records charged here (PROC_STATS + DEVICE_STATS)
  std::uint64_t first_ns = 0, last_ns = 0;
};

struct ProcessDeviceStats {
  std::uint32_t pid = 0;
  int rank = -1, local_rank = -1, world_size = -1;  // from PROC_INFO
  std::string comm;
  bool has_actions = false;                // began a Lightning action in the stream
  std::vector<int> devices;                // GPUs whose samples it got, ascending
  ActionDeviceStats window;                // every sample of the process
  std::vector<ActionDeviceStats> actions;  // first-begin order, then the rest by name, kNoAction last
  // Its resident memory over time (ts, MiB), for growth (the verdict's
  // memory finding): every sample up to kRssSeriesMax, then every 2nd, 4th,
  // ... (the whole run at an even spacing, bounded).
  std::vector<std::pair<std::uint64_t, double>> rss_mb;
  static constexpr std::size_t kRssSeriesMax = 4096;
  // Its main thread's scheduling over time (THREAD_SCHED: cumulative time
  // on a CPU and waiting on a run queue), bounded as rss_mb: for the
  // verdict's CPU contention.
  struct Sched {
    std::uint64_t ts = 0, cpu_ns = 0, runq_ns = 0;
  };
  std::vector<Sched> sched;
  // The sampler looked for its untraced forks (LT_PROC_STATS_FORKS_SCANNED):
  // none among DeviceStatsReport::untraced_forks means none ran.
  bool forks_scanned = false;
};

// A fork of a target that was not traced (--pid without --children), from
// FORK_STATS: a DataLoader worker's main thread's CPU over time (runq_ns 0).
struct UntracedFork {
  std::uint32_t pid = 0, target = 0;
  bool via_forkserver = false;
  std::vector<ProcessDeviceStats::Sched> sched;  // bounded as ProcessDeviceStats::sched
};

struct DeviceStatsReport {
  // Mean interval between two samples of one source (the sampler does not
  // write its period into the stream); 0 with fewer than two samples.
  std::uint64_t period_ns = 0;
  bool gpu = false;                           // the stream has DEVICE_STATS records
  bool for_verdict = false;                   // every PROC_STATS was the verdict's alone (LT_PROC_STATS_FOR_VERDICT)
  std::vector<ProcessDeviceStats> processes;  // those with samples, in order of first appearance
  std::vector<UntracedFork> untraced_forks;   // by pid
};

class DeviceStatsAggregator {
 public:
  // `actions` must see each record before this does.
  explicit DeviceStatsAggregator(const ActionAggregator& actions);
  ~DeviceStatsAggregator();
  void add(const lt_event_header& h, const std::byte* record);
  DeviceStatsReport finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace lt
