// GPU-machine check of the device-stats path without BPF: NVML through
// dlopen, a few raw DEVICE_STATS samples, then StatsSampler for a while into
// DeviceStatsAggregator and the report.  Not built by `make`; build here:
//   g++ -std=c++20 -O2 -I. -Ibpf tests/gpu/device_stats_probe.cpp user/gpu/nvml.cpp user/proc/proc_stats.cpp
//       user/collector/stats_sampler.cpp reports/aggregate/device_stats.cpp reports/aggregate/actions.cpp
//       user/model/action_name.cpp reports/gpu/device_stats_report.cpp -o build/device-stats-probe -ldl
// run there:  build/device-stats-probe PID [seconds]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/device_stats.h"
#include "reports/gpu/device_stats_report.h"
#include "user/collector/stats_sampler.h"
#include "user/gpu/nvml.h"

int main(int argc, char** argv) {
  using namespace lt;
  pid_t target = argc > 1 ? static_cast<pid_t>(std::atoi(argv[1])) : getpid();
  double seconds = argc > 2 ? std::atof(argv[2]) : 2.0;
  std::string why;
  auto t0 = std::chrono::steady_clock::now();
  auto nvml = gpu::Nvml::open(&why);
  auto open_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!nvml) {
    std::printf("nvml: not available: %s (%.1f ms)\n", why.c_str(), open_ms);
  } else {
    std::printf("nvml: %d device(s), open %.1f ms\n", nvml->device_count(), open_ms);
    const std::uint32_t pids[] = {static_cast<std::uint32_t>(target)};
    for (int i = 0; i < 3; ++i) {
      for (int d = 0; d < nvml->device_count(); ++d) {
        lt_device_stats_event e;
        auto s0 = std::chrono::steady_clock::now();
        bool ok = nvml->sample(static_cast<unsigned>(d), pids, e);
        auto us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - s0).count();
        std::printf(
            "dev %u %s ok=%d (%.0f us) util=%u mem_util=%u temp=%u used=%llu total=%llu power_mw=%u sm=%u "
            "pid[0]=%u mem[0]=%llu pid[1]=%u\n",
            e.device, nvml->name(static_cast<unsigned>(d)).c_str(), ok, us, e.gpu_util_pct, e.mem_util_pct,
            e.temperature_c, static_cast<unsigned long long>(e.mem_used_bytes),
            static_cast<unsigned long long>(e.mem_total_bytes), e.power_mw, e.sm_clock_mhz, e.proc_pid[0],
            static_cast<unsigned long long>(e.proc_mem_bytes[0]), e.proc_pid[1]);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    nvml.reset();
  }

  ActionAggregator actions;
  DeviceStatsAggregator stats(actions);
  std::uint64_t records = 0;
  double poll_us_max = 0, poll_us_sum = 0;
  int polls = 0;
  StatsSampler sampler({target}, std::chrono::milliseconds(100), [&](const lt_event_header& h, const std::byte* p) {
    ++records;
    actions.add(h, p);
    stats.add(h, p);
  });
  std::printf("sampler: %d GPU(s) %s\n", sampler.gpu_count(), sampler.gpu_note().c_str());
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    auto s0 = std::chrono::steady_clock::now();
    if (sampler.poll()) {
      double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - s0).count();
      poll_us_max = std::max(poll_us_max, us);
      poll_us_sum += us;
      ++polls;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::printf("sampler: %d samples, %llu records, poll mean %.0f us max %.0f us, error '%s'\n", polls,
              static_cast<unsigned long long>(records), polls ? poll_us_sum / polls : 0.0, poll_us_max,
              sampler.error().c_str());
  actions.finish();
  auto rep = stats.finish();
  DeviceStatsRenderOptions opt;
  opt.gpu_names = sampler.gpu_names();
  std::fputs(render_device_stats(rep, opt).c_str(), stdout);
  return 0;
}
