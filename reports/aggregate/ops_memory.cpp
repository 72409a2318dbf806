#include <algorithm>
#include <string>

#include "reports/aggregate/ops_state.h"

namespace lt {

using namespace ops_detail;

// One allocator event: its signed size (a CPU free's from the allocation
// seen), charged to the innermost op running on its thread (self) and to
// every distinct op running (total), or to the "[memory]" row when none.
void OpAggregator::State::on_mem(const lt_event_header& h, const lt_mem_event& e) {
  auto& p = proc(h.pid);
  p.last_ts = std::max(p.last_ts, h.ts_ns);
  ++p.mem_events;
  const bool cpu = e.device_type == 0;
  std::int64_t bytes = e.bytes;
  switch (e.what) {
    case LT_MEM_ALLOC:
      if (bytes <= 0) return;
      if (cpu) p.cpu_sizes[e.ptr] = bytes;
      break;
    case LT_MEM_FREE:
      if (cpu && bytes == 0) {
        auto it = p.cpu_sizes.find(e.ptr);
        if (it == p.cpu_sizes.end()) {  // allocated before the attach
          ++p.frees_unknown;
          return;
        }
        bytes = -it->second;
        p.cpu_sizes.erase(it);
      }
      if (bytes > 0) bytes = -bytes;
      break;
    case LT_MEM_OOM:
      ++p.ooms;
      return;
    default:
      return;
  }
  if (!(e.flags & LT_MEM_OPS_KNOWN)) {
    // The op observer's process: the calls around it are found by time
    // as their spans come (ops_by_time.cpp).
    if (p.measured) {
      wait_for_calls(p, h.pid, h.tid, {h.ts_ns, {}, 0, bytes, cpu, p.sink_ptr()});
      return;
    }
    ++p.mem_without_ops;
    return;
  }
  auto& st = p.running[h.tid];
  close_from(p, st, e.depth, h.ts_ns);
  std::uint32_t rows[LT_OPS_DEPTH];
  std::size_t n = 0;
  for (std::size_t i = 0; i < st.size() && n < LT_OPS_DEPTH; ++i) rows[n++] = st[i].name;
  charge_memory(p.sink(), rows, n, bytes, cpu);
}

void OpAggregator::State::charge_memory(Window& w, const std::uint32_t* rows, std::size_t n, std::int64_t bytes,
                                        bool cpu) {
  w.has_memory = true;
  w.has_cuda_memory |= !cpu;
  std::int64_t Acc::*total = cpu ? &Acc::cpu_mem : &Acc::cuda_mem;
  std::int64_t Acc::*self = cpu ? &Acc::self_cpu_mem : &Acc::self_cuda_mem;
  if (n == 0) {
    Acc& a = w.row(intern(std::string(kMemoryRow) + '\t'));
    a.calls++;
    a.*total += bytes;
    a.*self += bytes;
    return;
  }
  std::uint32_t seen[LT_OPS_DEPTH];
  unsigned nseen = 0;
  for (std::size_t i = 0; i < n && nseen < LT_OPS_DEPTH; ++i) {
    const std::uint32_t id = rows[i];
    if (std::find(seen, seen + nseen, id) != seen + nseen) continue;  // recursion counts once
    seen[nseen++] = id;
    w.row(id).*total += bytes;
  }
  w.row(rows[n - 1]).*self += bytes;
}

}  // namespace lt
