// Device statistics from outside the process, the figures Lightning's
// DeviceStatsMonitor logs: every `period`, one DEVICE_STATS record per GPU
// (NVML, when a driver is there) and one PROC_STATS record per target
// process (/proc).  Called from the session loop; records go to a callback
// (the session's emit), timestamped with CLOCK_MONOTONIC like every other.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bpf/events.h"
#include "user/gpu/nvml.h"
#include "user/proc/fork_finder.h"
#include "user/proc/proc_stats.h"

namespace lt {

class StatsSampler {
 public:
  using Sink = std::function<void(const lt_event_header&, const std::byte*)>;
  struct Config {
    bool gpu = true;                  // false: never load NVML
    std::string proc_root = "/proc";  // tests
    bool for_verdict = false;         // the verdict's samples alone: LT_PROC_STATS_FOR_VERDICT
    // The targets' forks are not traced (no --children): a FORK_STATS per
    // fork beside each PROC_STATS (their DataLoader workers, from /proc).
    bool untraced_forks = false;
  };

  // Loads NVML now if it is there (nvmlInit can take a while without
  // persistence mode: better at attach than in the loop), and takes the
  // first /proc/stat reading, so the first record's cpu_percent already
  // covers [construction, first sample] instead of psutil's 0.0.
  StatsSampler(std::vector<pid_t> pids, std::chrono::milliseconds period, Sink sink);
  StatsSampler(std::vector<pid_t> pids, std::chrono::milliseconds period, Sink sink, Config config);
  ~StatsSampler();

  // The processes to sample from now on (targets appear and exit).
  void set_pids(std::vector<pid_t> pids);
  // Samples when a period has passed since the last sample (the first is due
  // a period after construction; each next one a period after the one
  // before, so the mean interval is the period whatever the loop's own
  // rhythm).  True if it sampled.  Never throws: a failure drops that sample.
  bool poll() noexcept;
  bool poll(std::uint64_t now_ns) noexcept;  // tests: now given
  // Samples now, whatever the time.
  void sample_now() noexcept;
  // When poll() samples next (CLOCK_MONOTONIC ns).  `quiet`: no record came
  // of late (the targets wait): a second after the last sample at the
  // earliest, since what a waiting process shows changes slowly.
  std::uint64_t next_due_ns(bool quiet) const;

  std::chrono::milliseconds period() const { return period_; }
  // A new period from the next sample on (watch: slower in its cheap tier).
  void set_period(std::chrono::milliseconds period);
  int gpu_count() const { return nvml_ ? nvml_->device_count() : 0; }
  // Why there are no GPU records ("" when there are): for a stderr note.
  const std::string& gpu_note() const { return gpu_note_; }
  // "NVIDIA H200" etc. per device index (empty without NVML).
  const std::vector<std::string>& gpu_names() const { return gpu_names_; }
  // The first error a sample swallowed (e.g. the sink's write failed), "" if none.
  const std::string& error() const { return error_; }

 private:
  void note_error(std::exception_ptr e) noexcept;
  std::vector<pid_t> pids_;
  std::vector<std::uint32_t> pids32_;
  std::chrono::milliseconds period_;
  Sink sink_;
  proc::ProcStats proc_;
  std::optional<gpu::Nvml> nvml_;
  std::uint32_t proc_flags_ = 0;           // on every PROC_STATS
  std::optional<proc::ForkFinder> forks_;  // Config::untraced_forks
  std::uint64_t next_fork_scan_ = 0;       // a /proc scan a second at most
  std::string gpu_note_;
  std::vector<std::string> gpu_names_;
  std::string error_;
  std::uint64_t next_due_ = 0;
};

}  // namespace lt
