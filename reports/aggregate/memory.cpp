#include "reports/aggregate/memory.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <unordered_map>

#include "reports/aggregate/py_symbols.h"
#include "reports/aggregate/stacks.h"  // kNoAction
#include "user/model/record_dispatch.h"

namespace lt {

std::string mem_device_name(MemDevice d) {
  if (d.type == 0) return "CPU";
  if (d.type == 1) return "CUDA " + std::to_string(d.index);
  return "device type " + std::to_string(d.type) + " index " + std::to_string(d.index);
}

namespace {

constexpr std::size_t kMaxOoms = 1000;
constexpr std::uint32_t kNoOp = UINT32_MAX;           // no op running
constexpr std::uint32_t kUnknownOp = UINT32_MAX - 1;  // ops not traced, or their records lost

// Live bytes over time, at most `cap` points: each bucket keeps its maximum,
// and when the points overflow, buckets double in width and pairs merge.
struct TimelineBuilder {
  std::uint64_t t0 = 0, width = 1000;  // ns
  std::vector<MemTimelinePoint> points;
  void add(std::uint64_t ts, std::int64_t live, std::uint64_t reserved, std::size_t cap) {
    if (points.empty()) t0 = ts;
    const std::uint64_t at = t0 + (ts > t0 ? (ts - t0) / width * width : 0);
    if (!points.empty() && points.back().ts_ns >= at) {
      points.back().live = std::max(points.back().live, live);
      points.back().reserved = std::max(points.back().reserved, reserved);
    } else {
      points.push_back({at, live, reserved});
    }
    while (points.size() > cap) {
      width *= 2;
      std::vector<MemTimelinePoint> merged;
      merged.reserve(points.size() / 2 + 1);
      for (const auto& p : points) {
        const std::uint64_t b = t0 + (p.ts_ns - t0) / width * width;
        if (!merged.empty() && merged.back().ts_ns == b) {
          merged.back().live = std::max(merged.back().live, p.live);
          merged.back().reserved = std::max(merged.back().reserved, p.reserved);
        } else {
          merged.push_back({b, p.live, p.reserved});
        }
      }
      points = std::move(merged);
    }
  }
};

struct DeviceState {
  MemDeviceSummary sum;
  std::int64_t our_live = 0;  // allocated - freed since the attach (known sizes)
  TimelineBuilder timeline;
  struct Live {
    std::uint64_t bytes, ts;
    std::uint32_t site;
    std::uint32_t tid = 0;
    std::uint16_t joined_depth = 0;  // the op observer's call it was joined to by time (0: none)
  };
  std::unordered_map<std::uint64_t, Live> live;  // by pointer
};

struct Site {
  std::uint32_t op = kNoOp;
  std::vector<StackFrame> stack;
  std::string raw;  // its frames as recorded: the key, with op, of site_index
};

// An allocation or OOM of the op observer's process, to be named by the
// innermost op call around it on its thread (OP_SPAN records come when the
// call ends: after the allocations in it).
struct Join {
  MemDevice device;
  std::uint64_t ptr = 0;
  std::size_t oom = SIZE_MAX;  // index into ooms, or SIZE_MAX for an allocation
};

// The allocation or OOM whose MEM_STACK comes next on a thread.
struct Pending {
  MemDevice device;
  std::uint64_t ptr = 0;
  std::size_t oom = SIZE_MAX;  // index into ooms, or SIZE_MAX for an allocation
  std::uint32_t op = kNoOp;
};

struct Proc {
  ProcessMemory out;
  std::map<MemDevice, DeviceState> devices;
  std::unordered_map<std::uint32_t, Pending> pending;  // tid -> awaiting its stack
  std::vector<Site> sites;
  std::map<std::pair<std::uint32_t, std::string>, std::uint32_t> site_index;  // (op, raw frames) -> site
  std::map<std::pair<std::string, MemDevice>, MemActionRow> actions;
  std::size_t live_entries = 0;
  // tid -> (ts -> what awaits its op): live allocations (dropped at their
  // free) and OOMs; bounded by the live map's cap and kMaxOoms.
  std::unordered_map<std::uint32_t, std::multimap<std::uint64_t, Join>> joins;
  std::vector<std::uint16_t> oom_depth;  // per ooms entry: the depth of the call it was joined to
};

}  // namespace

struct MemoryAggregator::State {
  const ActionAggregator& actions;
  MemoryOptions opts;
  PySymbols symbols;
  std::vector<std::string> op_names;  // op index -> name (OP_NAME)
  std::map<std::uint32_t, Proc> procs;
  // (pid, tid) -> the aten ops running, outermost first: kept for every
  // thread that enters ops, since its first allocation may come later.
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> ops;
  static std::uint64_t thread_key(std::uint32_t pid, std::uint32_t tid) { return std::uint64_t{pid} << 32 | tid; }
  std::vector<std::uint32_t> order;
  std::size_t events = 0;

