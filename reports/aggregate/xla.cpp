#include "reports/aggregate/xla.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <tuple>
#include <utility>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/stacks.h"  // kNoAction
#include "user/model/record_dispatch.h"

namespace lt {

namespace {

// Calls waiting for their timer's end, per kind and process: a timer that
// never ends (the call threw) must not hold memory for ever.
constexpr std::size_t kMaxPending = 4096;
constexpr std::size_t kMaxRows = 4096;
constexpr std::size_t kMaxMetrics = 1024;
// A timer's start and end are read from the target: a pair further apart
// than this is no section we know (a reused address, a damaged trace).
constexpr std::uint64_t kMaxSectionNs = 24ull * 3600 * 1'000'000'000;

struct TimerName {
  const char* name;
  std::uint32_t site;
};
// torch_xla's runtime timers (ComputationClient's metrics); the transfer
// timers were named *ServerTime before PJRT.
constexpr TimerName kTimers[] = {
    {"CompileTime", LT_XLA_COMPILE},
    {"ExecuteTime", LT_XLA_EXECUTE},
    {"ExecuteReplicatedTime", LT_XLA_EXECUTE_REPLICATED},
    {"TransferToDeviceTime", LT_XLA_TO_DEVICE},
    {"TransferToServerTime", LT_XLA_TO_DEVICE},
    {"TransferFromDeviceTime", LT_XLA_FROM_DEVICE},
    {"TransferFromServerTime", LT_XLA_FROM_DEVICE},
};

XlaCalls& calls_of(XlaRow& r, std::uint32_t site) {
  switch (site) {
    case LT_XLA_COMPILE:
      return r.compiles;
    case LT_XLA_TO_DEVICE:
      return r.to_device;
    case LT_XLA_FROM_DEVICE:
      return r.from_device;
    default:
      return r.executions;  // ExecuteComputation and ExecuteReplicated alike
  }
}

}  // namespace

std::uint32_t xla_timer_site(const std::string& metric) {
  for (const auto& t : kTimers)
    if (metric == t.name) return t.site;
  return 0;
}

const char* xla_site_name(std::uint32_t site) {
  switch (site) {
    case LT_XLA_COMPILE:
      return "XLA compile";
    case LT_XLA_EXECUTE:
      return "XLA execute";
    case LT_XLA_EXECUTE_REPLICATED:
      return "XLA execute replicated";
    case LT_XLA_TO_DEVICE:
      return "XLA transfer to device";
    case LT_XLA_FROM_DEVICE:
      return "XLA transfer from device";
    case LT_XLA_MARK_STEP:
      return "XLA step mark";
    default:
      return "XLA";
  }
}

std::uint32_t xla_bytes_site(const std::string& metric) {
  if (metric == "OutboundData") return LT_XLA_TO_DEVICE;
  if (metric == "InboundData") return LT_XLA_FROM_DEVICE;
  return 0;
}

std::uint64_t XlaProcess::recompiles() const {
  return static_cast<std::uint64_t>(
      std::count_if(compiles.begin(), compiles.end(), [](const XlaCompile& c) { return c.recompile; }));
}

struct XlaAggregator::State {
  const ActionAggregator& actions;
  bool keep_slices = false;
  XlaReport out;

  struct Pending {
    std::uint64_t ts = 0;
    std::uint32_t tid = 0;
    std::size_t row = 0;
    std::int64_t compile = -1;  // index in compiles
  };
  struct Proc {
    std::map<std::string, std::size_t> row_of;
    std::map<std::uint64_t, std::string> metric_names;
    std::array<std::deque<Pending>, LT_XLA_SITE_MAX + 1> pending;
    // Per row: it ran a graph in the step under way / in a step that ended.
    std::vector<bool> row_executed, row_ran_before;
    bool settled = false, step_compiled = false, step_executed = false;
    std::uint64_t steps = 0;
  };
  std::map<std::uint32_t, Proc> procs;
  // (pid, tid) -> the TimedSection that just ended there: (metric, start)
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::pair<std::uint64_t, std::uint64_t>> ended;
  // (pid, tid, site) -> the row of the thread's last transfer of that kind
  // whose bytes are not known yet (its value sample comes inside the call).
  std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>, std::size_t> unsized;

