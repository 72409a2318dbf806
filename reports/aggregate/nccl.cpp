#include "reports/aggregate/nccl.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "bpf/events.h"
#include "reports/aggregate/gpu_names.h"
#include "reports/aggregate/stacks.h"  // kNoAction
#include "user/model/record_dispatch.h"

namespace lt {

namespace {

// Bounds per process: the calls and launches kept for the join (a call past
// them is still counted, but not timed).
constexpr std::size_t kMaxCalls = 1u << 20;
constexpr std::size_t kMaxLaunches = 1u << 20;
// Distinct rows (sizes, actions) and threads per process: past them a call
// is counted in the totals only.
constexpr std::size_t kMaxRows = 4096;
constexpr std::size_t kMaxThreads = 1u << 16;

}  // namespace

std::string nccl_fn_name(std::uint8_t fn) {
  static const char* const names[LT_NCCL_FN_MAX] = {"?",
                                                    "ncclAllReduce",
                                                    "ncclBroadcast",
                                                    "ncclBcast",
                                                    "ncclReduce",
                                                    "ncclAllGather",
                                                    "ncclReduceScatter",
                                                    "ncclAlltoAll",
                                                    "ncclGather",
                                                    "ncclScatter",
                                                    "ncclSend",
                                                    "ncclRecv",
                                                    "ncclGroupStart",
                                                    "ncclGroupEnd",
                                                    "ncclCommInitRank",
                                                    "ncclCommDestroy",
                                                    "(communicator ready)"};
  return fn < LT_NCCL_FN_MAX ? names[fn] : "nccl fn " + std::to_string(fn);
}

std::string nccl_dtype_name(int dtype) {
  static const char* const names[] = {"int8",    "uint8",   "int32",   "uint32",   "int64",  "uint64",
                                      "float16", "float32", "float64", "bfloat16", "f8e4m3", "f8e5m2"};
  return dtype >= 0 && dtype < 12 ? names[dtype] : "type " + std::to_string(dtype);
}

std::size_t nccl_dtype_size(int dtype) {
  static const std::size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return dtype >= 0 && dtype < 12 ? sizes[dtype] : 0;
}

std::string nccl_op_name(std::uint32_t op) {
  static const char* const names[] = {"sum", "prod", "max", "min", "avg"};
  return op < 5 ? names[op] : "custom";
}

bool nccl_fn_moves_data(std::uint8_t fn) {
  return fn >= LT_NCCL_ALLREDUCE && fn <= LT_NCCL_RECV;
}

struct NcclAggregator::State {
  const ActionAggregator& actions;
  GpuNameTable names;

  // Every NCCL record of a thread is a boundary of the launch windows; the
  // records are kept in stream order (each thread's in its own time order).
  struct Call {
    std::uint64_t count = 0, comm = 0;
    std::uint32_t action = 0;
    std::uint32_t group = 0;  // data calls in a group, and the group's closing end: its id (from 1); else 0
    std::uint8_t fn = 0;
    int dtype = -1;
    int nranks = -1;            // the communicator's size when the call was made
    bool closes_group = false;  // the ncclGroupEnd that closed `group`
  };
  // The kernels of one record's window: first start, last end.
  struct Span {
    std::uint64_t begin = ~0ull, end = 0, kernels = 0;
  };
  struct Thread {
    int depth = 0;
    std::uint32_t group = 0;
    std::int64_t open = -1;  // index of the thread's latest record (its window is open), -1 none
    lt_nccl_event last{};    // the thread's previous record
  };
  struct Proc {
    std::vector<Call> calls;
    std::vector<Span> spans;                                   // per call
    std::unordered_map<std::uint32_t, std::uint32_t> pending;  // correlation id -> call index, until its kernel comes
    std::unordered_map<std::uint32_t, Thread> threads;         // threads that made NCCL calls
    // Communicators in order of first use; a destroyed one keeps its row
    // (and its size), and a later one at the same address gets a new row.
    std::vector<NcclComm> comms;
    std::map<std::uint64_t, std::size_t> live_comms;  // handle -> its row in comms
    std::vector<std::string> action_names;
    std::map<std::string, std::uint32_t> action_index;
    std::set<std::uint32_t> simulated;  // groups closed by ncclGroupSimulateEnd
    std::uint32_t groups = 0;
    std::uint64_t unbounded = 0, launches_dropped = 0;
    bool cupti = false;
  };
  std::map<std::uint32_t, Proc> procs;

  explicit State(const ActionAggregator& a) : actions(a) {}

  std::uint32_t action_of(Proc& p, const lt_event_header& h) {
    std::string a = actions.innermost_action(h.pid, h.tid);
    if (a.empty()) a = actions.innermost_action(h.pid, h.pid);
    if (a.empty()) a = kNoAction;
    auto [it, fresh] = p.action_index.try_emplace(a, static_cast<std::uint32_t>(p.action_names.size()));
    if (fresh) p.action_names.push_back(a);
    return it->second;
  }

