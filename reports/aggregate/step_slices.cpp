#include "reports/aggregate/step_slices.h"

#include <algorithm>
#include <numeric>

#include "bpf/events.h"

namespace lt {

std::vector<std::size_t> sorted_by_begin(const ProcessActions& p) {
  std::vector<std::size_t> v(p.intervals.size());
  std::iota(v.begin(), v.end(), 0);
  std::stable_sort(v.begin(), v.end(),
                   [&](std::size_t a, std::size_t b) { return p.intervals[a].begin_ns < p.intervals[b].begin_ns; });
  return v;
}

namespace {
// Depth by containment per row (tid): by start, the longer first, a stack
// of the open slices' ends.
void nest(std::vector<StepSlice>& out) {
  std::stable_sort(out.begin(), out.end(), [](const StepSlice& a, const StepSlice& b) {
    if (a.tid != b.tid) return a.tid < b.tid;
    return a.begin_ns != b.begin_ns ? a.begin_ns < b.begin_ns : a.end_ns > b.end_ns;
  });
  std::vector<std::uint64_t> stack;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (i == 0 || out[i].tid != out[i - 1].tid) stack.clear();
    while (!stack.empty() && stack.back() <= out[i].begin_ns) stack.pop_back();
    out[i].depth = static_cast<std::uint32_t>(stack.size());
    stack.push_back(out[i].end_ns);
  }
}
}  // namespace

GpuWork gpu_work_of(const GpuReport& gpu, std::uint32_t pid) {
  GpuWork w;
  for (const auto& g : gpu.slices)
    if (g.pid == pid && (g.kind == LT_GPU_KERNEL || g.kind == LT_GPU_MEMCPY || g.kind == LT_GPU_MEMSET) &&
        g.end_ns > g.begin_ns) {
      w.by_begin.push_back(&g);
      w.longest = std::max(w.longest, g.end_ns - g.begin_ns);
    }
  std::stable_sort(w.by_begin.begin(), w.by_begin.end(),
                   [](const GpuSlice* a, const GpuSlice* b) { return a->begin_ns < b->begin_ns; });
  return w;
}

std::vector<StepSlice> step_gpu_slices(const GpuWork& w, std::uint64_t begin_ns, std::uint64_t end_ns) {
  std::vector<StepSlice> out;
  const std::uint64_t from = begin_ns > w.longest ? begin_ns - w.longest : 0;
  auto it = std::lower_bound(w.by_begin.begin(), w.by_begin.end(), from,
                             [](const GpuSlice* g, std::uint64_t t) { return g->begin_ns < t; });
  for (; it != w.by_begin.end() && (*it)->begin_ns < end_ns; ++it) {
    const GpuSlice& g = **it;
    if (g.end_ns <= begin_ns) continue;
    out.push_back(
        {g.name, g.stream, std::max(g.begin_ns, begin_ns) - begin_ns, std::min(g.end_ns, end_ns) - begin_ns, 0});
  }
  nest(out);
  return out;
}

std::vector<StepSlice> step_slices(const ProcessActions& p, const std::vector<std::size_t>& by_begin,
                                   std::uint64_t begin_ns, std::uint64_t end_ns) {
  std::vector<StepSlice> out;
  auto it = std::lower_bound(by_begin.begin(), by_begin.end(), begin_ns,
                             [&](std::size_t i, std::uint64_t t) { return p.intervals[i].begin_ns < t; });
  for (; it != by_begin.end() && p.intervals[*it].begin_ns <= end_ns; ++it) {
    const auto& iv = p.intervals[*it];
    if (iv.end_ns > end_ns || iv.end_ns < iv.begin_ns) continue;
    out.push_back({iv.action, iv.tid, iv.begin_ns - begin_ns, iv.end_ns - begin_ns, 0});
  }
  nest(out);
  return out;
}

std::vector<std::size_t> timeline_priority(const std::vector<StepRecord>& steps, std::size_t slowest) {
  std::vector<std::size_t> out;
  if (steps.empty()) return out;
  std::vector<std::size_t> by_dur(steps.size());
  std::iota(by_dur.begin(), by_dur.end(), 0);
  // Longest first; among equals the earlier step.
  std::stable_sort(by_dur.begin(), by_dur.end(),
                   [&](std::size_t a, std::size_t b) { return steps[a].duration_ns() > steps[b].duration_ns(); });
  auto add = [&](std::size_t i) {
    if (std::find(out.begin(), out.end(), i) == out.end()) out.push_back(i);
  };
  for (std::size_t k = 0; k < std::min(slowest, by_dur.size()); ++k) add(by_dur[k]);
  // The median step: nearest rank in duration order (by_dur is descending).
  const std::size_t rank = (steps.size() + 1) / 2;  // 1-based, ascending
  add(by_dur[steps.size() - rank]);
  add(0);
  add(steps.size() - 1);
  return out;
}

