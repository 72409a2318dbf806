#include "reports/verdict/gpu_findings.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "user/text/utf8_text.h"

namespace lt {

namespace {

// CUDA API calls that make the calling thread wait for the device: the
// synchronize calls (stream, device, event) and the synchronous copies
// (cudaMemcpy, cudaMemcpy2D, ...: not the Async ones), whatever CUPTI's
// version suffix ("_v3020").
bool waits_for_device(const std::string& api) {
  if (api.find("Synchronize") != std::string::npos) return true;
  return (api.rfind("cudaMemcpy", 0) == 0 || api.rfind("cuMemcpy", 0) == 0) && api.find("Async") == std::string::npos;
}

std::string short_api(const std::string& api) {
  const auto v = api.find("_v");
  return v == std::string::npos ? api : api.substr(0, v);
}

}  // namespace

void gpu_findings(const ProcessActions& p, const ProcessSteps& s, const GpuReport& gpu, std::vector<Finding>& out) {
  const auto& t = s.train;
  if (!s.has_gpu || t.size() < kMinTrainSteps) return;
  const double n = static_cast<double>(t.size());
  double total = 0, idle = 0, idle_fetch = 0;
  std::array<double, kStepParts> idle_by_part{};
  for (const auto& st : t) {
    total += st.duration_ns() / 1e6;
    idle += st.gpu_idle_ns / 1e6;
    for (std::size_t k = 0; k < kStepParts; ++k) idle_by_part[k] += st.gpu_idle_part_ns[k] / 1e6;
  }
  idle_fetch = idle_by_part[static_cast<std::size_t>(StepPart::dataloader)];
  if (total <= 0) return;
  // The loop thread's waits for the device, and the kernels, inside train steps.
  std::map<std::string, std::pair<std::uint64_t, double>> waits;  // API -> (calls, ms)
  double wait_ms = 0;
  std::vector<double> kernel_us;
  for (const auto& sl : gpu.slices) {
    if (sl.pid != p.meta.pid) continue;
    if (sl.kind == LT_GPU_KERNEL) {
      if (step_at(t, sl.launch_ns ? sl.launch_ns : sl.begin_ns)) kernel_us.push_back((sl.end_ns - sl.begin_ns) / 1e3);
      continue;
    }
    if ((sl.kind != LT_GPU_RUNTIME && sl.kind != LT_GPU_DRIVER) || sl.tid != s.tid || sl.name >= gpu.names.size())
      continue;
    const std::string& api = gpu.names[sl.name];
    if (!waits_for_device(api)) continue;
    const auto i = step_at(t, sl.begin_ns);
    if (!i) continue;
    const StepRecord* st = &t[*i];
    const double d = (std::min(sl.end_ns, st->end_ns) - sl.begin_ns) / 1e6;
    auto& w = waits[short_api(api)];
    w.first++;
    w.second += d;
    wait_ms += d;
  }
  const std::string steps = std::to_string(t.size()) + " train steps";
  if (wait_ms / total >= kHostSync) {
    std::vector<std::pair<std::string, std::pair<std::uint64_t, double>>> by(waits.begin(), waits.end());
    std::sort(by.begin(), by.end(), [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
    std::string calls;
    for (std::size_t i = 0; i < by.size() && i < 3; ++i) {
      char b[64];
      std::snprintf(b, sizeof b, " (%.1f per step, ", by[i].second.first / n);
      calls +=
          (calls.empty() ? "" : ", ") + utf8_text(by[i].first) + b + finding_ms(by[i].second.second / n) + "/step)";
    }
    out.push_back({"host-device sync", p.meta.pid, wait_ms / n, wait_ms / total,
                   "the training loop waits for the GPU " + finding_ms(wait_ms / n) + " per step, " +
                       finding_pct(wait_ms / total) + " of it, in " + calls + "; the GPU runs nothing for " +
                       finding_pct((idle - idle_fetch) / total) + " of the step time outside the dataloader (" + steps +
                       ")",
                   "avoid .item(), .cpu(), .tolist(), print(tensor) and Python branches on GPU tensors inside the "
                   "step (each waits for the GPU); log tensors (self.log keeps them on the device), check values "
                   "every N steps, copy with non_blocking=True"});
  }
  // The device waiting for the loop, its fetch apart (the input-bound
  // finding's time): launch-bound when the kernels are many and tiny.
  const double idle_rest = idle - idle_fetch;
  if (idle_rest / total >= kGpuIdle) {
    const auto fetch = static_cast<std::size_t>(StepPart::dataloader);
    std::size_t most = fetch == 0 ? 1 : 0;
    for (std::size_t k = 0; k < kStepParts; ++k)
      if (k != fetch && idle_by_part[k] > idle_by_part[most]) most = k;
    double median_us = 0;
    if (!kernel_us.empty()) {
      std::nth_element(kernel_us.begin(), kernel_us.begin() + kernel_us.size() / 2, kernel_us.end());
      median_us = kernel_us[kernel_us.size() / 2];
    }
    const double per_step = kernel_us.size() / n;
    const bool launch_bound = per_step >= kLaunchBoundKernels && median_us < kLaunchBoundMedianUs;
    char kernels[96];
    std::snprintf(kernels, sizeof kernels, "%.0f kernels per step, median %.1f us", per_step, median_us);
    out.push_back({launch_bound ? "launch-bound" : "gpu-idle", p.meta.pid, idle_rest / n, idle_rest / total,
                   "the GPU runs nothing for " + finding_ms(idle_rest / n) + " per step, " +
                       finding_pct(idle_rest / total) + " of it, outside the dataloader; most of it (" +
                       finding_pct(idle_by_part[most] / idle_rest) + ") while the loop runs the " +
                       step_part_label(static_cast<StepPart>(most)) + "; " + kernels + " (" + steps + ")",
                   launch_bound
                       ? "fewer, larger kernels: CUDA graphs (torch.compile(mode=\"reduce-overhead\")), "
                         "fused ops, a larger batch"
                       : "move host work out of the step or overlap it (non_blocking copies, fused "
                         "optimizers, fewer hooks per step), or give the GPU more work per step (batch size)"});
  }
}

}  // namespace lt
