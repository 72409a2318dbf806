// The op observer's calls (OP_SPAN, docs/design-op-observer.md): each
// measured on its thread in the job, so calls and self/total times are
// exact.  They come in a drain after the actions around them: a call
// counts in the window its start fell in, found by time.
#include <algorithm>
#include <cstring>

#include "reports/aggregate/ops_state.h"

namespace lt {

using namespace ops_detail;

// After an action record: where this process's ops go from `ts` on.
void OpAggregator::State::note_boundary(std::uint32_t pid, std::uint64_t ts) {
  auto it = procs.find(pid);
  if (it == procs.end()) return;
  auto& p = it->second;
  WindowPtr w = p.sink_ptr();
  if (!p.boundaries.empty()) {
    if (p.boundaries.back().second == w) return;
    ts = std::max(ts, p.boundaries.back().first);  // kept sorted, whatever a damaged stream says
  }
  p.boundaries.emplace_back(ts, std::move(w));
  // Without the observer no call will look a window up: the first and the
  // latest are all there is to keep (the latest is where calls go should
  // the observer begin).  With it, the watermark lets go of the old ones
  // (forget_before); failing that (a call open for minutes holds it), the
  // oldest go here.  The first always stays, the window before any
  // boundary (an epoch-long scope).
  if (!p.measured && p.boundaries.size() > 2) p.boundaries.erase(p.boundaries.begin() + 1, p.boundaries.end() - 1);
  if (p.boundaries.size() > kMaxBoundaries)
    p.boundaries.erase(p.boundaries.begin() + 1, p.boundaries.begin() + 1 + kMaxBoundaries / 2);
}

// The observer's watermark: no call still to come starts before `ts`, so
// of the windows' boundaries and each thread's innermost actions before
// it only the last stays (a later call's start may fall after it).
void OpAggregator::State::forget_before(Proc& p, std::uint32_t pid, std::uint64_t ts) {
  settle_waiting(p, pid, ts);
  auto by_time = [](std::uint64_t t, const auto& e) { return t < e.first; };
  if (p.boundaries.size() > 2) {
    auto last = std::prev(std::upper_bound(p.boundaries.begin() + 1, p.boundaries.end(), ts, by_time));
    if (last > p.boundaries.begin() + 1) p.boundaries.erase(p.boundaries.begin() + 1, last);
  }
  for (auto& [tid, hist] : p.innermost)
    while (hist.size() > 1 && hist[1].first <= ts) hist.pop_front();
}

OpAggregator::State::WindowPtr OpAggregator::State::window_at(Proc& p, std::uint64_t ts) {
  if (p.boundaries.empty()) return p.sink_ptr();
  auto it = std::upper_bound(p.boundaries.begin(), p.boundaries.end(), ts,
                             [](std::uint64_t t, const auto& b) { return t < b.first; });
  if (it == p.boundaries.begin()) return it->second;  // before the first boundary seen: the window it closed
  return std::prev(it)->second;
}

// Grouped by input shapes, the (op, shapes) row: the shapes the observer
// read (OP_INPUT_SHAPES), [] for a record_function() scope (it has no
// inputs, as torch prints it), none when it read none.
std::uint32_t OpAggregator::State::span_row(std::uint32_t op, bool user) {
  if (!opts.group_by_shapes) return name_id_of(op);
  if (!user && op < span_rows.size() && span_rows[op] != UINT32_MAX) return span_rows[op];
  std::string key = op < op_names.size() && !op_names[op].empty() ? op_names[op] : "op#" + std::to_string(op);
  key += '\t';
  if (op < op_shapes.size() && !op_shapes[op].empty())
    key += op_shapes[op];
  else if (user)
    key += "[]";
  const std::uint32_t row = intern(key);
  if (!user && op < 1'000'000) {
    if (span_rows.size() <= op) span_rows.resize(op + 1, UINT32_MAX);
    span_rows[op] = row;
  }
  return row;
}

void OpAggregator::State::count_call(const Proc::EndedCall& c) {
  if (c.row == kHiddenRow) return;  // --ops left it out
  Window* w = resolve(c.window.get());
  if (!w) return;  // its step was left out by --schedule
  Acc& a = w->row(c.row);
  a.calls++;
  a.span_self_ns += c.self_ns;
  a.span_total_ns += c.total_ns;
}

// Calls end before their parent: a call's children are the calls one level
// deeper that ended since its previous sibling did, inside its time.
void OpAggregator::State::on_span(const lt_event_header& h, const lt_op_span_event& e) {
  auto& p = proc(h.pid);
  if (e.flags & LT_OP_SPAN_WATERMARK) return forget_before(p, h.pid, h.ts_ns);
  p.measured = true;
  const std::uint64_t total = e.end_ns > h.ts_ns ? e.end_ns - h.ts_ns : 0;
  const bool hidden = e.flags & LT_OP_SPAN_HIDDEN;
  if (!hidden) {
    p.last_ts = std::max(p.last_ts, e.end_ns);
    ++p.calls;
  }
  const std::uint32_t action = action_at(p, h.tid, h.ts_ns);
  Proc::EndedCall call{hidden ? kHiddenRow : span_row(e.op, e.flags & LT_OP_SPAN_USER),
                       hidden ? kHiddenRow : name_id_of(e.op),
                       h.ts_ns,
                       window_at(p, h.ts_ns),
                       std::min(e.self_ns, total),
                       total,
                       action};
  if (!hidden) calls_around(p, h.tid, h.ts_ns, e.end_ns, call.row);
  const std::size_t depth = std::clamp<std::size_t>(e.depth, 1, kMaxSpanDepth);
  auto& levels = p.ended[h.tid];
  // Calls still waiting deeper than its children (their parent was lost:
  // a full ring) will have none: they count as they are.
  for (std::size_t d = depth + 1; d < levels.size(); ++d) {
    for (const auto& k : levels[d]) count_call(k);
    levels[d].clear();
  }
  std::vector<Proc::EndedCall> kids;
  if (levels.size() > depth) {
    for (auto& k : levels[depth])
      if (k.start >= h.ts_ns && k.start + k.total_ns <= e.end_ns)
        kids.push_back(std::move(k));
      else
        count_call(k);  // not inside it: an orphan, counted as it is
    levels[depth].clear();
  }
  // Its self as the observer measured it left out its child calls; those
  // inside an action that ran inside it are that action's, and the action
  // is its child instead.
  std::uint64_t self = call.self_ns;
  for (const auto& k : kids)
    if (k.action != action) self += k.total_ns;
  self -= std::min(self, claim_actions(p, h.tid, h.ts_ns, e.end_ns, action));
  call.self_ns = std::min(self, total);
  charge_call_to_action(p, h.tid, action, h.ts_ns, e.end_ns, call.self_ns);
  if (kids.size() == 1 && kids[0].base == call.base && !hidden)
    call.self_ns += kids[0].self_ns;  // torch's EventList drops it; its parent keeps its time
  else
    for (const auto& k : kids) count_call(k);
  if (opts.keep_intervals && !hidden) {
    if (out.intervals.size() < kMaxIntervals)
      out.intervals.push_back({h.pid, h.tid, e.op, static_cast<std::uint16_t>(depth), h.ts_ns, e.end_ns, true,
                               (e.flags & LT_OP_SPAN_USER) != 0});
    else
      ++out.intervals_dropped;
  }
  if (depth == 1) return count_call(call);
  if (levels.size() < depth) levels.resize(depth);
  levels[depth - 1].push_back(std::move(call));
}

void OpAggregator::State::flush_ended(Proc& p, std::uint32_t pid) {
  settle_waiting(p, pid, UINT64_MAX);
  for (auto& [tid, levels] : p.ended)
    for (auto& kids : levels)
      for (const auto& k : kids) count_call(k);
  p.ended.clear();
  flush_all_deferred(p);
}

void OpAggregator::State::on_observer(const lt_event_header& h, const lt_op_observer_event& e) {
  auto& p = proc(h.pid);
  const std::string detail(e.detail, strnlen(e.detail, sizeof e.detail));
  if (e.how == LT_OP_TIMES_SAMPLED) p.observer_not_used = detail;
  if (e.how == LT_OP_TIMES_OBSERVER) p.measured = true;
  if (e.final) {
    p.observer_dropped += e.dropped;
    p.observer_too_deep += e.too_deep;
  }
}

}  // namespace lt