TimelineChoice choose_timeline_steps(const std::vector<StepRecord>& steps, const std::vector<std::size_t>& slice_counts,
                                     std::size_t budget_bytes, std::size_t slowest,
                                     const std::vector<std::size_t>& also) {
  TimelineChoice c;
  auto order = timeline_priority(steps, slowest);
  // `also` holds every other rank's picks on a merged page (thousands at
  // 1024 ranks): a seen-mark per step keeps this linear.
  std::vector<bool> seen(steps.size(), false);
  for (std::size_t i : order) seen[i] = true;
  for (std::size_t i : also)
    if (i < steps.size() && !seen[i]) seen[i] = true, order.push_back(i);
  if (order.empty()) return c;
  c.default_step = order.front();
  std::size_t used = 0;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::size_t i = order[k];
    if (k > 0 && used >= budget_bytes) {  // full: the rest are left out unlooked-at
      c.left_out += order.size() - k;
      break;
    }
    const std::size_t bytes = (i < slice_counts.size() ? slice_counts[i] : 0) * kTimelineSliceBytes;
    if (k == 0 && bytes > budget_bytes) {
      c.slice_cap = std::max<std::size_t>(1, budget_bytes / kTimelineSliceBytes);
      c.steps.push_back(i);
      c.priority.push_back(i);
      used = budget_bytes;
      continue;
    }
    if (used + bytes > budget_bytes) {
      ++c.left_out;
      continue;
    }
    used += bytes;
    c.steps.push_back(i);
    c.priority.push_back(i);
  }
  c.used_bytes = used;
  std::sort(c.steps.begin(), c.steps.end());
  return c;
}

std::vector<std::size_t> share_in_priority(const TimelineChoice& c, const std::vector<std::size_t>& counts,
                                           std::size_t left) {
  std::vector<std::size_t> caps(counts.size());
  for (std::size_t i : c.priority) {
    if (i >= counts.size()) continue;
    caps[i] = std::min(counts[i], left);
    left -= caps[i];
  }
  return caps;
}

std::vector<std::size_t> timeline_op_caps(const TimelineChoice& c, const std::vector<std::size_t>& op_counts,
                                          std::size_t budget_bytes) {
  return share_in_priority(c, op_counts,
                           budget_bytes > c.used_bytes ? (budget_bytes - c.used_bytes) / kTimelineSliceBytes : 0);
}

MemWork mem_work_of(const MemoryReport& mem, std::uint32_t pid) {
  MemWork w;
  for (const auto& p : mem.processes)
    if (p.pid == pid)
      for (const auto& e : p.events) w.by_ts.push_back(&e);
  std::stable_sort(w.by_ts.begin(), w.by_ts.end(),
                   [](const MemEvent* a, const MemEvent* b) { return a->ts_ns < b->ts_ns; });
  return w;
}

namespace {
auto first_mem_at(const MemWork& w, std::uint64_t t) {
  return std::lower_bound(w.by_ts.begin(), w.by_ts.end(), t,
                          [](const MemEvent* e, std::uint64_t v) { return e->ts_ns < v; });
}
}  // namespace

std::size_t step_mem_count(const MemWork& w, std::uint64_t begin_ns, std::uint64_t end_ns) {
  return end_ns > begin_ns ? static_cast<std::size_t>(first_mem_at(w, end_ns) - first_mem_at(w, begin_ns)) : 0;
}

std::vector<StepMark> step_mem_marks(const MemWork& w, std::uint64_t begin_ns, std::uint64_t end_ns, std::size_t cap) {
  std::vector<StepMark> out;
  if (end_ns <= begin_ns) return out;
  for (auto it = first_mem_at(w, begin_ns); it != w.by_ts.end() && (*it)->ts_ns < end_ns; ++it) {
    const MemEvent& e = **it;
    out.push_back({e.tid, e.ts_ns - begin_ns, e.bytes,
                   static_cast<std::uint8_t>((e.device.cuda() ? kMarkCuda : 0) | (e.oom ? kMarkOom : 0))});
  }
  auto size = [](const StepMark& m) -> std::uint64_t {
    return m.bytes < 0 ? -static_cast<std::uint64_t>(m.bytes) : static_cast<std::uint64_t>(m.bytes);
  };
  if (out.size() > cap) {
    std::stable_sort(out.begin(), out.end(), [&](const StepMark& a, const StepMark& b) {
      if ((a.flags & kMarkOom) != (b.flags & kMarkOom)) return (a.flags & kMarkOom) != 0;
      return size(a) > size(b);
    });
    out.resize(cap);
  }
  std::stable_sort(out.begin(), out.end(), [](const StepMark& a, const StepMark& b) {
    return a.tid != b.tid ? a.tid < b.tid : a.t_ns < b.t_ns;
  });
  return out;
}

CommWork comm_work_of(const ProcessComm& comm) {
  CommWork w;
  for (const auto& c : comm.calls_kept) w.by_ts.push_back(&c);
  std::stable_sort(w.by_ts.begin(), w.by_ts.end(),
                   [](const CommCall* a, const CommCall* b) { return a->ts_ns < b->ts_ns; });
  return w;
}

namespace {
auto first_comm_at(const CommWork& w, std::uint64_t t) {
  return std::lower_bound(w.by_ts.begin(), w.by_ts.end(), t,
                          [](const CommCall* c, std::uint64_t v) { return c->ts_ns < v; });
}
}  // namespace

