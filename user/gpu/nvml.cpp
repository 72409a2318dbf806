#include "user/gpu/nvml.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/auxv.h>

#include <algorithm>
#include <cstring>
#include <ctime>

namespace lt::gpu {

namespace {

constexpr int kSuccess = 0;           // NVML_SUCCESS
constexpr int kInsufficientSize = 7;  // NVML_ERROR_INSUFFICIENT_SIZE
constexpr int kTemperatureGpu = 0;    // NVML_TEMPERATURE_GPU
constexpr int kClockSm = 1;           // NVML_CLOCK_SM
constexpr unsigned kNameBuffer = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr std::uint32_t kNone32 = ~0u;
constexpr std::uint64_t kNone64 = ~0ull;

std::uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

template <typename F>
void bind(void* lib, F& fn, const char* symbol) {
  fn = reinterpret_cast<F>(dlsym(lib, symbol));
}

}  // namespace

bool dynamically_linked() {
  // A dynamically linked program has an interpreter (ld.so) among its
  // program headers; a static one (static-pie too) has none.
  const auto* phdr = reinterpret_cast<const ElfW(Phdr)*>(getauxval(AT_PHDR));
  const unsigned long n = getauxval(AT_PHNUM);
  if (!phdr) return true;  // cannot tell: assume the common case
  for (unsigned long i = 0; i < n; ++i)
    if (phdr[i].p_type == PT_INTERP) return true;
  return false;
}

std::optional<Nvml> Nvml::open(std::string* why) {
  // glibc's dlopen from a static program loads the driver's library with a
  // second libc; on a host whose glibc differs from the one we were linked
  // with, that dies with SIGFPE inside dlopen (seen on the H200 machine:
  // static glibc 2.36, host 2.39).  No signal handler can save that.
  if (!dynamically_linked()) {
    if (why)
      *why =
          "statically linked build: cannot load libnvidia-ml.so.1 (use the dynamically linked ltrace-bpf for GPU "
          "statistics)";
    return std::nullopt;
  }
  // RTLD_LOCAL: its symbols stay out of the global namespace of our process.
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    if (why) *why = "libnvidia-ml.so.1 not found: no NVIDIA driver";
    return std::nullopt;
  }
  NvmlApi api;
  bind(lib, api.init, "nvmlInit_v2");
  bind(lib, api.shutdown, "nvmlShutdown");
  bind(lib, api.device_count, "nvmlDeviceGetCount_v2");
  bind(lib, api.handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
  bind(lib, api.name, "nvmlDeviceGetName");
  bind(lib, api.utilization, "nvmlDeviceGetUtilizationRates");
  bind(lib, api.memory, "nvmlDeviceGetMemoryInfo");
  bind(lib, api.temperature, "nvmlDeviceGetTemperature");
  bind(lib, api.power, "nvmlDeviceGetPowerUsage");
  bind(lib, api.clock, "nvmlDeviceGetClockInfo");
  // _v3 (drivers >= 510) and _v2 take the same record layout.
  bind(lib, api.processes, "nvmlDeviceGetComputeRunningProcesses_v3");
  if (!api.processes) bind(lib, api.processes, "nvmlDeviceGetComputeRunningProcesses_v2");
  return from_api(api, why, lib);
}

std::optional<Nvml> Nvml::from_api(const NvmlApi& api, std::string* why, void* lib) {
  auto fail = [&](const std::string& reason) -> std::optional<Nvml> {
    if (why) *why = reason;
    if (lib) dlclose(lib);
    return std::nullopt;
  };
  if (!api.init || !api.shutdown || !api.device_count || !api.handle_by_index)
    return fail(
        "libnvidia-ml.so.1 lacks nvmlInit_v2 / nvmlDeviceGetCount_v2 / nvmlDeviceGetHandleByIndex_v2: driver too old");
  if (int rc = api.init(); rc != kSuccess)
    return fail("nvmlInit_v2 failed (NVML error " + std::to_string(rc) + "): driver not loaded or no permission");
  unsigned int n = 0;
  if (int rc = api.device_count(&n); rc != kSuccess) {
    api.shutdown();
    return fail("nvmlDeviceGetCount_v2 failed (NVML error " + std::to_string(rc) + ")");
  }
  Nvml out;
  out.api_ = api;
  out.lib_ = lib;
  out.live_ = true;
  for (unsigned int i = 0; i < n; ++i) {
    NvmlApi::Device d = nullptr;
    // A device we cannot open keeps its index (nullptr): indices stay nvidia-smi's.
    if (api.handle_by_index(i, &d) != kSuccess) d = nullptr;
    out.devices_.push_back(d);
  }
  if (n == 0) {
    // `out` shuts NVML down and closes the library when it goes.
    if (why) *why = "NVML sees no GPU";
    return std::nullopt;
  }
  out.procs_.resize(64);
  return out;
}

Nvml::Nvml(Nvml&& o) noexcept
    : api_(o.api_), lib_(o.lib_), live_(o.live_), devices_(std::move(o.devices_)), procs_(std::move(o.procs_)) {
  o.lib_ = nullptr;
  o.live_ = false;
}

Nvml& Nvml::operator=(Nvml&& o) noexcept {
  if (this != &o) {
    close();
    api_ = o.api_;
    lib_ = o.lib_;
    live_ = o.live_;
    devices_ = std::move(o.devices_);
    procs_ = std::move(o.procs_);
    o.lib_ = nullptr;
    o.live_ = false;
  }
  return *this;
}

Nvml::~Nvml() {
  close();
}

void Nvml::close() {
  if (live_ && api_.shutdown) api_.shutdown();
  if (lib_) dlclose(lib_);
  live_ = false;
  lib_ = nullptr;
}

std::string Nvml::name(unsigned dev) {
  if (dev >= devices_.size() || !devices_[dev] || !api_.name) return "";
  char buf[kNameBuffer] = {};
  if (api_.name(devices_[dev], buf, sizeof buf) != kSuccess) return "";
  return std::string(buf, strnlen(buf, sizeof buf));
}

bool Nvml::sample(unsigned dev, std::span<const std::uint32_t> pids, lt_device_stats_event& out) {
  if (dev >= devices_.size()) return false;
  out = {};
  out.hdr.kind = LT_EV_DEVICE_STATS;
  out.hdr.size = sizeof out;
  out.hdr.ts_ns = now_ns();  // NVML's utilisation is a mean over the last 1/6 to 1 s before this
  out.device = dev;
  out.gpu_util_pct = out.mem_util_pct = out.temperature_c = out.power_mw = out.sm_clock_mhz = kNone32;
  out.mem_used_bytes = out.mem_total_bytes = kNone64;
  for (auto& m : out.proc_mem_bytes) m = kNone64;
  NvmlApi::Device d = devices_[dev];
  if (d) {
    NvmlApi::Utilization u{};
    if (api_.utilization && api_.utilization(d, &u) == kSuccess) {
      out.gpu_util_pct = u.gpu;
      out.mem_util_pct = u.memory;
    }
    NvmlApi::Memory m{};
    if (api_.memory && api_.memory(d, &m) == kSuccess) {
      out.mem_used_bytes = m.used;
      out.mem_total_bytes = m.total;
    }
    unsigned int v = 0;
    if (api_.temperature && api_.temperature(d, kTemperatureGpu, &v) == kSuccess) out.temperature_c = v;
    if (api_.power && api_.power(d, &v) == kSuccess) out.power_mw = v;
    if (api_.clock && api_.clock(d, kClockSm, &v) == kSuccess) out.sm_clock_mhz = v;

    if (api_.processes && !pids.empty()) {
      unsigned int count = static_cast<unsigned int>(procs_.size());
      int rc = api_.processes(d, &count, procs_.data());
      if (rc == kInsufficientSize && count > procs_.size()) {
        // More contexts than room: grow once (with slack for new ones) and retry.
        procs_.resize(count + 16);
        count = static_cast<unsigned int>(procs_.size());
        rc = api_.processes(d, &count, procs_.data());
      }
      if (rc == kSuccess) {
        count = std::min<unsigned int>(count, static_cast<unsigned int>(procs_.size()));
        unsigned slot = 0;
        // Targets on this device first (several contexts of one pid add up),
        // then the targets not on it (0 bytes).
        for (std::uint32_t pid : pids) {
          if (slot == 4) break;
          std::uint64_t bytes = 0;
          bool found = false;
          for (unsigned int i = 0; i < count; ++i) {
            if (procs_[i].pid != pid) continue;
            found = true;
            if (procs_[i].usedGpuMemory == kNone64 || bytes == kNone64)
              bytes = kNone64;
            else
              bytes += procs_[i].usedGpuMemory;
          }
          if (!found) continue;
          out.proc_pid[slot] = pid;
          out.proc_mem_bytes[slot++] = bytes;
        }
        for (std::uint32_t pid : pids) {
          if (slot == 4) break;
          if (std::find(std::begin(out.proc_pid), std::begin(out.proc_pid) + slot, pid) !=
              std::begin(out.proc_pid) + slot)
            continue;
          out.proc_pid[slot] = pid;
          out.proc_mem_bytes[slot++] = 0;
        }
      }
    }
  }
  return true;
}

}  // namespace lt::gpu
