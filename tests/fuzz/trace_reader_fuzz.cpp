// libFuzzer target for the trace reader: any bytes must give records, a
// warning or an lt::Error, never a crash, a hang or an out-of-bounds access.
//   make fuzz                          bounded run (as in `make test`)
//   make fuzz FUZZ_SECONDS=3600        a longer one
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "reports/advanced/advanced_report.h"
#include "reports/aggregate/actions.h"
#include "reports/aggregate/comm.h"
#include "reports/aggregate/compiles.h"
#include "reports/aggregate/device_stats.h"
#include "reports/aggregate/gpu.h"
#include "reports/aggregate/memory.h"
#include "reports/aggregate/nccl.h"
#include "reports/aggregate/ops.h"
#include "reports/aggregate/stacks.h"
#include "reports/comm/comm_report.h"
#include "reports/comm/comm_stacks_section.h"
#include "reports/comm/nccl_section.h"
#include "reports/gpu/gpu_actions.h"
#include "reports/gpu/gpu_tables.h"
#include "reports/memory/memory_report.h"
#include "reports/ops/compile_section.h"
#include "user/core/errors.h"
#include "user/tracefile/trace_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  lt::Trace trace;
  try {
    lt::tracefile::read_trace(std::string_view(reinterpret_cast<const char*>(data), size), trace);
  } catch (const lt::Error&) {
    return 0;
  }
  // Whatever was read must also aggregate and render without trouble.
  lt::ActionAggregator actions;
  lt::StackAggregator stacks(actions);
  lt::OpAggregator ops(actions, {/*schedule=*/true, /*keep_intervals=*/true});
  lt::GpuAggregator gpu(actions, /*keep_slices=*/true);
  lt::DeviceStatsAggregator dev(actions);
  lt::MemoryAggregator mem(actions, {.keep_events = true});
  lt::CommAggregator comm(actions, {.keep_calls = true});
  lt::CommStackAggregator comm_stacks;
  lt::NcclAggregator nccl(actions);
  lt::CompileAggregator compiles(&actions);
  trace.for_each([&](const lt::lt_event_header& h, const std::byte* p) {
    actions.add(h, p);
    stacks.add(h, p);
    ops.add(h, p);
    gpu.add(h, p);
    dev.add(h, p);
    mem.add(h, p);
    comm.add(h, p);
    comm_stacks.add(h, p);
    nccl.add(h, p);
    compiles.add(h, p);
  });
  auto rep = actions.finish();
  auto st = stacks.finish();
  (void)ops.finish();
  (void)dev.finish();
  const auto memory = mem.finish();
  (void)lt::render_memory_report(memory, {&rep});
  (void)lt::render_cuda_memory_stats(memory, {&rep});
  (void)lt::render_comm_report(comm.finish(), {&rep});
  (void)lt::render_comm_stacks(comm_stacks.finish(), {&rep});
  (void)lt::render_nccl_section(nccl.finish(), {&rep});
  const auto comp = compiles.finish();
  for (const auto& [pid, cp] : comp.procs) (void)lt::render_compile_section(pid, cp, comp.window_begin_ns);
  for (const auto& p : gpu.finish().processes) {
    (void)lt::render_gpu_kern_sum(p.kernels);
    (void)lt::render_nvtx_sum(p.nvtx);
    (void)lt::render_gpu_actions(p.actions, true);
  }
  for (const auto& ps : st.processes) {
    lt::AdvancedReportInput in;
    in.stacks = &ps;
    in.period_ns = st.period_ns;
    (void)lt::render_advanced_report(in);
  }
  return 0;
}
