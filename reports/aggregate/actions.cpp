#include "reports/aggregate/actions.h"

#include <array>
#include <tuple>
#include <unordered_map>

#include "reports/aggregate/step_batches.h"
#include "user/model/action_name.h"
#include "user/model/record_dispatch.h"
#include "user/text/utf8_text.h"

namespace lt {

const char* stage_title(Stage s) {
  switch (s) {
    case Stage::fit:
      return "FIT";
    case Stage::validate:
      return "VALIDATE";
    case Stage::test:
      return "TEST";
    case Stage::predict:
      return "PREDICT";
    default:
      return "";
  }
}

const char* stage_name(Stage s) {
  switch (s) {
    case Stage::fit:
      return "fit";
    case Stage::validate:
      return "validate";
    case Stage::test:
      return "test";
    case Stage::predict:
      return "predict";
    default:
      return "";
  }
}

std::size_t ProcessActions::total_calls() const {
  std::size_t n = 0;
  for (auto& a : actions) n += a.calls;
  return n;
}

std::uint64_t ProcessActions::lost_action_records() const {
  std::uint64_t n = 0;
  for (auto& l : losses) {
    bool action = l.kind == LT_EV_ACTION_BEGIN || l.kind == LT_EV_ACTION_END || l.kind == LT_EV_FETCH_BEGIN ||
                  l.kind == LT_EV_DIRECT_START || l.kind == LT_EV_DIRECT_STOP;
    if ((action && l.cause == LT_LOSS_RINGBUF_FULL) || l.cause == LT_LOSS_UNREADABLE) n += l.count;
  }
  return n;
}

namespace {

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

// What an action name says about the stage a Trainer is running.
// Returns none when the name is not decisive.
Stage stage_marker(const std::string& n, Stage current) {
  if (ends_with(n, ".on_fit_start") || n == "run_training_epoch" || n == "run_training_batch" ||
      ends_with(n, ".training_step") || ends_with(n, ".on_train_start"))
    return Stage::fit;
  if (ends_with(n, ".on_test_start") || ends_with(n, ".test_step")) return Stage::test;
  if (ends_with(n, ".on_predict_start") || ends_with(n, ".predict_step")) return Stage::predict;
  if ((ends_with(n, ".on_validation_start") || ends_with(n, ".validation_step")) && current != Stage::fit)
    return Stage::validate;
  return Stage::none;
}

bool is_optimizer_hook(const std::string& n) {
  return ends_with(n, ".on_before_optimizer_step");
}
bool is_module_optimizer_step(const std::string& n) {
  return n.rfind("[LightningModule]", 0) == 0 && ends_with(n, ".optimizer_step");
}

// A new Trainer entry point (fit/validate/test/predict) runs these first.
bool run_starts(const std::string& n) {
  return n.rfind("[LightningModule]", 0) == 0 && ends_with(n, ".configure_callbacks");
}

struct PerProcess {
  ProcessActions out;
  std::unordered_map<std::string, std::size_t> index;  // name -> actions[i]
  struct Open {
    std::string name;
    std::uint64_t ts;
  };
  std::unordered_map<std::uint64_t, Open> open_gen;  // generator frame -> start
  // Per thread, the generator actions it began and has not ended, in
  // begin order (outermost first); open_where finds one by key.  Maps, not
  // vectors: a corrupt stream with many open actions stays O(n log n).
  struct OnThread {
    std::string name;
    std::uint64_t ts;
    ActionOrigin origin = {};
  };
  std::unordered_map<std::uint32_t, std::map<std::uint64_t, OnThread>> thread_open;       // tid -> seq -> action
  std::unordered_map<std::uint64_t, std::pair<std::uint32_t, std::uint64_t>> open_where;  // key -> (tid, seq)
  std::uint64_t next_seq = 0;
  std::vector<std::string> begin_order;
  std::unordered_map<std::string, bool> begun;
  std::map<std::pair<std::uint32_t, std::string>, std::uint64_t> open_direct;  // (tid, name)
  // Windows whose end no probe sees (a dataloader fetch; a manual-
  // optimization optimizer_step): each closes at the next action event of
  // its thread.  tid -> window.
  struct Inferred {
    std::string name;
    std::uint64_t ts;
    bool spans_optimizer_hooks;  // optimizer_step: its own hooks do not close it
    ActionOrigin origin = {};    // fetches: the frame calling next(CombinedLoader)
  };
  std::unordered_map<std::uint32_t, Inferred> pending;
  std::unordered_map<std::uint32_t, int> automatic_optimizer_steps;  // tid -> open [LightningModule]*.optimizer_step
  // Which loop fetches next (Lightning's stock loop names), from the hooks
  // seen so far on this process: see fetch_context().
  const char* fetch_name = kTrainFetch;
  bool stage_locked_fit = false;

