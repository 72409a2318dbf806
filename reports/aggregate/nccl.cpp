#include "reports/aggregate/nccl.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "bpf/events.h"
#include "reports/aggregate/gpu_names.h"
#include "reports/aggregate/stacks.h"  // kNoAction

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

template <typename T>
bool read_record(const lt_event_header& h, const std::byte* record, T& out) {
  if (h.size < sizeof(T)) return false;
  std::memcpy(&out, record, sizeof out);
  return true;
}

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

  // Every NCCL record of a thread is a boundary of the launch windows.
  struct Call {
    std::uint64_t ts = 0, count = 0, comm = 0;
    std::uint32_t tid = 0, action = 0;
    std::uint32_t group = 0;  // data calls in a group, and the group's closing end: its id (from 1); else 0
    std::uint8_t fn = 0;
    int dtype = -1;
    bool closes_group = false;  // the ncclGroupEnd that closed `group`
  };
  struct Launch {
    std::uint64_t ts;
    std::uint32_t tid, correlation;
  };
  struct Kernel {
    std::uint64_t start, end;
    std::uint32_t name_id;
  };
  struct Thread {
    int depth = 0;
    std::uint32_t group = 0;
    lt_nccl_event last{};  // the thread's previous record
  };
  struct Proc {
    std::vector<Call> calls;
    std::vector<Launch> launches;
    std::unordered_set<std::uint32_t> wanted;  // correlation ids of the kept launches
    std::unordered_map<std::uint32_t, Kernel> kernels;
    std::unordered_map<std::uint32_t, Thread> threads;  // threads that made NCCL calls
    std::map<std::uint64_t, NcclComm> comms;
    std::vector<std::uint64_t> comm_order;
    std::vector<std::string> action_names;
    std::map<std::string, std::uint32_t> action_index;
    std::uint32_t groups = 0;
    std::uint64_t unbounded = 0;
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
    if (p.comms.size() >= kMaxRows && !p.comms.count(handle)) handle = ~0ull;  // "other communicators"
    auto [it, fresh] = p.comms.try_emplace(handle);
    if (fresh) {
      it->second.handle = handle;
      p.comm_order.push_back(handle);
    }
    return it->second;
  }

  void on_nccl(const lt_event_header& h, const lt_nccl_event& e) {
    Proc& p = procs[h.pid];
    if (p.threads.size() >= kMaxThreads && !p.threads.count(h.tid)) {
      if (nccl_fn_moves_data(e.fn)) p.unbounded++;
      return;
    }
    Thread& t = p.threads[h.tid];
    // ncclBcast(buff, ...) is ncclBroadcast(buff, buff, ...) inside NCCL,
    // through the exported symbol: the probe there sees the same call again.
    const bool inner = e.fn == LT_NCCL_BROADCAST && t.last.fn == LT_NCCL_BCAST && t.last.count == e.count &&
                       t.last.dtype == e.dtype && t.last.peer == e.peer && t.last.comm == e.comm;
    if (e.fn != LT_NCCL_COMM_READY) t.last = e;
    if (inner) {
      t.last.fn = 0;
      return;
    }
    Call c;
    c.ts = h.ts_ns;
    c.tid = h.tid;
    c.fn = e.fn;
    c.count = e.count;
    c.comm = e.comm;
    c.dtype = e.dtype;
    switch (e.fn) {
      case LT_NCCL_GROUP_START:
        if (t.depth++ == 0) t.group = ++p.groups;
        break;
      case LT_NCCL_GROUP_END:
        if (t.depth > 0 && --t.depth == 0) {
          c.group = t.group;
          c.closes_group = true;
        }
        break;
      case LT_NCCL_COMM_READY: {
        NcclComm& m = comm(p, e.comm);
        m.nranks = e.nranks;
        m.rank = e.rank;
        break;
      }
      default:
        if (nccl_fn_moves_data(e.fn)) {
          c.group = t.depth > 0 ? t.group : 0;
          comm(p, e.comm).calls++;
        }
        break;
    }
    if (e.fn == LT_NCCL_COMM_READY) return;  // sent by BPF at another entry, which has its own record
    c.action = action_of(p, h);
    if (p.calls.size() >= kMaxCalls) {
      if (nccl_fn_moves_data(e.fn)) p.unbounded++;
      return;
    }
    p.calls.push_back(c);
  }

  void on_launch(const lt_event_header& h, const lt_gpu_launch_event& e) {
    auto it = procs.find(h.pid);
    if (it == procs.end() || e.source != LT_LAUNCH_CUPTI || !e.correlation || e.api != LT_API_LAUNCH) return;
    Proc& p = it->second;
    p.cupti = true;
    if (!p.threads.count(h.tid) || p.launches.size() >= kMaxLaunches) return;
    p.launches.push_back({h.ts_ns, h.tid, e.correlation});
    p.wanted.insert(e.correlation);
  }

  void on_activity(const lt_event_header& h, const lt_gpu_activity& a) {
    auto it = procs.find(h.pid);
    if (it == procs.end() || a.kind != LT_GPU_KERNEL || !it->second.wanted.count(a.correlation)) return;
    it->second.kernels.try_emplace(a.correlation, Kernel{a.start_ns, a.end_ns, a.name_id});
  }

  bool nccl_kernel(std::uint32_t pid, const Kernel& k) const {
    const std::string* n = names.find(pid, LT_NAME_KERNEL, k.name_id);
    return n && n->starts_with("nccl");
  }

  ProcessNccl finish_one(std::uint32_t pid, Proc& p) {
    ProcessNccl out;
    out.pid = pid;
    out.cupti = p.cupti;
    out.unbounded = p.unbounded;
    // Per thread in time order: each NCCL record opens a window up to the
    // thread's next one; the NCCL kernels launched in it are its call's
    // (ungrouped) or its group's (the closing ncclGroupEnd).
    std::stable_sort(p.calls.begin(), p.calls.end(),
                     [](const Call& a, const Call& b) { return a.tid != b.tid ? a.tid < b.tid : a.ts < b.ts; });
    std::stable_sort(p.launches.begin(), p.launches.end(),
                     [](const Launch& a, const Launch& b) { return a.tid != b.tid ? a.tid < b.tid : a.ts < b.ts; });
    struct Span {
      std::uint64_t begin = ~0ull, end = 0;
      std::uint64_t kernels = 0;
    };
    std::vector<Span> spans(p.calls.size());
    std::size_t l = 0;
    for (std::size_t i = 0; i < p.calls.size(); ++i) {
      const Call& c = p.calls[i];
      const bool last_of_thread = i + 1 == p.calls.size() || p.calls[i + 1].tid != c.tid;
      const std::uint64_t until = last_of_thread ? ~0ull : p.calls[i + 1].ts;
      while (l < p.launches.size() &&
             (p.launches[l].tid < c.tid || (p.launches[l].tid == c.tid && p.launches[l].ts < c.ts)))
        ++l;
      for (; l < p.launches.size() && p.launches[l].tid == c.tid && p.launches[l].ts < until; ++l) {
        auto k = p.kernels.find(p.launches[l].correlation);
        if (k == p.kernels.end() || !nccl_kernel(pid, k->second)) continue;
        Span& s = spans[i];
        s.begin = std::min(s.begin, k->second.start);
        s.end = std::max(s.end, k->second.end);
        s.kernels++;
        out.kernels++;
      }
    }

    std::map<std::tuple<std::uint8_t, std::uint64_t, int, std::uint64_t>, NcclSizeRow>
        sizes;  // fn, bytes, dtype, count
    std::map<std::pair<std::uint32_t, std::uint8_t>, NcclActionRow> acts;
    struct Group {
      std::map<std::uint8_t, std::uint64_t> fns;
      std::uint64_t gpu_ns = 0;
      bool timed = false;
    };
    std::map<std::uint32_t, Group> groups;
    for (std::size_t i = 0; i < p.calls.size(); ++i) {
      const Call& c = p.calls[i];
      const Span& s = spans[i];
      const std::uint64_t gpu = s.kernels && s.end > s.begin ? s.end - s.begin : 0;
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
      const auto cm = p.comms.find(c.comm);
      const int n = cm == p.comms.end() ? -1 : cm->second.nranks;
      const std::tuple<std::uint8_t, std::uint64_t, int, std::uint64_t> key{c.fn, bytes, c.dtype, c.count};
      const std::pair<std::uint32_t, std::uint8_t> akey{c.action, c.fn};
      if ((sizes.size() >= kMaxRows && !sizes.count(key)) || (acts.size() >= kMaxRows && !acts.count(akey))) {
        out.rows_dropped++;
        continue;
      }
      NcclSizeRow& r = sizes[key];
      if (!r.calls) {
        r.fn = c.fn;
        r.dtype = c.dtype;
        r.count = c.count;
        r.bytes = bytes;
        r.nranks = n;
      } else if (r.nranks != n) {
        r.nranks = -1;
      }
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
    for (std::uint64_t h : p.comm_order) out.comms.push_back(p.comms[h]);
    return out;
  }
};

NcclAggregator::NcclAggregator(const ActionAggregator& actions) : s_(std::make_unique<State>(actions)) {}
NcclAggregator::~NcclAggregator() = default;

void NcclAggregator::add(const lt_event_header& h, const std::byte* record) {
  switch (h.kind) {
    case LT_EV_NCCL: {
      lt_nccl_event e;
      if (read_record(h, record, e)) s_->on_nccl(h, e);
      return;
    }
    case LT_EV_GPU_NAME: {
      lt_gpu_name_event e;
      if (read_record(h, record, e) && e.n.kind == LT_NAME_KERNEL) s_->names.add(h.pid, e.n);
      return;
    }
    case LT_EV_GPU_LAUNCH: {
      lt_gpu_launch_event e;
      if (read_record(h, record, e)) s_->on_launch(h, e);
      return;
    }
    case LT_EV_GPU_ACTIVITY: {
      lt_gpu_activity_event e;
      if (read_record(h, record, e)) s_->on_activity(h, e.a);
      return;
    }
    default:
      return;
  }
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
