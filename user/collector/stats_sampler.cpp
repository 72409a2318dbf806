#include "user/collector/stats_sampler.h"

#include <algorithm>
#include <ctime>
#include <exception>

namespace lt {

namespace {
std::uint64_t now_monotonic() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

template <typename R>
void deliver(const StatsSampler::Sink& sink, const R& r) {
  if (sink) sink(r.hdr, reinterpret_cast<const std::byte*>(&r));
}
}  // namespace

StatsSampler::StatsSampler(std::vector<pid_t> pids, std::chrono::milliseconds period, Sink sink)
    : StatsSampler(std::move(pids), period, std::move(sink), Config{}) {}

StatsSampler::StatsSampler(std::vector<pid_t> pids, std::chrono::milliseconds period, Sink sink, Config config)
    : period_(period.count() > 0 ? period : std::chrono::milliseconds(100)),
      sink_(std::move(sink)),
      proc_(config.proc_root),  // a copy: the fork finder reads it too
      proc_flags_(config.for_verdict ? LT_PROC_STATS_FOR_VERDICT : 0) {
  if (config.untraced_forks) forks_.emplace(config.proc_root);
  set_pids(std::move(pids));
  if (config.gpu) {
    nvml_ = gpu::Nvml::open(&gpu_note_);
    if (nvml_) {
      gpu_note_.clear();
      for (int d = 0; d < nvml_->device_count(); ++d) gpu_names_.push_back(nvml_->name(static_cast<unsigned>(d)));
    }
  } else {
    gpu_note_ = "GPU statistics off";
  }
  proc_.system();  // psutil's first cpu_percent() call: the reference reading
  // The first sample a period from now, so its cpu_percent spans one.
  next_due_ = now_monotonic() + static_cast<std::uint64_t>(std::chrono::nanoseconds(period_).count());
}

StatsSampler::~StatsSampler() = default;

void StatsSampler::set_pids(std::vector<pid_t> pids) {
  pids_ = std::move(pids);
  pids32_.clear();
  for (pid_t p : pids_) pids32_.push_back(static_cast<std::uint32_t>(p));
}

void StatsSampler::note_error(std::exception_ptr e) noexcept {
  if (!error_.empty()) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    try {
      error_ = x.what();
    } catch (...) {
    }
  } catch (...) {
    error_ = "unknown error";  // fits the small-string buffer: no allocation
  }
}

bool StatsSampler::poll() noexcept {
  return poll(now_monotonic());
}

bool StatsSampler::poll(std::uint64_t now_ns) noexcept {
  const auto period_ns = static_cast<std::uint64_t>(std::chrono::nanoseconds(period_).count());
  if (now_ns < next_due_) return false;
  // On the grid a period apart; after a stall (more than a period late),
  // start again from now instead of sampling in a burst.
  next_due_ = now_ns - next_due_ < period_ns ? next_due_ + period_ns : now_ns + period_ns;
  sample_now();
  return true;
}

void StatsSampler::set_period(std::chrono::milliseconds period) {
  if (period.count() <= 0 || period == period_) return;
  // The next sample a new period after the last one.
  const auto old_ns = static_cast<std::uint64_t>(std::chrono::nanoseconds(period_).count());
  period_ = period;
  next_due_ = next_due_ - old_ns + static_cast<std::uint64_t>(std::chrono::nanoseconds(period_).count());
}

std::uint64_t StatsSampler::next_due_ns(bool quiet) const {
  constexpr std::uint64_t kQuietNs = 1'000'000'000;
  const auto period_ns = static_cast<std::uint64_t>(std::chrono::nanoseconds(period_).count());
  return quiet && period_ns < kQuietNs ? next_due_ + (kQuietNs - period_ns) : next_due_;
}

void StatsSampler::sample_now() noexcept {
  try {
    if (nvml_) {
      lt_device_stats_event d;
      for (int i = 0; i < nvml_->device_count(); ++i)
        if (nvml_->sample(static_cast<unsigned>(i), pids32_, d)) deliver(sink_, d);
    }
    if (pids_.empty()) return;
    const proc::SystemStats sys = proc_.system();
    // The targets' untraced forks: a scan of every process's stat (~3.5 us
    // each here: 254 us for 72 processes) a second at most, and never more
    // than 0.1 % of the time (a host of thousands: every few seconds);
    // their samples every period.
    if (forks_) {
      const std::uint64_t now = now_monotonic();
      if (now >= next_fork_scan_) {
        forks_->scan(pids_);
        const std::uint64_t took = now_monotonic() - now;
        next_fork_scan_ = now + std::max<std::uint64_t>(1'000'000'000, 1000 * took);
      }
    }
    for (pid_t p : pids_) {
      auto ps = proc_.process(p);
      if (!ps) continue;  // gone: its exit is the session's business
      lt_proc_stats_event r = proc::ProcStats::record(p, sys, ps);
      r.flags = proc_flags_ | (forks_ && forks_->ok() ? LT_PROC_STATS_FORKS_SCANNED : 0);
      deliver(sink_, r);
      // The main thread's run-queue wait: the verdict's CPU contention.
      if (auto sched = proc_.thread(p, p)) deliver(sink_, proc::ProcStats::sched_record(p, p, *sched));
      if (forks_)
        for (const auto& f : forks_->forks()) {
          if (f.target != p) continue;
          // Its CPU from its main thread's schedstat; its RSS alone (its
          // stat's CPU time would repeat the schedstat's).
          auto main_thread = proc_.thread(f.pid, f.pid);
          auto mem = proc_.rss_bytes(f.pid);
          if (main_thread || mem)  // else gone since the scan
            deliver(sink_, proc::ProcStats::fork_record(f.pid, f.target, f.via_forkserver, main_thread, mem));
        }
    }
  } catch (...) {
    // A sample is worth less than the session: drop it, keep the reason.
    note_error(std::current_exception());
  }
}

}  // namespace lt