  bool keep_intervals = false;
  bool after_gap = false;       // a damaged range passed: stops without a start may have lost it there
  std::uint64_t gaps_seen = 0;  // of State::gaps: applied lazily, so a gap costs O(1), not O(processes)
  std::uint64_t completed = 0;
  std::string last_completed;
  std::array<CompletedSpan, kRecentSpans> recent;  // the last completions, by completed % kRecentSpans

  void record(const std::string& name, std::uint64_t begin, std::uint64_t end, std::uint32_t tid,
              bool estimated = false) {
    recent[completed % kRecentSpans] = {name, begin, end >= begin ? end : begin, tid};
    ++completed;
    last_completed = name;
    auto [it, fresh] = index.try_emplace(name, out.actions.size());
    if (fresh) out.actions.push_back({name});
    out.actions[it->second].add(end >= begin ? (end - begin) / 1e9 : 0.0);
    if (keep_intervals)
      out.intervals.push_back(
          {static_cast<std::uint32_t>(it->second), tid, begin, end >= begin ? end : begin, estimated});
  }

  void note_name(const std::string& n) {
    if (run_starts(n)) {
      out.stage = Stage::none;
      stage_locked_fit = false;
    }
    if (const char* f = fetch_context(n)) fetch_name = f;
    Stage s = stage_marker(n, out.stage);
    if (s != Stage::none && !(stage_locked_fit && s == Stage::validate)) {
      out.stage = s;
      stage_locked_fit = s == Stage::fit;
    }
  }

  // An action event (named `n`) on a thread ends that thread's inferred window.
  void close_pending(std::uint32_t tid, std::uint64_t ts, const std::string& n) {
    auto it = pending.find(tid);
    if (it == pending.end()) return;
    if (it->second.spans_optimizer_hooks && is_optimizer_hook(n)) return;
    record(it->second.name, it->second.ts, ts, tid, true);
    ++out.estimated;
    pending.erase(it);
  }

  // Manual optimization: LightningOptimizer.step() times "optimizer_step"
  // with bare start()/stop() calls no probe sees, but inside it Lightning
  // always runs the on_before_optimizer_step hooks, which we do see.  Under
  // automatic optimization the same hooks run inside the
  // [LightningModule]*.optimizer_step action instead.
  void on_begin(std::uint32_t tid, std::uint64_t ts, const std::string& n) {
    if (is_module_optimizer_step(n)) ++automatic_optimizer_steps[tid];
    if (is_optimizer_hook(n) && automatic_optimizer_steps[tid] == 0 && !pending.count(tid))
      pending[tid] = {"optimizer_step", ts, true};
  }
  void open_on_thread(std::uint32_t tid, std::uint64_t key, const std::string& name, std::uint64_t ts) {
    forget_on_thread(key);  // a key reused before its end was seen
    const std::uint64_t seq = next_seq++;
    thread_open[tid].emplace(seq, OnThread{name, ts});
    open_where[key] = {tid, seq};
  }

  void forget_on_thread(std::uint64_t key) {
    auto it = open_where.find(key);
    if (it == open_where.end()) return;
    auto t = thread_open.find(it->second.first);
    if (t != thread_open.end()) {
      t->second.erase(it->second.second);
      if (t->second.empty()) thread_open.erase(t);
    }
    open_where.erase(it);
  }

  // The process is gone or runs another program: none of its threads is
  // inside an action any more (still-open ones stay counted in open_gen).
  void forget_threads(bool new_program) {
    thread_open.clear();
    open_where.clear();
    if (new_program) pending.clear();
  }

