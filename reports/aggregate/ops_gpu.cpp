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
  // Bounded: a kernel runs within seconds of its launch.
  constexpr std::size_t kMax = 1'000'000;
  if (p.launch_order.size() - p.launch_head >= kMax) p.launches.erase(p.launch_order[p.launch_head++]);
  if (p.launch_head > kMax) {
    p.launch_order.erase(p.launch_order.begin(), p.launch_order.begin() + static_cast<std::ptrdiff_t>(p.launch_head));
    p.launch_head = 0;
  }
  if (p.launches.insert_or_assign(e.correlation, std::move(l)).second) p.launch_order.push_back(e.correlation);
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
  Window* target = resolve(l->second.window.get());
  if (!target) return;  // its step was left out by --schedule
  Window& w = *target;
  w.has_cuda = true;
  const std::uint64_t dur = a.end_ns > a.start_ns ? a.end_ns - a.start_ns : 0;
  switch (a.kind) {
    case LT_GPU_KERNEL:
    case LT_GPU_MEMCPY:
    case LT_GPU_MEMSET: {
      const std::string name = a.kind == LT_GPU_KERNEL
                                   ? demangle_kernel(gpu_names.get(h.pid, LT_NAME_KERNEL, a.name_id, "kernel#"))
                                   : copy_row_name(a);
      Acc& r = w.row(intern(name + '\t'));
      r.device = true;
      r.calls++;
      r.self_cuda += dur;
      r.cuda_total += dur;
      const auto& ops = l->second.ops;
      std::uint32_t seen[LT_OPS_DEPTH];
      unsigned nseen = 0;
      for (std::size_t i = 0; i < ops.size(); ++i) {
        const std::uint32_t id = name_id_of(ops[i]);
        if (std::find(seen, seen + nseen, id) == seen + nseen) {
          seen[nseen++] = id;
          w.row(id).cuda_total += dur;
        }
      }
      if (!ops.empty()) w.row(name_id_of(ops.back())).self_cuda += dur;
      return;
    }
    case LT_GPU_RUNTIME: {
      // torch lists the runtime calls (cudaLaunchKernel, ...) with their
      // CPU time; CUPTI measured it.
      Acc& r = w.row(intern(gpu_names.get(h.pid, LT_NAME_RUNTIME_API, a.cbid, "runtime#") + '\t'));
      r.calls++;
      r.cpu_exact += dur;
      return;
    }
    default:
      return;
  }
}

}  // namespace lt
