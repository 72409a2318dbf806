#include "reports/aggregate/comm.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>
#include <unordered_map>

#include "reports/aggregate/comm_times.h"
#include "reports/aggregate/stacks.h"  // kNoAction
#include "user/model/record_dispatch.h"

namespace lt {

namespace {

constexpr std::size_t kMaxCallsKept = 1'000'000;
// Calls and marks per process held for the time join (comm_times.h): a
// million calls is hours of DDP steps; past it, calls are counted untimed.
constexpr std::size_t kMaxCallsTimed = 1'000'000;
constexpr std::size_t kMaxMarks = 3'000'000;  // up to 3 per call (enqueue, completion, wait)
// Rows and groups per process: a real job has a few dozen of each; a
// damaged or crafted trace must not grow them without bound.
constexpr std::size_t kMaxRows = 4096;
constexpr std::size_t kMaxGroups = 1024;

struct DType {
  const char* name;
  std::size_t size;
};
// c10::ScalarType, in its enum order (c10/core/ScalarType.h)
constexpr DType kDTypes[] = {
    {"uint8", 1},           {"int8", 1},
    {"int16", 2},           {"int32", 4},
    {"int64", 8},           {"float16", 2},
    {"float32", 4},         {"float64", 8},
    {"complex32", 4},       {"complex64", 8},
    {"complex128", 16},     {"bool", 1},
    {"qint8", 1},           {"quint8", 1},
    {"qint32", 4},          {"bfloat16", 2},
    {"quint4x2", 1},        {"quint2x4", 1},
    {"bits1x8", 1},         {"bits2x4", 1},
    {"bits4x2", 1},         {"bits8", 1},
    {"bits16", 2},          {"float8_e5m2", 1},
    {"float8_e4m3fn", 1},   {"float8_e5m2fnuz", 1},
    {"float8_e4m3fnuz", 1},
};
constexpr int kDTypeCount = static_cast<int>(sizeof kDTypes / sizeof kDTypes[0]);

// Does word k start ndim, sizes, zeros in the unused size slots, and is
// numel_ (k + 12: after the 5 sizes, 5 strides and storage_offset_) their
// product?  ndim 0 only when `scalar_ok`.
bool tensor_at(const std::uint64_t* w, int k, bool scalar_ok, CommTensor& out) {
  if (k < 0 || k + 13 >= LT_COMM_WORDS) return false;
  const std::uint64_t n = w[k];
  if (n > 5 || (n == 0 && !scalar_ok)) return false;
  std::uint64_t product = 1;
  for (std::uint64_t i = 0; i < 5; ++i) {
    const std::uint64_t size = w[k + 1 + i];
    if (i < n) {
      if (size < 1 || size > (1ull << 40)) return false;
      product *= size;
      if (product > (1ull << 48)) return false;
    } else if (size != 0) {
      return false;
    }
  }
  if (w[k + 12] != product) return false;
  const int dtype = static_cast<int>(w[k + 13] & 0xffff);
  if (dtype >= kDTypeCount) return false;
  out = {k, static_cast<unsigned>(n), product, dtype};
  return true;
}

}  // namespace

std::string comm_kind_name(std::uint8_t kind) {
  switch (kind) {
    case LT_COMM_ALLREDUCE:
      return "all_reduce";
    case LT_COMM_ALLREDUCE_COALESCED:
      return "all_reduce_coalesced";
    case LT_COMM_BROADCAST:
      return "broadcast";
    case LT_COMM_REDUCE:
      return "reduce";
    case LT_COMM_ALLGATHER:
      return "all_gather";
    case LT_COMM_ALLGATHER_COALESCED:
      return "all_gather_coalesced";
    case LT_COMM_ALLGATHER_INTO_TENSOR:
      return "all_gather_into_tensor";
    case LT_COMM_GATHER:
      return "gather";
    case LT_COMM_SCATTER:
      return "scatter";
    case LT_COMM_REDUCE_SCATTER:
      return "reduce_scatter";
    case LT_COMM_REDUCE_SCATTER_TENSOR:
      return "reduce_scatter_tensor";
    case LT_COMM_ALLTOALL:
      return "all_to_all";
    case LT_COMM_ALLTOALL_SINGLE:
      return "all_to_all_single";
    case LT_COMM_BARRIER:
      return "barrier";
    case LT_COMM_SEND:
      return "send";
    case LT_COMM_RECV:
      return "recv";
    case LT_COMM_RECV_ANYSOURCE:
      return "recv_anysource";
    default:
      return "comm#" + std::to_string(kind);
  }
}

std::string comm_dtype_name(int t) {
  return t >= 0 && t < kDTypeCount ? kDTypes[t].name : "dtype#" + std::to_string(t);
}

std::size_t comm_dtype_size(int t) {
  return t >= 0 && t < kDTypeCount ? kDTypes[t].size : 0;
}

std::optional<CommTensor> decode_comm_tensor(const std::uint64_t* w, int hint) {
  CommTensor t;
  if (hint >= 0 && tensor_at(w, hint, true, t)) return t;
  for (int k = 0; k + 13 < LT_COMM_WORDS; ++k)
    if (tensor_at(w, k, false, t)) return t;
  if (hint < 0)
    for (int k = 0; k + 13 < LT_COMM_WORDS; ++k)
      if (tensor_at(w, k, true, t)) return t;
  return std::nullopt;
}

struct CommAggregator::State {
  const ActionAggregator& actions;