  State(const ActionAggregator& a, MemoryOptions o) : actions(a), opts(o) {}

  Proc& proc(std::uint32_t pid) {
    auto [it, fresh] = procs.try_emplace(pid);
    if (fresh) {
      it->second.out.pid = pid;
      order.push_back(pid);
    }
    return it->second;
  }

  std::string op_name(std::uint32_t op) const {
    if (op == kNoOp) return "";
    if (op == kUnknownOp) return "[op unknown]";
    return op < op_names.size() && !op_names[op].empty() ? op_names[op] : "op#" + std::to_string(op);
  }

  // The site of an allocation: its op and (raw) stack, interned; past the
  // cap, one site for the rest.
  std::uint32_t site_of(Proc& p, std::uint32_t op, std::string raw, const lt_py_sample_event* stack) {
    auto key = std::make_pair(op, std::move(raw));
    if (auto it = p.site_index.find(key); it != p.site_index.end()) return it->second;
    if (p.sites.size() >= opts.max_sites) {
      auto [it, fresh] = p.site_index.try_emplace({kUnknownOp, "[other sites]"}, p.sites.size());
      if (fresh) p.sites.push_back({kUnknownOp, {{"[other allocation sites]", "", 0, 0, false}}});
      return it->second;
    }
    const auto id = static_cast<std::uint32_t>(p.sites.size());
    p.sites.push_back({op, stack ? symbols.frames(*stack) : std::vector<StackFrame>{}, key.second});
    p.site_index.emplace(std::move(key), id);
    return id;
  }

  // The same stack with another op (a time join named it).
  std::uint32_t with_op(Proc& p, std::uint32_t site, std::uint32_t op) {
    const Site& old = p.sites[site];
    if (old.op == op) return site;
    auto key = std::make_pair(op, old.raw);
    if (auto it = p.site_index.find(key); it != p.site_index.end()) return it->second;
    if (p.sites.size() >= opts.max_sites) return site;
    const auto id = static_cast<std::uint32_t>(p.sites.size());
    p.sites.push_back({op, old.stack, old.raw});
    p.site_index.emplace(std::move(key), id);
    return id;
  }

  // An op call the op observer measured: the allocations and OOMs on its
  // thread within it are named by it, unless a deeper call holds them.
  void span(const lt_event_header& h, const lt_op_span_event& e) {
    if (e.flags & (LT_OP_SPAN_HIDDEN | LT_OP_SPAN_WATERMARK | LT_OP_SPAN_USER) || !e.depth) return;
    auto pit = procs.find(h.pid);
    if (pit == procs.end()) return;
    Proc& p = pit->second;
    auto jt = p.joins.find(h.tid);
    if (jt == p.joins.end()) return;
    for (auto it = jt->second.lower_bound(h.ts_ns); it != jt->second.end() && it->first <= e.end_ns; ++it) {
      const Join& j = it->second;
      if (j.oom != SIZE_MAX) {
        if (e.depth <= p.oom_depth[j.oom]) continue;
        p.oom_depth[j.oom] = e.depth;
        p.out.ooms[j.oom].op = op_name(e.op);
        continue;
      }
      auto d = p.devices.find(j.device);
      if (d == p.devices.end()) continue;
      auto live = d->second.live.find(j.ptr);
      if (live == d->second.live.end() || live->second.ts != it->first || e.depth <= live->second.joined_depth)
        continue;
      live->second.joined_depth = e.depth;
      live->second.site = with_op(p, live->second.site, e.op);
    }
  }

