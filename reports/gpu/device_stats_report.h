// The device-stats report: per process, one block per Lightning action with
// DeviceStatsMonitor's keys (mean, min, max, samples).  Fits 90 columns
// apart from long action names.
//
//   Device stats (DeviceStatsMonitor keys; sampled every 100 ms from outside the process)
//
//   pid 465 rank 0 (python), GPU 0 (NVIDIA H200)
//
//   [whole window]  (61.2 s)
//     key                             mean         min         max   samples
//     cpu_vm_percent                   0.8         0.8         0.8       612
//     ...
//     utilization.gpu (%)             99.4        99.0       100.0       612
//   [LightningModule]BoringModel.training_step  (34.567 s in 1000 calls)
//     ...
//   [no Lightning action]
//     ...
//
// Blocks: the whole window first, then the actions by total time, longest
// first (from the ActionsReport; without one, or for equal times, by name),
// then kNoAction last.  Several GPUs for one process: their keys carry
// "gpu_id: N/" as Lightning's GPUStatsMonitor wrote them.  When some
// process began Lightning actions, only those processes are shown
// (DataLoader workers and launchers do not clutter it), as the Simple report.
#pragma once
#include <string>
#include <vector>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/device_stats.h"

namespace lt {

struct DeviceStatsRenderOptions {
  const ActionsReport* actions = nullptr;  // rank labels, action times for the order (optional)
  std::vector<std::string> gpu_names;      // by GPU index, when the live session knows them (optional)
  unsigned period_ms = 0;                  // 0: the report's estimate
};

std::string render_device_stats(const DeviceStatsReport& rep, const DeviceStatsRenderOptions& opt = {});

}  // namespace lt