  // The innermost action open on the thread, else on the main thread.
  std::string action_of(const lt_event_header& h) const {
    std::string action = actions.innermost_action(h.pid, h.tid);
    if (action.empty()) action = actions.innermost_action(h.pid, h.pid);
    if (action.empty()) action = kNoAction;
    return action;
  }

  CommAggregatorOptions opts;
  struct Proc {
    int layout = -1;
    ProcessComm out;
    std::map<std::tuple<std::uint8_t, std::string, std::uint64_t>, CommSizeRow> sizes;
    std::map<std::pair<std::string, std::uint8_t>, CommActionRow> by_action;
    std::unordered_map<std::uint64_t, CommGroup> groups;
    // for the time join: each timed call with the rows it is counted in (null: in none)
    std::vector<CommTimedCall> timed;
    struct Rows {
      CommSizeRow* size = nullptr;
      CommActionRow* action = nullptr;
      std::size_t kept = SIZE_MAX;  // index in out.calls_kept
    };
    std::vector<Rows> rows;
    std::vector<CommTimeMark> marks;
    std::vector<std::string> action_names;  // CommTimeMark::action -> name
    std::unordered_map<std::string, std::uint32_t> action_ids;
    std::uint32_t action_id(const std::string& name) {
      auto [it, added] = action_ids.try_emplace(name, static_cast<std::uint32_t>(action_names.size()));
      if (added) action_names.push_back(name);
      return it->second;
    }
  };
  std::map<std::uint32_t, Proc> procs;

  void mark(const lt_event_header& h, const lt_comm_mark_event& e) {
    Proc& p = procs[h.pid];
    p.out.pid = h.pid;
    ++p.out.marks;
    if (p.marks.size() >= kMaxMarks) return;
    const bool waits = e.what == LT_COMM_MARK_WAIT || e.what == LT_COMM_MARK_DDP_FINALIZE;
    p.marks.push_back({h.ts_ns, h.tid, e.what, e.obj, e.owner, waits ? p.action_id(action_of(h)) : 0});
  }

  // Joins the calls of `p` with its marks and adds the times to its rows.
  void add_times(Proc& p) {
    const auto times = join_comm_times(p.timed, p.marks);
    for (std::size_t i = 0; i < times.size(); ++i) {
      const CommCallTimes& t = times[i];
      CommSizeRow* size_row = p.rows[i].size;
      CommActionRow* action_row = p.rows[i].action;
      if (size_row) {
        if (t.enqueue_ns) ++size_row->enqueued, size_row->enqueue_ns += *t.enqueue_ns;
        if (t.in_flight_ns) ++size_row->completed, size_row->in_flight_ns += *t.in_flight_ns;
        if (t.blocked_ns) ++size_row->waited, size_row->blocked_ns += *t.blocked_ns;
        if (t.failed) ++size_row->failed;
      }
      if (p.timed[i].enqueues && !t.in_flight_ns) ++p.out.incomplete;
      if (action_row && t.in_flight_ns) ++action_row->completed, action_row->in_flight_ns += *t.in_flight_ns;
      if (t.blocked_ns) {
        // charged to the waiting thread's action, for the same kind
        const std::uint8_t kind = action_row ? action_row->kind : (size_row ? size_row->kind : 0);
        const std::string& waiter = t.wait_action < p.action_names.size() ? p.action_names[t.wait_action] : kNoAction;
        auto key = std::make_pair(waiter, kind);
        if (kind && (p.by_action.size() < kMaxRows || p.by_action.count(key))) {
          auto& a = p.by_action[key];
          a.action = waiter;
          a.kind = kind;
          ++a.waited;
          a.blocked_ns += *t.blocked_ns;
        }
      }
      if (const std::size_t k = p.rows[i].kept; k < p.out.calls_kept.size()) {
        p.out.calls_kept[k].enqueue_ns = t.enqueue_ns;
        p.out.calls_kept[k].in_flight_ns = t.in_flight_ns;
        p.out.calls_kept[k].blocked_ns = t.blocked_ns;
      }
    }
  }

