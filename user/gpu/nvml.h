// NVML (the driver's management library, what nvidia-smi reads) through
// dlopen("libnvidia-ml.so.1"): no link-time dependency and no CUDA header.
// One sample = one GPU at one time, as an lt_device_stats_event.  Values a
// device does not support (MIG, older boards, no permission) are ~0, as
// events.h says.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bpf/events.h"

namespace lt::gpu {

// The few NVML entry points we call, with their C ABI (nvml.h, declared here
// so no header is needed).  All return nvmlReturn_t (an int; 0 = success).
struct NvmlApi {
  using Device = void*;  // nvmlDevice_t: an opaque pointer
  struct Utilization {   // nvmlUtilization_t
    unsigned int gpu, memory;
  };
  struct Memory {  // nvmlMemory_t (v1)
    unsigned long long total, free, used;
  };
  struct ProcessInfo {  // nvmlProcessInfo_t as taken by *_v3 and *_v2 (the "v2" layout)
    unsigned int pid;
    unsigned long long usedGpuMemory;  // ~0 (NVML_VALUE_NOT_AVAILABLE): unknown
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
  };
  int (*init)() = nullptr;  // nvmlInit_v2
  int (*shutdown)() = nullptr;
  int (*device_count)(unsigned int*) = nullptr;                     // nvmlDeviceGetCount_v2
  int (*handle_by_index)(unsigned int, Device*) = nullptr;          // nvmlDeviceGetHandleByIndex_v2
  int (*name)(Device, char*, unsigned int) = nullptr;               // nvmlDeviceGetName
  int (*utilization)(Device, Utilization*) = nullptr;               // nvmlDeviceGetUtilizationRates
  int (*memory)(Device, Memory*) = nullptr;                         // nvmlDeviceGetMemoryInfo
  int (*temperature)(Device, int, unsigned int*) = nullptr;         // nvmlDeviceGetTemperature (0 = GPU)
  int (*power)(Device, unsigned int*) = nullptr;                    // nvmlDeviceGetPowerUsage (mW)
  int (*clock)(Device, int, unsigned int*) = nullptr;               // nvmlDeviceGetClockInfo (1 = SM, MHz)
  int (*processes)(Device, unsigned int*, ProcessInfo*) = nullptr;  // nvmlDeviceGetComputeRunningProcesses_v3/_v2
};

// False in a statically linked program, where dlopen of the driver's
// libraries is unsafe (Nvml::open then refuses with a reason).
bool dynamically_linked();

class Nvml {
 public:
  // Loads and initialises NVML; nullopt with the reason in *why (e.g.
  // "libnvidia-ml.so.1 not found: no NVIDIA driver") when it cannot.
  static std::optional<Nvml> open(std::string* why);
  // The same over a given function table (tests; `lib` is dlclose()d at the
  // end when not null).  init/shutdown/device_count/handle_by_index are
  // required; any other entry may be null (its values are then ~0).
  static std::optional<Nvml> from_api(const NvmlApi& api, std::string* why, void* lib = nullptr);

  Nvml(Nvml&& o) noexcept;
  Nvml& operator=(Nvml&& o) noexcept;
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;
  ~Nvml();  // nvmlShutdown, dlclose

  int device_count() const { return static_cast<int>(devices_.size()); }
  // One sample of device `dev`: the whole record, header included (kind,
  // size, pid 0, tid 0, cpu 0, ts_ns = CLOCK_MONOTONIC now).  proc_pid /
  // proc_mem_bytes: first the pids of `pids` that have a compute context on
  // this device (with their memory), then the others with 0 bytes, up to 4;
  // unused slots have pid 0 and ~0 bytes; all ~0 when NVML cannot list
  // processes.  False for a device index out of range.
  bool sample(unsigned dev, std::span<const std::uint32_t> pids, lt_device_stats_event& out);
  std::string name(unsigned dev);

 private:
  Nvml() = default;
  void close();
  NvmlApi api_;
  void* lib_ = nullptr;
  bool live_ = false;  // we own an nvmlInit
  std::vector<NvmlApi::Device> devices_;
  std::vector<NvmlApi::ProcessInfo> procs_;  // reused between samples
};

}  // namespace lt::gpu
