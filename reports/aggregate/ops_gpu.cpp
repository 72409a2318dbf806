#include <algorithm>
#include <string>

#include "reports/aggregate/kernel_names.h"
#include "reports/aggregate/ops_state.h"

namespace lt {

using namespace ops_detail;

namespace {

// kineto's names for copies in the op table.
const char* copy_row_name(const lt_gpu_activity& a) {
  if (a.kind == LT_GPU_MEMSET) return "Memset (Device)";
  switch (a.copy_kind) {
    case 1:
      return "Memcpy HtoD";
    case 2:
      return "Memcpy DtoH";
    case 8:
      return "Memcpy DtoD";
    case 10:
      return "Memcpy PtoP";
    default:
      return "Memcpy";
  }
}

}  // namespace

void OpAggregator::State::on_gpu_launch(const lt_event_header& h, const lt_gpu_launch_event& e) {
  if (e.source != LT_LAUNCH_CUPTI || !e.correlation) return;  // uprobe launches have no GPU times to join
  auto it = procs.find(h.pid);
  if (it == procs.end()) return;  // no op seen in this process: no op table
  auto& p = it->second;
  Proc::Launch l{p.sink_ptr(), {}};
  const unsigned n = std::min<unsigned>(e.nops, LT_OPS_DEPTH);
  l.ops.assign(e.ops, e.ops + n);
  // The op observer's process: no op stack in BPF; the calls around the
  // launch are found by time as their spans come (a drain later).
  const bool by_time = p.measured && n == 0;
  if (by_time) l.by_rows = l.waiting = true;
  // Bounded: a kernel runs within seconds of its launch.
  constexpr std::size_t kMax = 1'000'000;
  if (p.launch_order.size() - p.launch_head >= kMax) p.launches.erase(p.launch_order[p.launch_head++]);
  if (p.launch_head > kMax) {
    p.launch_order.erase(p.launch_order.begin(), p.launch_order.begin() + static_cast<std::ptrdiff_t>(p.launch_head));
    p.launch_head = 0;
  }
  if (p.launches.insert_or_assign(e.correlation, std::move(l)).second) p.launch_order.push_back(e.correlation);
  if (by_time) wait_for_calls(p, h.pid, h.tid, {h.ts_ns, {}, e.correlation, 0, false, nullptr});
}

// An observed launch's calls are all in: its kernels, waiting with it, are charged.
void OpAggregator::State::launch_settled(Proc& p, std::uint32_t pid, std::uint32_t correlation,
                                         const std::vector<std::uint32_t>& rows) {
  auto l = p.launches.find(correlation);
  if (l == p.launches.end() || !l->second.waiting) return;
  l->second.ops.assign(rows.rbegin(), rows.rend());  // outermost first, as the probes' stack
  l->second.waiting = false;
  for (const auto& a : l->second.queued) charge_gpu(pid, l->second, a);
  std::vector<lt_gpu_activity>().swap(l->second.queued);
}

// torch.profiler's device columns: a kernel is a row of its own (its time
// both self and total), and a child of the innermost op that launched it:
// that op's Self CUDA, and the CUDA total of every op around it.
void OpAggregator::State::on_gpu_activity(const lt_event_header& h, const lt_gpu_activity& a) {
  auto it = procs.find(h.pid);
  if (it == procs.end()) return;
  auto& p = it->second;
  auto l = p.launches.find(a.correlation);
  if (!a.correlation || l == p.launches.end()) return;  // launched before the attach (or the op report's window)
  if (l->second.waiting) {                              // the calls around its launch are not all in yet
    if (l->second.queued.size() < 64) l->second.queued.push_back(a);
    return;
  }
  charge_gpu(h.pid, l->second, a);
}

void OpAggregator::State::charge_gpu(std::uint32_t pid, const Proc::Launch& l, const lt_gpu_activity& a) {
  Window* target = resolve(l.window.get());
  if (!target) return;  // its step was left out by --schedule
  Window& w = *target;
  w.has_cuda = true;
  const std::uint64_t dur = a.end_ns > a.start_ns ? a.end_ns - a.start_ns : 0;
  switch (a.kind) {
    case LT_GPU_KERNEL:
    case LT_GPU_MEMCPY:
    case LT_GPU_MEMSET: {
      const std::string name = a.kind == LT_GPU_KERNEL
                                   ? demangle_kernel(gpu_names.get(pid, LT_NAME_KERNEL, a.name_id, "kernel#"))
                                   : copy_row_name(a);
      Acc& r = w.row(intern(name + '\t'));
      r.device = true;
      r.calls++;
      r.self_cuda += dur;
      r.cuda_total += dur;
      // The probes' stack holds op indexes; an observed launch, rows.
      auto id_of = [&](std::uint32_t v) { return l.by_rows ? v : name_id_of(v); };
      const auto& ops = l.ops;
      std::uint32_t seen[LT_OPS_DEPTH];
      unsigned nseen = 0;
      for (std::size_t i = 0; i < ops.size() && nseen < LT_OPS_DEPTH; ++i) {
        const std::uint32_t id = id_of(ops[i]);
        if (std::find(seen, seen + nseen, id) == seen + nseen) {
          seen[nseen++] = id;
          w.row(id).cuda_total += dur;
        }
      }
      if (!ops.empty()) w.row(id_of(ops.back())).self_cuda += dur;
      return;
    }
    case LT_GPU_RUNTIME: {
      // torch lists the runtime calls (cudaLaunchKernel, ...) with their
      // CPU time; CUPTI measured it.
      Acc& r = w.row(intern(gpu_names.get(pid, LT_NAME_RUNTIME_API, a.cbid, "runtime#") + '\t'));
      r.calls++;
      r.cpu_exact += dur;
      return;
    }
    default:
      return;
  }
}

}  // namespace lt
