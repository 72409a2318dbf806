// `--report memory` as text, and the CUDA allocator keys `--device-stats`
// adds, from a MemoryReport (reports/aggregate/memory.h).  Byte counts are
// exact integers (allocation sizes come from the allocator's own calls);
// nothing here is sampled.
//
//   Memory (torch's allocators, seen while attached)
//   Allocations made before the attach are unknown: ...
//
//   pid 4242 (python)
//     device  allocs  allocated  frees  freed  frees of unknown size  live at end  peak live  reserved  peak reserved
//     OOMs
//     ...
//     action  device  allocs  allocated  frees  freed  peak live  peak reserved
//     ...
//     still alive at the end: N allocations, B bytes, by op and allocating stack (biggest first)
//     bytes  count  device  op  allocated at
//     ...
//     out of memory: ...
#pragma once
#include <string>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/memory.h"

namespace lt {

struct MemoryRenderOptions {
  const ActionsReport* actions = nullptr;  // process labels (rank, comm), the window start
  int leak_rows = 20;                      // leak groups shown per process; -1: all
  unsigned stack_frames = 8;               // frames shown under each leak and OOM (innermost first)
};

std::string render_memory_report(const MemoryReport& rep, const MemoryRenderOptions& opt = {});

// The keys of torch.cuda.memory_stats() (DeviceStatsMonitor's CUDA keys)
// that the allocator records determine, per process and CUDA device, and
// the list of those they do not.  "" when no CUDA records.
std::string render_cuda_memory_stats(const MemoryReport& rep, const MemoryRenderOptions& opt = {});

// The innermost Python frame of a stack as "file:line (function)"; "" none.
std::string allocating_line(const std::vector<StackFrame>& root_first);

}  // namespace lt