  std::string action_of(const lt_event_header& h) const {
    std::string action = actions.innermost_action(h.pid, h.tid);
    if (action.empty()) action = actions.innermost_action(h.pid, h.pid);
    if (action.empty()) action = kNoAction;
    return action;
  }

  std::size_t row(XlaProcess& p, Proc& pr, const std::string& action) {
    auto it = pr.row_of.find(action);
    if (it != pr.row_of.end()) return it->second;
    if (p.actions.size() >= kMaxRows) {
      // Past the bound, everything goes to the last row.
      return p.actions.size() - 1;
    }
    p.actions.push_back({});
    p.actions.back().action = action;
    pr.row_executed.push_back(false);
    pr.row_ran_before.push_back(false);
    pr.row_of.emplace(action, p.actions.size() - 1);
    return p.actions.size() - 1;
  }

  void on_call(const lt_event_header& h, const lt_xla_event& e) {
    XlaProcess& p = out.procs[h.pid];
    Proc& pr = procs[h.pid];
    const std::size_t r = row(p, pr, action_of(h));
    XlaRow& rw = p.actions[r];
    if (e.site == LT_XLA_MARK_STEP) {
      ++rw.mark_steps;
      ++p.total.mark_steps;
      if (pr.step_executed && !pr.step_compiled) pr.settled = true;
      pr.step_executed = pr.step_compiled = false;
      for (std::size_t i = 0; i < pr.row_executed.size(); ++i) {
        if (pr.row_executed[i]) pr.row_ran_before[i] = true;
        pr.row_executed[i] = false;
      }
      ++pr.steps;
      return;
    }
    for (XlaCalls* c : {&calls_of(rw, e.site), &calls_of(p.total, e.site)}) {
      ++c->calls;
      if (e.site == LT_XLA_TO_DEVICE || e.site == LT_XLA_FROM_DEVICE) c->tensors += e.arg;
    }
    if (e.site == LT_XLA_TO_DEVICE || e.site == LT_XLA_FROM_DEVICE) unsized[{h.pid, h.tid, e.site}] = r;
    Pending pend{h.ts_ns, h.tid, r, -1};
    if (e.site == LT_XLA_COMPILE) {
      pr.step_compiled = true;
      if (p.compiles.size() < XlaAggregator::kMaxCompiles) {
        p.compiles.push_back({h.ts_ns, 0, pr.steps, rw.action, pr.settled && pr.row_ran_before[r]});
        pend.compile = static_cast<std::int64_t>(p.compiles.size() - 1);
      } else {
        ++p.compiles_dropped;
      }
    } else if (e.site == LT_XLA_EXECUTE || e.site == LT_XLA_EXECUTE_REPLICATED) {
      pr.step_executed = true;
      pr.row_executed[r] = true;
    }
    auto& q = pr.pending[e.site];
    if (q.size() >= kMaxPending) q.pop_front();
    q.push_back(pend);
  }

  void on_timer_end(const lt_event_header& h, const lt_xla_event& e) {
    if (e.flags & LT_XLA_UNREAD) return;
    ended[{h.pid, h.tid}] = {e.obj, e.arg};
  }

  void on_sample(const lt_event_header& h, const lt_xla_event& e) {
    XlaProcess& p = out.procs[h.pid];
    Proc& pr = procs[h.pid];
    const auto name_it = pr.metric_names.find(e.obj);
    const std::string name = name_it == pr.metric_names.end() ? "" : name_it->second;
    if (!name.empty()) ++p.timers[name];
    // The section's exact time, when its destructor ran out of line just
    // before on this thread (the same metric): end - start, torch_xla's own.
    std::uint64_t exact = 0;
    bool have_exact = false;
    if (auto it = ended.find({h.pid, h.tid}); it != ended.end()) {
      if (it->second.first == e.obj && e.arg >= it->second.second && e.arg - it->second.second < kMaxSectionNs) {
        exact = e.arg - it->second.second;
        have_exact = true;
      }
      ended.erase(it);
    }
    const std::uint32_t site = name.empty() ? 0 : xla_timer_site(name);
    if (!site) return;
    auto& q = pr.pending[site];
    // The oldest call of this thread (a section that ends where it began),
    // else, for an execution, the oldest waiting: its timer ends when the
    // execution completes, on a runtime thread, in the order they were
    // issued (one device stream).
    const bool async = site == LT_XLA_EXECUTE || site == LT_XLA_EXECUTE_REPLICATED;
    auto at = std::find_if(q.begin(), q.end(), [&](const Pending& x) { return x.tid == h.tid; });
    if (at == q.end() && (async || have_exact)) at = q.begin();
    if (at == q.end()) {
      ++p.ends_unpaired;
      return;
    }
    const Pending pend = *at;
    q.erase(at);
    if (!have_exact) {
      if (h.ts_ns < pend.ts) return;
      exact = h.ts_ns - pend.ts;
    }
    XlaRow& rw = p.actions[pend.row];
    calls_of(rw, site).add_time(exact);
    calls_of(p.total, site).add_time(exact);
    if (pend.compile >= 0) p.compiles[static_cast<std::size_t>(pend.compile)].ns = exact;
    if (keep_slices && p.slices.size() < XlaAggregator::kMaxSlices)
      p.slices.push_back({pend.tid, pend.ts, pend.ts + exact, site});
  }