  NcclComm& comm(Proc& p, std::uint64_t handle) {
    // Bounded: live communicators, and rows of destroyed ones kept for the report.
    if ((p.live_comms.size() >= kMaxRows || p.comms.size() >= 4 * kMaxRows) && !p.live_comms.count(handle))
      handle = ~0ull;  // "other communicators"
    auto [it, fresh] = p.live_comms.try_emplace(handle, p.comms.size());
    if (fresh) p.comms.push_back(NcclComm{.handle = handle});
    return p.comms[it->second];
  }

  void on_nccl(const lt_event_header& h, const lt_nccl_event& e) {
    Proc& p = procs[h.pid];
    if (p.threads.size() >= kMaxThreads && !p.threads.count(h.tid)) {
      if (nccl_fn_moves_data(e.fn)) p.unbounded++;
      return;
    }
    Thread& t = p.threads[h.tid];
    if (e.fn == LT_NCCL_COMM_READY) {  // sent by BPF at another entry, whose own record follows
      NcclComm& m = comm(p, e.comm);
      m.nranks = e.nranks;
      m.rank = e.rank;
      return;
    }
    // ncclBcast(buff, ...) is ncclBroadcast(buff, buff, ...) inside NCCL,
    // through the exported symbol: the probe there sees the same call again.
    const bool inner = e.fn == LT_NCCL_BROADCAST && t.last.fn == LT_NCCL_BCAST && t.last.count == e.count &&
                       t.last.dtype == e.dtype && t.last.peer == e.peer && t.last.comm == e.comm;
    t.last = e;
    if (inner) {
      t.last.fn = 0;
      return;
    }
    Call c;
    c.fn = e.fn;
    c.count = e.count;
    c.comm = e.comm;
    c.dtype = e.dtype;
    switch (e.fn) {
      case LT_NCCL_GROUP_START:
        if (t.depth++ == 0) t.group = ++p.groups;
        break;
      case LT_NCCL_GROUP_END:
      case LT_NCCL_GROUP_SIMULATE_END:
        if (t.depth > 0 && --t.depth == 0) {
          c.group = t.group;
          c.closes_group = true;
          if (e.fn == LT_NCCL_GROUP_SIMULATE_END) p.simulated.insert(t.group);
        }
        break;
      case LT_NCCL_COMM_DESTROY:
        // a later communicator may get the same address: it gets a row of its own
        if (auto it = p.live_comms.find(e.comm); it != p.live_comms.end() && e.comm != ~0ull) {
          p.comms[it->second].destroyed = true;
          p.live_comms.erase(it);
        }
        break;
      default:
        if (nccl_fn_moves_data(e.fn)) {
          c.group = t.depth > 0 ? t.group : 0;
          NcclComm& m = comm(p, e.comm);
          m.calls++;
          c.nranks = m.nranks;
        }
        break;
    }
    c.action = action_of(p, h);
    if (p.calls.size() >= kMaxCalls) {
      if (nccl_fn_moves_data(e.fn)) p.unbounded++;
      t.open = -1;  // later launches of the thread belong to no kept call
      return;
    }
    t.open = static_cast<std::int64_t>(p.calls.size());
    p.calls.push_back(c);
    p.spans.emplace_back();
  }

  // A launch belongs to the thread's latest NCCL record (the records and
  // the launches of one thread come in its own order): kept until its
  // kernel record comes, ~100 ms later.
  void on_launch(const lt_event_header& h, const lt_gpu_launch_event& e) {
    auto it = procs.find(h.pid);
    if (it == procs.end() || e.source != LT_LAUNCH_CUPTI || !e.correlation || LT_API_OF(e.api) != LT_API_LAUNCH) return;
    Proc& p = it->second;
    p.cupti = true;
    auto t = p.threads.find(h.tid);
    if (t == p.threads.end() || t->second.open < 0) return;
    if (p.pending.size() >= kMaxLaunches) {
      p.launches_dropped++;
      return;
    }
    p.pending[e.correlation] = static_cast<std::uint32_t>(t->second.open);
  }

  void on_activity(const lt_event_header& h, const lt_gpu_activity& a) {
    auto it = procs.find(h.pid);
    if (it == procs.end() || a.kind != LT_GPU_KERNEL) return;
    Proc& p = it->second;
    auto l = p.pending.find(a.correlation);
    if (l == p.pending.end()) return;
    const std::uint32_t idx = l->second;
    p.pending.erase(l);
    if (!nccl_kernel(h.pid, a.name_id)) return;  // the thread's own kernels after the call
    Span& s = p.spans[idx];
    s.begin = std::min(s.begin, a.start_ns);
    s.end = std::max(s.end, a.end_ns);
    s.kernels++;
  }

  bool nccl_kernel(std::uint32_t pid, std::uint32_t name_id) const {
    const std::string* n = names.find(pid, LT_NAME_KERNEL, name_id);
    return n && n->starts_with("nccl");
  }

