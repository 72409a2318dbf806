#include <algorithm>
#include <cstring>

#include "reports/aggregate/ops_state.h"
#include "reports/aggregate/sample_weight.h"

namespace lt {

using namespace ops_detail;

std::vector<OpAggregator::State::Completion> OpAggregator::State::completions_of(const lt_event_header& h) {
  std::vector<Completion> out;
  if (h.kind != LT_EV_ACTION_BEGIN && h.kind != LT_EV_ACTION_END && h.kind != LT_EV_DIRECT_START &&
      h.kind != LT_EV_DIRECT_STOP && h.kind != LT_EV_FETCH_BEGIN)
    return out;
  auto& seen = spans_seen[h.pid];
  const std::uint64_t done = actions.completed(h.pid);
  for (; seen < done; ++seen)
    if (const CompletedSpan* c = actions.completed_span(h.pid, seen))
      out.push_back({*c, actions.innermost_action(h.pid, c->tid)});
  return out;
}

// Lightning's PyTorchProfiler wraps each action in record_function("[pl][profile]"
// + name): a row per action with its calls and measured time (total); self
// is that time less the actions completed inside it (measured) and the time
// ops ran while it was the innermost action on its thread (sampled), as
// torch's self is a record's time less its children's.  Charged to the
// window the action ends in.
void OpAggregator::State::charge_completions(const lt_event_header& h, const std::vector<Completion>& done) {
  auto it = procs.find(h.pid);
  if (done.empty() || it == procs.end()) return;  // rows from the process's first op (or batch hook) on
  auto& p = it->second;
  for (const auto& c : done) {
    if (p.measured) {
      p.deferred[c.span.tid].push_back({c, p.sink_ptr()});
      auto& done = p.recent_done[c.span.tid];
      done.push_back({c.span.begin_ns, c.span.end_ns, action_id(c.parent), false});
      if (done.size() > kMaxRecentDone) done.pop_front();
      continue;
    }
    const auto key = std::make_pair(c.span.tid, c.span.name);
    std::uint64_t covered = 0;
    if (auto it = p.covered_samples.find(key); it != p.covered_samples.end()) {
      covered = it->second * out.period_ns;
      p.covered_samples.erase(it);
    }
    charge_completion(p, c, p.sink(), covered);
  }
  if (p.measured)
    for (const auto& c : done) flush_deferred(p, c.span.tid, false);
}

// One action's row: `covered` is the time ops ran while it was the
// innermost action on its thread (sampled, or measured by the observer).
void OpAggregator::State::charge_completion(Proc& p, const Completion& c, Window& into, std::uint64_t covered) {
  const std::uint64_t dur = c.span.end_ns - c.span.begin_ns;
  const auto key = std::make_pair(c.span.tid, c.span.name);
  std::uint64_t children = 0;
  if (auto it = p.child_ns.find(key); it != p.child_ns.end()) {
    children = it->second;
    p.child_ns.erase(it);
  }
  Acc& a = into.row(intern("[pl][profile]" + c.span.name));
  a.calls++;
  a.record_total_ns += dur;
  a.record_self_ns += dur - std::min(dur, covered + children);
  if (!c.parent.empty()) p.child_ns[{c.span.tid, c.parent}] += dur;
}

// After an action record of a measured process: the action innermost on
// the record's thread from its time on (for calls that come later).
void OpAggregator::State::note_innermost(const lt_event_header& h) {
  auto it = procs.find(h.pid);
  if (it == procs.end() || !it->second.measured) return;
  auto& hist = it->second.innermost[h.tid];
  hist.emplace_back(h.ts_ns, action_id(actions.innermost_action(h.pid, h.tid)));
  if (hist.size() > kMaxBoundaries) hist.pop_front();
}

// Measured calls nest among the actions as Lightning's PyTorchProfiler
// nests its [pl][profile] scopes among them: a call's parent is the action
// innermost on its thread when it started (or the call around it), and the
// actions that ran inside it are its children (the closure's training_step
// and backward inside Optimizer.step#).
std::uint32_t OpAggregator::State::action_at(Proc& p, std::uint32_t tid, std::uint64_t ts) {
  auto h = p.innermost.find(tid);
  if (h == p.innermost.end() || h->second.empty()) return kNoAction;
  const auto& hist = h->second;
  auto at = std::upper_bound(hist.begin(), hist.end(), ts, [](std::uint64_t t, const auto& e) { return t < e.first; });
  return at == hist.begin() ? kNoAction : std::prev(at)->second;
}

// The actions a call [start, end] holds as children: completed inside it,
// children of the action it started in, and not taken by a deeper call
// (which ended first).  Returns their time.
std::uint64_t OpAggregator::State::claim_actions(Proc& p, std::uint32_t tid, std::uint64_t start, std::uint64_t end,
                                                 std::uint32_t parent) {
  std::uint64_t ns = 0;
  if (auto d = p.recent_done.find(tid); d != p.recent_done.end())
    for (auto it = d->second.rbegin(); it != d->second.rend() && it->end >= start; ++it)
      if (!it->claimed && it->begin >= start && it->end <= end && it->parent == parent) {
        it->claimed = true;
        ns += it->end - it->begin;
      }
  return ns;
}

// A call's self in that tree is not its action's self.  The completions
// that ended before it started are complete (calls come in the order they
// end) and go out first, so that an action run again (the next step's
// training_step) is not charged with this call; then the call is charged,
// then what it shows complete goes out.
void OpAggregator::State::charge_call_to_action(Proc& p, std::uint32_t tid, std::uint32_t action, std::uint64_t start,
                                                std::uint64_t end, std::uint64_t self) {
  auto& last = p.last_call_end[tid];
  last = std::max(last, start);
  flush_deferred(p, tid, false);
  if (action != kNoAction) p.covered_ns[{tid, action}] += self;
  last = std::max(last, end);
  flush_deferred(p, tid, false);
}

// One thread's completions, in order (a parent needs its children's time,
// and actions nest per thread): each once a call on its thread ended after
// it (every call inside it is in), or all.
void OpAggregator::State::flush_deferred(Proc& p, std::uint32_t tid, bool all) {
  auto q = p.deferred.find(tid);
  if (q == p.deferred.end()) return;
  const auto last = p.last_call_end.find(tid);
  while (!q->second.empty()) {
    auto& d = q->second.front();
    if (!all && q->second.size() < kMaxBoundaries && (last == p.last_call_end.end() || last->second < d.c.span.end_ns))
      return;
    std::uint64_t covered = 0;
    if (auto it = p.covered_ns.find({tid, action_id(d.c.span.name)}); it != p.covered_ns.end()) {
      covered = it->second;
      p.covered_ns.erase(it);
    }
    if (Window* w = resolve(d.window.get())) charge_completion(p, d.c, *w, covered);
    q->second.pop_front();
  }
}

void OpAggregator::State::flush_all_deferred(Proc& p) {
  for (auto& [tid, q] : p.deferred) flush_deferred(p, tid, true);
}

std::uint32_t OpAggregator::State::module_row(std::uint64_t self) {
  const std::uint32_t id = intern(std::string("\0module ", 8) + std::to_string(self));
  module_of_row.emplace(id, self);
  return id;
}

void OpAggregator::State::on_module_call(const lt_event_header& h, const lt_module_call_event& e) {
  auto& p = proc(h.pid);
  p.last_ts = std::max(p.last_ts, h.ts_ns);
  const std::uint32_t row = module_row(e.self);
  p.sink().row(row).calls++;
  auto& st = p.modules_open[h.tid];
  while (!st.empty() && (e.depth == 0 || st.back().depth >= e.depth)) st.pop_back();
  if (e.depth) st.push_back({e.depth, e.code, row});  // depth unknown: calls only
}

// A sample's frames, leaf first: the module calls still open are those
// whose _call_impl is at their depth from the root; each gets the sample
// in its total, the innermost in its self when no op ran (torch: a
// record's self is its time less its children's, ops and modules alike).
// Returns whether a module call was open (then the sample is not the
// enclosing action's self).
bool OpAggregator::State::charge_modules(Proc& p, std::uint32_t tid, const lt_py_sample_event& e, std::uint16_t nops) {
  auto it = p.modules_open.find(tid);
  if (it == p.modules_open.end() || it->second.empty()) return false;
  if (e.flags & (LT_SAMPLE_TRUNCATED | LT_SAMPLE_READ_FAULT | LT_SAMPLE_NO_TSTATE)) return false;
  const unsigned n = std::min<unsigned>(e.nframes, LT_STACK_MAX);
  auto& st = it->second;
  std::size_t keep = 0;
  while (keep < st.size() && st[keep].depth <= n && e.frames[n - st[keep].depth].code == st[keep].code) ++keep;
  st.resize(keep);
  std::uint32_t seen[64];
  unsigned nseen = 0;
  for (const auto& m : st)
    if (nseen < 64 && std::find(seen, seen + nseen, m.row) == seen + nseen) {
      seen[nseen++] = m.row;
      p.sink().row(m.row).total += sample_weight(e);
    }
  if (!st.empty() && nops == 0) p.sink().row(st.back().row).self += sample_weight(e);
  return !st.empty();
}

// The row name of an interned key: a module's resolved name, "" for none.
std::string OpAggregator::State::row_key(std::uint32_t pid, std::uint32_t id) {
  auto module = module_of_row.find(id);
  if (module == module_of_row.end()) return names[id];
  auto& named = procs[pid].module_names;
  auto it = named.find(module->second);
  return it == named.end() ? std::string() : it->second;
}

}  // namespace lt