  void on_value(const lt_event_header& h, const lt_xla_value_event& v) {
    XlaProcess& p = out.procs[h.pid];
    Proc& pr = procs[h.pid];
    const auto name = pr.metric_names.find(v.metric);
    const std::uint32_t site = name == pr.metric_names.end() ? 0 : xla_bytes_site(name->second);
    if (!site) return;
    const auto it = unsized.find({h.pid, h.tid, site});
    if ((v.flags & LT_XLA_VALUE_NOT_FOUND) || it == unsized.end() || !(v.value >= 0) || v.value > 1e15) {
      ++p.values_lost;
      return;
    }
    const auto bytes = static_cast<std::uint64_t>(v.value);
    for (XlaCalls* c : {&calls_of(p.actions[it->second], site), &calls_of(p.total, site)}) {
      ++c->sized;
      c->bytes += bytes;
    }
    unsized.erase(it);
  }

  void on_name(const lt_event_header& h, const lt_xla_metric_name_event& n) {
    Proc& pr = procs[h.pid];
    if (pr.metric_names.size() >= kMaxMetrics && !pr.metric_names.count(n.metric)) return;
    char text[LT_XLA_METRIC_NAME_MAX + 1] = {};
    std::copy(std::begin(n.name), std::end(n.name), text);
    pr.metric_names[n.metric] = text;
  }

  void on_info(const lt_event_header& h, const lt_xla_info_event& i) {
    XlaProcess& p = out.procs[h.pid];
    procs[h.pid];
    auto text = [](const char* s, std::size_t n) { return std::string(s, strnlen(s, n)); };
    p.version = text(i.version, sizeof i.version);
    p.device = text(i.device, sizeof i.device);
    p.library = text(i.library, sizeof i.library);
  }
};

XlaAggregator::XlaAggregator(const ActionAggregator& actions, bool keep_slices)
    : s_(std::make_unique<State>(State{actions, keep_slices, {}})) {}
XlaAggregator::~XlaAggregator() = default;

void XlaAggregator::add(const lt_event_header& h, const std::byte* p) {
  visit_record(h, p,
               overloaded{[&](const lt_event_header& hh, const lt_xla_event& e) {
                            if (e.site == LT_XLA_TIMED_END)
                              s_->on_timer_end(hh, e);
                            else if (e.site == LT_XLA_METRIC_SAMPLE)
                              s_->on_sample(hh, e);
                            else if (e.site >= LT_XLA_COMPILE && e.site <= LT_XLA_MARK_STEP)
                              s_->on_call(hh, e);
                          },
                          [&](const lt_event_header& hh, const lt_xla_metric_name_event& n) { s_->on_name(hh, n); },
                          [&](const lt_event_header& hh, const lt_xla_info_event& i) { s_->on_info(hh, i); },
                          [&](const lt_event_header& hh, const lt_xla_value_event& v) { s_->on_value(hh, v); },
                          [&](const lt_event_header& hh, const lt_window_event& w) {
                            if (w.begin && !s_->out.window_begin_ns) s_->out.window_begin_ns = hh.ts_ns;
                          }});
}

void XlaAggregator::gap() {
  s_->ended.clear();
  s_->unsized.clear();
  for (auto& [pid, pr] : s_->procs)
    for (auto& q : pr.pending) q.clear();
}

XlaReport XlaAggregator::finish() {
  // A process that was only described (XLA_INFO, no call seen) stays: the
  // report says torch_xla was there and idle.
  return std::move(s_->out);
}

}  // namespace lt