  // Records were lost here: every open action, generator, direct or
  // inferred, is dropped (its end may be in the gap, or its key reused
  // there) and counted.
  void gap() {
    out.lost_to_damage += open_gen.size() + open_direct.size() + pending.size();
    open_gen.clear();
    open_direct.clear();
    pending.clear();
    automatic_optimizer_steps.clear();
    forget_threads(true);
    after_gap = true;
  }

  void unmatched_stop() { ++(after_gap ? out.lost_to_damage : out.unmatched_stops); }

  std::pair<std::string, ActionOrigin> innermost(std::uint32_t tid) const {
    const OnThread* top = nullptr;
    if (auto it = thread_open.find(tid); it != thread_open.end() && !it->second.empty())
      top = &it->second.rbegin()->second;
    auto p = pending.find(tid);
    // An inferred window (a fetch, a manual optimizer_step) that began
    // after the innermost generator action is inside it.
    if (p != pending.end() && (!top || p->second.ts >= top->ts)) return {p->second.name, p->second.origin};
    return top ? std::pair{top->name, top->origin} : std::pair<std::string, ActionOrigin>{};
  }

  // ACTION_ORIGIN follows the BEGIN / FETCH_BEGIN it describes on the same thread.
  void set_origin(std::uint32_t tid, const lt_action_origin_event& e) {
    const ActionOrigin o{e.code, e.checksum, e.depth};
    if (e.begin_kind == LT_EV_FETCH_BEGIN) {
      auto p = pending.find(tid);
      if (p != pending.end() && !p->second.spans_optimizer_hooks) p->second.origin = o;
      return;
    }
    auto w = open_where.find(e.key);
    if (w == open_where.end() || w->second.first != tid) return;
    auto t = thread_open.find(tid);
    if (t == thread_open.end()) return;
    if (auto a = t->second.find(w->second.second); a != t->second.end()) a->second.origin = o;
  }

  void on_end(std::uint32_t tid, const std::string& n) {
    if (is_module_optimizer_step(n) && automatic_optimizer_steps[tid] > 0) --automatic_optimizer_steps[tid];
  }
};

}  // namespace

struct ActionAggregator::State {
  ActionsReport rep;
  bool keep_intervals = false;
  std::uint64_t last_ts = 0;
  std::map<std::uint32_t, PerProcess> procs;
  ActionNameAssembler names;  // long names: ACTION_NAME_TAILs + their BEGIN
  std::vector<std::uint32_t> order;
  std::uint64_t window_begin = 0, window_end = 0;

  std::uint64_t gaps = 0;  // damaged ranges passed so far