  void unjoin(Proc& p, std::uint32_t tid, std::uint64_t ts, std::uint64_t ptr) {
    auto jt = p.joins.find(tid);
    if (jt == p.joins.end()) return;
    auto [b, e] = jt->second.equal_range(ts);
    for (auto it = b; it != e; ++it)
      if (it->second.oom == SIZE_MAX && it->second.ptr == ptr) {
        jt->second.erase(it);
        break;
      }
    if (jt->second.empty()) p.joins.erase(jt);
  }

  // The innermost op of a thread at an allocator event `depth` ops deep.
  std::uint32_t op_at(std::uint32_t pid, std::uint32_t tid, const lt_mem_event& e) {
    if (!(e.flags & LT_MEM_OPS_KNOWN)) return kUnknownOp;
    auto& st = ops[thread_key(pid, tid)];
    if (st.size() > e.depth) st.resize(e.depth);
    if (e.depth == 0) return kNoOp;
    return st.size() == e.depth ? st.back() : kUnknownOp;
  }

  std::string action_at(std::uint32_t pid, std::uint32_t tid) const {
    std::string a = actions.innermost_action(pid, tid);
    if (a.empty() && tid != pid) a = actions.innermost_action(pid, pid);
    return a.empty() ? kNoAction : a;
  }

  void mem(const lt_event_header& h, const lt_mem_event& e) {
    Proc& p = proc(h.pid);
    const MemDevice dev{e.device_type, e.device_index};
    DeviceState& d = p.devices[dev];
    d.sum.device = dev;
    const std::uint32_t op = op_at(h.pid, h.tid, e);
    const std::string action = action_at(h.pid, h.tid);
    MemActionRow& row = p.actions[{action, dev}];
    row.action = action;
    row.device = dev;
    const bool totals = e.flags & LT_MEM_TOTALS_KNOWN;
    d.sum.totals_known = totals;
    p.pending.erase(h.tid);  // a stack that never came (lost) must not join a later event
    std::int64_t signed_bytes = 0;
    switch (e.what) {
      case LT_MEM_ALLOC: {
        const std::uint64_t bytes = e.bytes > 0 ? static_cast<std::uint64_t>(e.bytes) : 0;
        signed_bytes = static_cast<std::int64_t>(bytes);
        ++d.sum.allocs;
        d.sum.alloc_bytes += bytes;
        ++row.allocs;
        row.alloc_bytes += bytes;
        d.our_live += signed_bytes;
        const std::uint32_t site = site_of(p, op, "", nullptr);
        auto [it, fresh] = d.live.try_emplace(e.ptr);
        if (fresh && p.live_entries >= opts.max_live) {
          d.live.erase(it);
          ++p.out.untracked;
        } else {
          p.live_entries += fresh;
          if (!fresh) unjoin(p, it->second.tid, it->second.ts, e.ptr);  // its free was not seen
          it->second = {bytes, h.ts_ns, site, h.tid, 0};
          if (e.flags & LT_MEM_HAS_STACK) p.pending[h.tid] = {dev, e.ptr, SIZE_MAX, op};
          if (!(e.flags & LT_MEM_OPS_KNOWN)) p.joins[h.tid].emplace(h.ts_ns, Join{dev, e.ptr, SIZE_MAX});
        }
        break;
      }
      case LT_MEM_FREE: {
        std::uint64_t bytes = e.bytes < 0 ? static_cast<std::uint64_t>(-(e.bytes + 1)) + 1 : 0;
        if (auto it = d.live.find(e.ptr); it != d.live.end()) {
          if (!bytes) bytes = it->second.bytes;
          unjoin(p, it->second.tid, it->second.ts, e.ptr);
          d.live.erase(it);
          --p.live_entries;
        }
        if (bytes) {
          ++d.sum.frees;
          d.sum.freed_bytes += bytes;
          ++row.frees;
          row.freed_bytes += bytes;
          d.our_live -= static_cast<std::int64_t>(bytes);
          signed_bytes = -static_cast<std::int64_t>(bytes);
        } else {
          ++d.sum.frees_unknown;
          ++row.frees_unknown;
        }
        break;
      }
      case LT_MEM_OOM: {
        ++d.sum.ooms;
        ++p.out.ooms_total;
        if (p.out.ooms.size() < kMaxOoms) {
          p.out.ooms.push_back({h.ts_ns,
                                h.tid,
                                dev,
                                static_cast<std::uint64_t>(std::max<std::int64_t>(e.bytes, 0)),
                                action,
                                op_name(op),
                                {}});
          if (e.flags & LT_MEM_HAS_STACK) p.pending[h.tid] = {dev, 0, p.out.ooms.size() - 1, op};
          p.oom_depth.push_back(0);
          if (!(e.flags & LT_MEM_OPS_KNOWN)) p.joins[h.tid].emplace(h.ts_ns, Join{dev, 0, p.out.ooms.size() - 1});
        }
        break;
      }
      default:
        return;
    }
    const std::int64_t live = totals ? static_cast<std::int64_t>(e.total_allocated) : d.our_live;
    const std::uint64_t reserved = totals ? e.total_reserved : 0;
    d.sum.live = live;
    d.sum.reserved = reserved;
    const std::uint64_t live_u = live > 0 ? static_cast<std::uint64_t>(live) : 0;
    d.sum.peak_live = std::max(d.sum.peak_live, live_u);
    d.sum.peak_reserved = std::max(d.sum.peak_reserved, reserved);
    if (e.what == LT_MEM_ALLOC) {
      row.peak_live = std::max(row.peak_live, live_u);
      row.peak_reserved = std::max(row.peak_reserved, reserved);
    }
    if (opts.keep_events) {
      if (events < opts.max_events) {
        ++events;
        p.out.events.push_back({h.ts_ns, e.ptr, h.tid, dev, e.what == LT_MEM_OOM,
                                e.what == LT_MEM_OOM ? static_cast<std::int64_t>(e.bytes) : signed_bytes, live,
                                reserved});
      } else {
        ++p.out.events_dropped;
      }
      d.timeline.add(h.ts_ns, live, reserved, opts.timeline_points);
    }
  }