  ProcessNccl finish_one(std::uint32_t pid, Proc& p) {
    ProcessNccl out;
    out.pid = pid;
    out.cupti = p.cupti;
    out.unbounded = p.unbounded;
    out.launches_dropped = p.launches_dropped;
    std::map<std::tuple<std::uint8_t, std::uint64_t, int, std::uint64_t, int>, NcclSizeRow> sizes;
    std::map<std::pair<std::uint32_t, std::uint8_t>, NcclActionRow> acts;
    struct Group {
      std::map<std::uint8_t, std::uint64_t> fns;
      std::uint64_t gpu_ns = 0;
      bool timed = false;
    };
    std::map<std::uint32_t, Group> groups;
    for (std::size_t i = 0; i < p.calls.size(); ++i) {
      const Call& c = p.calls[i];
      const Span& s = p.spans[i];
      out.kernels += s.kernels;
      const std::uint64_t gpu = s.kernels && s.end > s.begin ? s.end - s.begin : 0;
      if (c.group && p.simulated.count(c.group)) {
        if (nccl_fn_moves_data(c.fn)) out.simulated++;
        continue;
      }
      if (c.closes_group) {
        Group& g = groups[c.group];
        g.timed = s.kernels > 0;
        g.gpu_ns = gpu;
        continue;
      }
      if (!nccl_fn_moves_data(c.fn)) continue;
      const std::uint64_t bytes = c.count * nccl_dtype_size(c.dtype);
      out.calls++;
      out.bytes += bytes;
      const std::tuple<std::uint8_t, std::uint64_t, int, std::uint64_t, int> key{c.fn, bytes, c.dtype, c.count,
                                                                                 c.nranks};
      const std::pair<std::uint32_t, std::uint8_t> akey{c.action, c.fn};
      if ((sizes.size() >= kMaxRows && !sizes.count(key)) || (acts.size() >= kMaxRows && !acts.count(akey))) {
        out.rows_dropped++;
        continue;
      }
      NcclSizeRow& r = sizes[key];
      r.fn = c.fn;
      r.dtype = c.dtype;
      r.count = c.count;
      r.bytes = bytes;
      r.nranks = c.nranks;
      r.calls++;
      NcclActionRow& a = acts[akey];
      a.action = p.action_names[c.action];
      a.fn = c.fn;
      a.calls++;
      a.bytes += bytes;
      if (c.group) {
        r.grouped++;
        groups[c.group].fns[c.fn]++;
      } else if (s.kernels) {
        r.timed++;
        r.gpu_ns += gpu;
        a.timed++;
        a.gpu_ns += gpu;
      }
    }
    for (auto& [k, r] : sizes) out.sizes.push_back(r);
    for (auto& [k, a] : acts) out.actions.push_back(a);
    std::sort(out.actions.begin(), out.actions.end(), [](const NcclActionRow& a, const NcclActionRow& b) {
      return a.calls != b.calls ? a.calls > b.calls : a.action < b.action;
    });
    std::map<std::string, NcclGroupRow> shapes;
    for (auto& [id, g] : groups) {
      if (g.fns.empty()) continue;  // a group with no data call (or opened before the attach)
      std::string shape;
      for (auto& [fn, n] : g.fns) shape += (shape.empty() ? "" : ", ") + nccl_fn_name(fn) + " x" + std::to_string(n);
      NcclGroupRow& row = shapes[shape];
      row.calls = shape;
      row.groups++;
      if (g.timed) {
        row.timed++;
        row.gpu_ns += g.gpu_ns;
      }
    }
    for (auto& [k, row] : shapes) out.groups.push_back(row);
    out.comms = p.comms;
    return out;
  }
};

NcclAggregator::NcclAggregator(const ActionAggregator& actions) : s_(std::make_unique<State>(actions)) {}
NcclAggregator::~NcclAggregator() = default;

void NcclAggregator::add(const lt_event_header& h, const std::byte* record) {
  auto& s = *s_;
  visit_record(h, record,
               overloaded{[&](const lt_event_header& h, const lt_nccl_event& e) { s.on_nccl(h, e); },
                          [&](const lt_event_header& h, const lt_gpu_name_event& e) {
                            if (e.n.kind == LT_NAME_KERNEL) s.names.add(h.pid, e.n);
                          },
                          [&](const lt_event_header& h, const lt_gpu_launch_event& e) { s.on_launch(h, e); },
                          [&](const lt_event_header& h, const lt_gpu_activity_event& e) { s.on_activity(h, e.a); }});
}

NcclReport NcclAggregator::finish() {
  NcclReport rep;
  for (auto& [pid, p] : s_->procs) {
    ProcessNccl one = s_->finish_one(pid, p);
    if (one.calls || !one.comms.empty()) rep.processes.push_back(std::move(one));
  }
  return rep;
}

}  // namespace lt