  PerProcess& proc(std::uint32_t pid) {
    auto [it, fresh] = procs.try_emplace(pid);
    if (fresh) {
      order.push_back(pid);
      it->second.keep_intervals = keep_intervals;
      it->second.out.meta.pid = pid;
      it->second.out.window_begin_ns = window_begin;
      it->second.after_gap = gaps > 0;
      it->second.gaps_seen = gaps;
    }
    return catch_up(it->second);
  }
  PerProcess& catch_up(PerProcess& pp) const {
    if (pp.gaps_seen != gaps) {
      pp.gap();
      pp.gaps_seen = gaps;
    }
    return pp;
  }
};

ActionAggregator::ActionAggregator(bool keep_intervals) : s_(std::make_unique<State>()) {
  s_->keep_intervals = keep_intervals;
}
ActionAggregator::~ActionAggregator() = default;

void ActionAggregator::add(const lt_event_header& h, const std::byte* p) {
  auto& rep = s_->rep;
  if (h.ts_ns > s_->last_ts) s_->last_ts = h.ts_ns;
  auto proc = [this](std::uint32_t pid) -> PerProcess& { return s_->proc(pid); };
  visit_record(h, p,
               overloaded{
                   [&](const lt_event_header& h, const lt_window_event& w) {
                     (w.begin ? s_->window_begin : s_->window_end) = h.ts_ns;
                   },
                   [&](const lt_event_header& h, const lt_proc_info_event& e) {
                     auto& pp = proc(h.pid);
                     auto& m = pp.out.meta;
                     m.ppid = e.ppid;
                     m.rank = e.rank;
                     m.local_rank = e.local_rank;
                     m.world_size = e.world_size;
                     m.py_major = e.py_major;
                     m.py_minor = e.py_minor;
                     m.flags = e.flags;
                     m.comm.assign(e.comm, strnlen(e.comm, sizeof e.comm));
                     m.cmdline.assign(e.cmdline, strnlen(e.cmdline, sizeof e.cmdline));
                     m.torch_version.assign(e.torch_version, strnlen(e.torch_version, sizeof e.torch_version));
                     // A PROC_ENV, if the process has one, follows its PROC_INFO: a new
                     // PROC_INFO (after an exec) starts without the old image's.
                     m.hostname.clear();
                     m.slurm_job_id.clear();
                     m.master_addr.clear();
                     m.group_rank = m.slurm_nodeid = -1;
                     m.master_port = 0;
                     m.container_flags = m.ns_pid = 0;
                     m.container_host.clear();
                     m.container_id.clear();
                     m.anchor_index = -1;
                     if (pp.out.window_begin_ns == 0 || h.ts_ns > pp.out.window_begin_ns)
                       pp.out.window_begin_ns = h.ts_ns;
                   },
                   [&](const lt_event_header& h, const lt_step_base_event& e) {
                     auto& m = proc(h.pid).out.meta;
                     m.anchor_index = e.index;
                     m.anchor_begin_ns = e.begin_ns;
                     m.anchor_end_ns = e.end_ns;
                   },
                   [&](const lt_event_header& h, const lt_proc_container_event& e) {
                     auto& m = proc(h.pid).out.meta;
                     m.container_flags = e.flags | 0x80000000u;  // seen, even with no namespace of its own (an id only)
                     m.ns_pid = e.ns_pid;
                     m.container_host.assign(e.hostname, strnlen(e.hostname, sizeof e.hostname));
                     m.container_id.assign(e.container_id, strnlen(e.container_id, sizeof e.container_id));
                   },
                   [&](const lt_event_header& h, const lt_proc_env_event& e) {
                     auto& m = proc(h.pid).out.meta;
                     m.hostname.assign(e.hostname, strnlen(e.hostname, sizeof e.hostname));
                     m.slurm_job_id.assign(e.slurm_job_id, strnlen(e.slurm_job_id, sizeof e.slurm_job_id));
                     m.master_addr.assign(e.master_addr, strnlen(e.master_addr, sizeof e.master_addr));
                     m.group_rank = e.group_rank;
                     m.slurm_nodeid = e.slurm_nodeid;
                     m.master_port = e.master_port;
                     // PROC_INFO carries the same labels; these fill a trace whose
                     // PROC_INFO is missing or older.
                     if (m.rank < 0) m.rank = e.rank;
                     if (m.local_rank < 0) m.local_rank = e.local_rank;
                     if (m.world_size < 0) m.world_size = e.world_size;
                   },
                   [&](const lt_event_header& h, const lt_proc_event& e) {
                     if (h.kind == LT_EV_PROC_EXIT) {
                       auto& pp = proc(h.pid);
                       pp.out.exited = true;
                       pp.out.window_end_ns = h.ts_ns;
                       pp.forget_threads(false);
                     } else if (h.kind == LT_EV_PROC_EXEC) {
                       if (auto it = s_->procs.find(e.child_pid); it != s_->procs.end())
                         s_->catch_up(it->second).forget_threads(true);
                     }
                   },
                   [&](const lt_event_header&, const lt_host_info_event& hi) {
                     rep.host.hostname.assign(hi.hostname, strnlen(hi.hostname, sizeof hi.hostname));
                     rep.host.monotonic_ns = hi.monotonic_ns;
                     rep.host.realtime_ns = hi.realtime_ns;
                   },
                   [&](const lt_event_header& h, const lt_clock_sync_event& cs) {
                     if (cs.delay_ns > (1ull << 62)) return;
                     rep.host.clock_syncs.push_back(
                         {h.ts_ns, cs.offset_ns, static_cast<std::int64_t>(cs.delay_ns), cs.samples, cs.phase != 0,
                          std::string(cs.reference, strnlen(cs.reference, sizeof cs.reference))});
                   },
                   [&](const lt_event_header& h, const lt_proc_drops_event& d) {
                     RecordLoss l{d.lost_kind, d.cause, d.count};
                     if (d.cause == LT_LOSS_UNREADABLE) rep.unreadable += d.count;
                     (h.pid ? proc(h.pid).out.losses : rep.unattributed).push_back(l);
                   },
                   [&](const lt_event_header&, const lt_drops_event& d) {
                     rep.ringbuf_drops += d.ringbuf_full;
                     rep.read_faults += d.read_faults;
                   },
                   [&](const lt_event_header& h, const lt_action_name_tail_event& t) { s_->names.add_tail(h, t); },
                   [&](const lt_event_header& h, const lt_action_origin_event& e) { proc(h.pid).set_origin(h.tid, e); },
                   [&](const lt_event_header& h, const lt_action_event& e) { on_action(h, e); },
               });
}

// The five action kinds: Lightning's profiler hooks, direct start/stop
// calls, and dataloader fetches (docs/design-actions.md).
void ActionAggregator::on_action(const lt_event_header& h, const lt_action_event& e) {
  auto proc = [this](std::uint32_t pid) -> PerProcess& { return s_->proc(pid); };
  auto& pp = proc(h.pid);
  auto name_of = [&](const lt_action_event& ev) {
    auto n = s_->names.name(h, ev);
    if (!n.complete) ++pp.out.truncated_names;
    return std::move(n.text);
  };
  switch (h.kind) {
    case LT_EV_ACTION_BEGIN: {
      std::string name = name_of(e);
      if ((e.flags & LT_ACT_NAME_UNREADABLE) && name.empty()) name = "<unreadable action name>";
      pp.close_pending(h.tid, h.ts_ns, name);
      pp.note_name(name);
      pp.on_begin(h.tid, h.ts_ns, name);
      pp.open_gen[e.key] = {name, h.ts_ns};
      pp.open_on_thread(h.tid, e.key, name, h.ts_ns);
      if (!pp.begun[name]) {
        pp.begun[name] = true;
        pp.begin_order.push_back(name);
      }
      break;
    }
    case LT_EV_ACTION_END: {
      auto it = pp.open_gen.find(e.key);
      pp.close_pending(h.tid, h.ts_ns, it == pp.open_gen.end() ? std::string() : it->second.name);
      if (it == pp.open_gen.end()) {
        pp.unmatched_stop();
        break;
      }
      pp.record(it->second.name, it->second.ts, h.ts_ns, h.tid);
      pp.on_end(h.tid, it->second.name);
      pp.open_gen.erase(it);
      pp.forget_on_thread(e.key);
      break;
    }
    case LT_EV_DIRECT_START: {
      std::string name = name_of(e);
      pp.close_pending(h.tid, h.ts_ns, name);
      pp.note_name(name);
      pp.open_direct[{h.tid, name}] = h.ts_ns;
      break;
    }
    case LT_EV_DIRECT_STOP: {
      std::string name = name_of(e);
      pp.close_pending(h.tid, h.ts_ns, name);
      auto it = pp.open_direct.find({h.tid, name});
      if (it == pp.open_direct.end()) {
        pp.unmatched_stop();
        break;
      }
      pp.record(name, it->second, h.ts_ns, h.tid);
      pp.open_direct.erase(it);
      break;
    }
    case LT_EV_FETCH_BEGIN:
      pp.close_pending(h.tid, h.ts_ns, std::string());
      pp.pending[h.tid] = {pp.fetch_name, h.ts_ns, false};
      break;
  }
}

void ActionAggregator::gap() {
  ++s_->gaps;
  s_->rep.damaged_ranges += 1;
}

ActionsReport ActionAggregator::finish() {
  auto& rep = s_->rep;
  // A recording cut short (recorder killed) has no detach record: the
  // window then ends at the last event seen.
  rep.complete = s_->window_end != 0;
  if (!rep.complete) s_->window_end = s_->last_ts;
  rep.window_begin_ns = s_->window_begin;
  auto& procs = s_->procs;
  auto& window_end = s_->window_end;
  auto& order = s_->order;
  for (auto pid : order) {
    auto& pp = s_->catch_up(procs[pid]);
    if (pp.out.window_end_ns == 0) pp.out.window_end_ns = window_end;
    pp.out.open_at_end = pp.open_gen.size() + pp.open_direct.size() + pp.pending.size();
    rep.processes.push_back(std::move(pp.out));
  }
  return rep;
}

std::string ActionAggregator::innermost_action(std::uint32_t pid, std::uint32_t tid) const {
  auto it = s_->procs.find(pid);
  // Nothing is open on any thread past a gap the process has not caught up with.
  if (it == s_->procs.end() || it->second.gaps_seen != s_->gaps) return std::string();
  return it->second.innermost(tid).first;
}

ActionOrigin ActionAggregator::innermost_origin(std::uint32_t pid, std::uint32_t tid) const {
  auto it = s_->procs.find(pid);
  if (it == s_->procs.end() || it->second.gaps_seen != s_->gaps) return ActionOrigin{};
  return it->second.innermost(tid).second;
}

std::uint64_t ActionAggregator::completed(std::uint32_t pid) const {
  auto it = s_->procs.find(pid);
  return it == s_->procs.end() ? 0 : it->second.completed;
}

const CompletedSpan* ActionAggregator::completed_span(std::uint32_t pid, std::uint64_t index) const {
  auto it = s_->procs.find(pid);
  if (it == s_->procs.end() || index >= it->second.completed || it->second.completed - index > kRecentSpans)
    return nullptr;
  return &it->second.recent[index % kRecentSpans];
}

std::string ActionAggregator::last_completed(std::uint32_t pid) const {
  auto it = s_->procs.find(pid);
  return it == s_->procs.end() ? std::string() : it->second.last_completed;
}

const std::vector<std::string>& ActionAggregator::begin_order(std::uint32_t pid) const {
  static const std::vector<std::string> none;
  auto it = s_->procs.find(pid);
  return it == s_->procs.end() ? none : it->second.begin_order;
}

ActionsReport aggregate_actions(const Trace& trace, bool keep_intervals) {
  ActionAggregator agg(keep_intervals);
  trace.for_each([&](const lt_event_header& h, const std::byte* p) { agg.add(h, p); });
  return agg.finish();
}

ProcessMeta with_rank_labels(const ProcessMeta& m, const ActionsReport& rep) {
  ProcessMeta out = m;
  if (out.world_size >= 0) return out;
  for (auto& q : rep.processes) {
    if (q.meta.ppid == m.pid && q.meta.world_size > 1 && q.meta.local_rank > 0) {
      out.world_size = q.meta.world_size;
      out.local_rank = 0;
      out.rank = q.meta.rank >= 0 ? q.meta.rank - q.meta.local_rank : 0;
      break;
    }
  }
  return out;
}

ProcessIndex::ProcessIndex(const ActionsReport& rep) {
  for (const auto& p : rep.processes) {
    by_pid_[p.meta.pid] = &p;  // the last of a pid, as the scans this replaces found
    if (p.meta.world_size > 1 && p.meta.local_rank > 0) ranked_child_.try_emplace(p.meta.ppid, &p);
  }
}

const ProcessActions* ProcessIndex::find(std::uint32_t pid) const {
  auto it = by_pid_.find(pid);
  return it == by_pid_.end() ? nullptr : it->second;
}

ProcessMeta ProcessIndex::with_rank_labels(const ProcessMeta& m) const {
  ProcessMeta out = m;
  if (out.world_size >= 0) return out;
  if (auto it = ranked_child_.find(m.pid); it != ranked_child_.end()) {
    const ProcessMeta& q = it->second->meta;
    out.world_size = q.world_size;
    out.local_rank = 0;
    out.rank = q.rank >= 0 ? q.rank - q.local_rank : 0;
  }
  return out;
}

std::string process_title(std::uint32_t pid, const ActionsReport* rep) {
  std::string t = "pid " + std::to_string(pid);
  if (!rep) return t;
  ProcessIndex index(*rep);
  if (const ProcessActions* pa = index.find(pid)) {
    const ProcessMeta m = index.with_rank_labels(pa->meta);
    if (m.rank >= 0) t += " rank " + std::to_string(m.rank);
    if (!m.comm.empty()) t += " (" + utf8_text(m.comm) + ")";
  }
  return t;
}

}  // namespace lt