std::size_t step_comm_count(const CommWork& w, std::uint64_t begin_ns, std::uint64_t end_ns) {
  return end_ns > begin_ns ? static_cast<std::size_t>(first_comm_at(w, end_ns) - first_comm_at(w, begin_ns)) : 0;
}

std::vector<const CommCall*> step_comm_marks(const CommWork& w, std::uint64_t begin_ns, std::uint64_t end_ns,
                                             std::size_t cap) {
  std::vector<const CommCall*> out;
  if (end_ns <= begin_ns) return out;
  for (auto it = first_comm_at(w, begin_ns); it != w.by_ts.end() && (*it)->ts_ns < end_ns && out.size() < cap; ++it)
    out.push_back(*it);
  return out;
}

OpWork op_work_of(const OpsReport& ops, std::uint32_t pid) {
  OpWork w;
  for (const auto& o : ops.intervals)
    if (o.pid == pid && o.end_ns >= o.begin_ns) w.by_begin.push_back(&o);
  std::stable_sort(w.by_begin.begin(), w.by_begin.end(),
                   [](const OpInterval* a, const OpInterval* b) { return a->begin_ns < b->begin_ns; });
  return w;
}

namespace {
auto first_op_at(const OpWork& w, std::uint64_t t) {
  return std::lower_bound(w.by_begin.begin(), w.by_begin.end(), t,
                          [](const OpInterval* o, std::uint64_t v) { return o->begin_ns < v; });
}
}  // namespace

std::size_t step_op_count(const OpWork& w, std::uint64_t begin_ns, std::uint64_t end_ns) {
  return end_ns > begin_ns ? static_cast<std::size_t>(first_op_at(w, end_ns) - first_op_at(w, begin_ns)) : 0;
}

std::vector<StepSlice> step_op_slices(const OpWork& w, const std::vector<StepSlice>& actions, std::uint64_t begin_ns,
                                      std::uint64_t end_ns) {
  std::vector<StepSlice> out;
  if (end_ns <= begin_ns) return out;
  const std::uint64_t dur = end_ns - begin_ns;
  for (auto it = first_op_at(w, begin_ns); it != w.by_begin.end() && (*it)->begin_ns < end_ns; ++it) {
    const OpInterval& o = **it;
    out.push_back({o.op, o.tid, o.begin_ns - begin_ns, std::min(o.end_ns - begin_ns, dur), 0, 0});
  }
  std::stable_sort(out.begin(), out.end(), [](const StepSlice& a, const StepSlice& b) {
    return a.tid != b.tid ? a.tid < b.tid : a.begin_ns < b.begin_ns;
  });
  // `actions` are by thread, then begin (the enclosing first): one sweep
  // per thread keeps the chain of actions open at each op's begin.
  std::size_t next = 0;  // the first action not yet opened
  std::vector<const StepSlice*> open;
  std::vector<std::uint64_t> op_ends;  // the enclosing ops' (clipped) ends
  for (std::size_t k = 0; k < out.size(); ++k) {
    StepSlice& op = out[k];
    if (k == 0 || op.tid != out[k - 1].tid) {
      open.clear();
      op_ends.clear();
      while (next < actions.size() && actions[next].tid < op.tid) ++next;
    }
    while (next < actions.size() && actions[next].tid == op.tid && actions[next].begin_ns <= op.begin_ns)
      open.push_back(&actions[next++]);
    while (!open.empty() && open.back()->end_ns <= op.begin_ns) open.pop_back();
    // The first action boundary after the op's begin: the innermost open
    // action's end, or the next action's begin.
    std::uint64_t limit = open.empty() ? dur : open.back()->end_ns;
    if (next < actions.size() && actions[next].tid == op.tid) limit = std::min(limit, actions[next].begin_ns);
    op.end_ns = std::max(op.begin_ns, std::min(op.end_ns, limit));
    while (!op_ends.empty() && op_ends.back() <= op.begin_ns) op_ends.pop_back();
    // Zero-length ends do not hold the next op below them.
    op.level = static_cast<std::uint32_t>(op_ends.size());
    op.depth = (open.empty() ? 0 : open.back()->depth + 1) + op.level;
    if (op.end_ns > op.begin_ns) op_ends.push_back(op.end_ns);
  }
  return out;
}

std::vector<StepSlice> thin_ops(std::vector<StepSlice> ops, std::size_t cap) {
  if (ops.size() <= cap) return ops;
  std::stable_sort(ops.begin(), ops.end(), [](const StepSlice& a, const StepSlice& b) {
    if (a.level != b.level) return a.level < b.level;
    return a.end_ns - a.begin_ns > b.end_ns - b.begin_ns;
  });
  ops.resize(cap);
  std::stable_sort(ops.begin(), ops.end(), [](const StepSlice& a, const StepSlice& b) {
    return a.tid != b.tid ? a.tid < b.tid : a.begin_ns < b.begin_ns;
  });
  return ops;
}

}  // namespace lt