  void comm(const lt_event_header& h, const lt_comm_event& e) {
    Proc& p = procs[h.pid];
    p.out.pid = h.pid;
    std::string dtype;
    std::uint64_t count = 0, bytes = 0;
    if (e.flags & LT_COMM_HAS_TENSOR) {
      if (auto t = decode_comm_tensor(e.impl, p.layout)) {
        if (t->ndim > 0) p.layout = t->layout;
        dtype = comm_dtype_name(t->dtype);
        count = t->numel;
        bytes = count * comm_dtype_size(t->dtype);
      } else {
        ++p.out.unreadable;
      }
    } else if (e.flags & LT_COMM_TENSOR_UNREAD) {
      ++p.out.unreadable;
    }
    std::tuple<std::uint8_t, std::string, std::uint64_t> key{e.kind, dtype, count};
    CommSizeRow* size_row = nullptr;
    CommActionRow* action_row = nullptr;
    if (p.sizes.size() >= kMaxRows && !p.sizes.count(key)) {
      ++p.out.rows_dropped;  // counted in the totals below, not in a row
    } else {
      auto& row = p.sizes[key];
      size_row = &row;
      row.kind = e.kind;
      row.dtype = dtype;
      row.count = count;
      row.bytes = bytes;
      ++row.calls;
      if (e.ntensors > 1) ++row.multi_tensor_calls;
    }
    ++p.out.calls;
    p.out.bytes += bytes;

    std::string action = action_of(h);
    if (p.by_action.size() < kMaxRows || p.by_action.count({action, e.kind})) {
      auto& a = p.by_action[{action, e.kind}];
      a.action = action;
      a.kind = e.kind;
      ++a.calls;
      a.bytes += bytes;
      action_row = &a;
    }
    const bool timed = p.timed.size() < kMaxCallsTimed;
    if (timed) {
      const bool p2p = e.kind == LT_COMM_SEND || e.kind == LT_COMM_RECV || e.kind == LT_COMM_RECV_ANYSOURCE;
      p.timed.push_back({h.ts_ns, h.tid, !p2p});
      p.rows.push_back({size_row, action_row});
    } else {
      ++p.out.untimed;
    }

    auto g = p.groups.find(e.pg);
    if (g == p.groups.end() && p.groups.size() >= kMaxGroups) {
      ++p.out.rows_dropped;
      return;
    }
    if (g == p.groups.end()) {
      g = p.groups.emplace(e.pg, CommGroup{}).first;
      g->second.index = static_cast<unsigned>(p.groups.size() - 1);
      g->second.object = e.pg;
      g->second.first_seq = e.seq;
    }
    ++g->second.calls;
    g->second.first_seq = std::min(g->second.first_seq, e.seq);
    g->second.last_seq = std::max(g->second.last_seq, e.seq);

    if (opts.keep_calls && p.out.calls_kept.size() < kMaxCallsKept) {
      if (timed) p.rows.back().kept = p.out.calls_kept.size();
      p.out.calls_kept.push_back({h.ts_ns, h.tid, g->second.index, e.seq, e.kind, e.peer, dtype, count, bytes, action});
    }
  }
};

CommAggregator::CommAggregator(const ActionAggregator& actions, CommAggregatorOptions opts)
    : s_(std::make_unique<State>(State{actions, opts, {}})) {}

CommAggregator::~CommAggregator() = default;

void CommAggregator::add(const lt_event_header& h, const std::byte* record) {
  auto& s = *s_;
  visit_record(h, record,
               overloaded{[&](const lt_event_header& h, const lt_comm_mark_event& m) { s.mark(h, m); },
                          [&](const lt_event_header& h, const lt_comm_event& e) { s.comm(h, e); }});
}

CommReport CommAggregator::finish() {
  CommReport rep;
  for (auto& [pid, p] : s_->procs) {
    if (!p.out.calls) continue;  // timing marks alone (Work::wait of another backend): no call to time
    s_->add_times(p);
    ProcessComm out = std::move(p.out);
    for (auto& [k, r] : p.sizes) out.sizes.push_back(r);
    std::stable_sort(out.sizes.begin(), out.sizes.end(), [](const CommSizeRow& a, const CommSizeRow& b) {
      return std::tie(a.kind, a.bytes, a.dtype, a.count) < std::tie(b.kind, b.bytes, b.dtype, b.count);
    });
    for (auto& [k, r] : p.by_action) out.actions.push_back(r);
    for (auto& [obj, g] : p.groups) out.groups.push_back(g);
    std::sort(out.groups.begin(), out.groups.end(),
              [](const CommGroup& a, const CommGroup& b) { return a.index < b.index; });
    rep.processes.push_back(std::move(out));
  }
  return rep;
}

}  // namespace lt