  void stack(const lt_event_header& h, const lt_py_sample_event& e) {
    auto pit = procs.find(h.pid);
    if (pit == procs.end()) return;
    Proc& p = pit->second;
    auto it = p.pending.find(h.tid);
    if (it == p.pending.end()) return;  // its MEM was lost, or it had none
    const Pending pend = it->second;
    p.pending.erase(it);
    p.out.stacks = true;
    const unsigned nops = std::min<unsigned>(e.nops, LT_OPS_DEPTH);
    const std::uint32_t op = nops ? e.ops[nops - 1] : pend.op;
    if (pend.oom != SIZE_MAX) {
      auto& o = p.out.ooms[pend.oom];
      if (!p.oom_depth[pend.oom]) o.op = op_name(op);  // else named by its call already
      o.stack = symbols.frames(e);
      return;
    }
    auto d = p.devices.find(pend.device);
    if (d == p.devices.end()) return;
    auto live = d->second.live.find(pend.ptr);
    if (live == d->second.live.end()) return;
    const unsigned n = std::min<unsigned>(e.nframes, LT_STACK_MAX);
    std::string raw(reinterpret_cast<const char*>(e.frames), n * sizeof(lt_py_frame));
    raw.append(reinterpret_cast<const char*>(&e.flags), sizeof e.flags);
    const std::uint32_t joined = live->second.joined_depth ? p.sites[live->second.site].op : op;
    live->second.site = site_of(p, joined, std::move(raw), &e);
  }
};

MemoryAggregator::MemoryAggregator(const ActionAggregator& actions, MemoryOptions opts)
    : s_(std::make_unique<State>(actions, opts)) {}
MemoryAggregator::~MemoryAggregator() = default;

void MemoryAggregator::add(const lt_event_header& h, const std::byte* p) {
  auto& s = *s_;
  s.symbols.add(h, p);  // it picks out the kinds that name code objects
  auto on_op = [&](const lt_event_header& h, std::uint32_t op, std::uint16_t depth) {
    if (depth == 0) return;  // deeper than BPF tracks
    auto& st = s.ops[State::thread_key(h.pid, h.tid)];
    if (st.size() >= depth) st.resize(depth - 1u);
    if (st.size() + 1 == depth) st.push_back(op);
  };
  visit_record(h, p,
               overloaded{[&](const lt_event_header&, const lt_op_name_event& e) {
                            if (e.op > 1'000'000) return;  // libtorch has ~3000 ops: a damaged record
                            if (s.op_names.size() <= e.op) s.op_names.resize(e.op + 1);
                            s.op_names[e.op].assign(e.name, strnlen(e.name, sizeof e.name));
                          },
                          [&](const lt_event_header& h, const lt_op_event& e) { on_op(h, e.op, e.depth); },
                          [&](const lt_event_header& h, const lt_op_shapes_event& e) { on_op(h, e.op, e.depth); },
                          [&](const lt_event_header& h, const lt_mem_event& e) { s.mem(h, e); },
                          [&](const lt_event_header& h, const lt_op_span_event& e) { s.span(h, e); },
                          [&](const lt_event_header& h, const lt_py_sample_event& e) {
                            if (h.kind == LT_EV_MEM_STACK) s.stack(h, e);
                          },
                          // A new program: the old one's memory is gone with it.
                          [&](const lt_event_header& h, const lt_proc_event& e) {
                            if (h.kind != LT_EV_PROC_EXEC) return;
                            if (auto it = s.procs.find(e.child_pid); it != s.procs.end()) {
                              for (auto& [dev, d] : it->second.devices) d.live.clear();
                              it->second.live_entries = 0;
                              it->second.pending.clear();
                              it->second.joins.clear();
                            }
                          }});
}

void MemoryAggregator::gap() {
  for (auto& [pid, p] : s_->procs) p.pending.clear();
  s_->ops.clear();
}

MemoryReport MemoryAggregator::finish() {
  auto& s = *s_;
  MemoryReport rep;
  for (auto pid : s.order) {
    Proc& p = s.procs[pid];
    ProcessMemory& out = p.out;
    // Leaks: what is still alive, by (device, site).
    std::map<std::pair<MemDevice, std::uint32_t>, MemLeakRow> groups;
    for (auto& [dev, d] : p.devices) {
      out.devices.push_back(d.sum);
      for (auto& [ptr, a] : d.live) {
        auto& g = groups[{dev, a.site}];
        if (!g.count || a.ts < g.first_ns) g.first_ns = a.ts;
        g.device = dev;
        g.bytes += a.bytes;
        ++g.count;
      }
      if (s.opts.keep_events) out.timelines.push_back({dev, std::move(d.timeline.points)});
    }
    for (auto& [key, g] : groups) {
      const Site& site = p.sites[key.second];
      g.op = s.op_name(site.op);
      g.stack = site.stack;
      out.leak_bytes += g.bytes;
      out.leak_count += g.count;
      out.leaks.push_back(std::move(g));
    }
    std::stable_sort(out.leaks.begin(), out.leaks.end(), [](const MemLeakRow& a, const MemLeakRow& b) {
      return a.bytes != b.bytes ? a.bytes > b.bytes : a.count > b.count;
    });
    // Actions: as they first began, then those begun before the attach by
    // name, kNoAction last; each by device.
    auto emit = [&](const std::string& name) {
      for (auto it = p.actions.lower_bound({name, MemDevice{0, INT8_MIN}});
           it != p.actions.end() && it->first.first == name;) {
        out.actions.push_back(std::move(it->second));
        it = p.actions.erase(it);
      }
    };
    for (const auto& n : s.actions.begin_order(pid))
      if (n != kNoAction) emit(n);
    std::vector<std::string> rest;
    for (auto& [k, row] : p.actions)
      if (k.first != kNoAction && (rest.empty() || rest.back() != k.first)) rest.push_back(k.first);
    for (auto& n : rest) emit(n);
    emit(kNoAction);
    rep.processes.push_back(std::move(out));
  }
  return rep;
}

}  // namespace lt
