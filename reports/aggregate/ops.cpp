#include "reports/aggregate/ops.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "reports/aggregate/ops_state.h"
#include "reports/aggregate/sample_weight.h"
#include "user/model/record_dispatch.h"
#include "user/text/utf8_text.h"

namespace lt {

using namespace ops_detail;

namespace {

constexpr const char* kStepFunctions[] = {"training_step", "validation_step", "test_step", "predict_step"};

}  // namespace

std::string step_function_of(const std::string& action) {
  for (const char* f : kStepFunctions) {
    const std::size_t n = std::strlen(f);
    if (action.size() >= n && action.compare(action.size() - n, n, f) == 0) return f;
  }
  return "";
}

OpAggregator::OpAggregator(const ActionAggregator& actions, OpAggregatorOptions opts)
    : s_(std::make_unique<State>(actions, opts)) {}
OpAggregator::~OpAggregator() = default;

void OpAggregator::add(const lt_event_header& h, const std::byte* record) {
  auto& s = *s_;
  const bool action_end = h.kind == LT_EV_ACTION_END || h.kind == LT_EV_DIRECT_STOP;
  // A dataloader fetch has only a begin record (docs/design-actions.md); it
  // starts a batch, so the ops it runs (collate, the DataLoader's own
  // record_function) and the transfer after it are that batch's.
  const bool action_begin = h.kind == LT_EV_ACTION_BEGIN || h.kind == LT_EV_DIRECT_START || h.kind == LT_EV_FETCH_BEGIN;
  const std::uint64_t done = action_end ? s.actions.completed(h.pid) : 0;
  // The action that ended (the last completed), or that began (now the
  // innermost on its thread): batch boundaries.
  // A sample is charged to the action open on its thread ([pl][profile] self).
  const bool sample = h.kind == LT_EV_PY_SAMPLE;
  const std::string name = action_end               ? s.actions.last_completed(h.pid)
                           : action_begin || sample ? s.actions.innermost_action(h.pid, h.tid)
                                                    : std::string();
  const auto completions = s.completions_of(h);
  // The op observer reads shapes itself (OP_INPUT_SHAPES): with no probe
  // tensor counted before its first, nothing is held for the vote.
  if (s.opts.group_by_shapes && s.layout.undecided() && h.kind == LT_EV_OP_INPUT_SHAPES && !s.layout.voted())
    s.replay();
  if (s.opts.group_by_shapes && s.layout.undecided()) {
    // Until the TensorImpl layout is known, hold the stream (in order, with
    // what the action aggregator said at each record) and replay it then.
    s.held.push_back({h, std::vector<std::byte>(record, record + h.size), done, name, completions});
    visit_record(h, record, [&](const lt_event_header&, const lt_op_shapes_event& e) { s.layout.vote(e); });
    if (!s.layout.undecided() || s.held.size() >= kMaxHeld) s.replay();
    return;
  }
  s.process(h, record, done, name, completions);
}

void OpAggregator::State::replay() {
  layout.decide();
  auto pending = std::move(held);
  held.clear();
  for (auto& r : pending) process(r.h, r.bytes.data(), r.done, r.last, r.completions);
}

// The row id of an (op, input shapes) pair.
std::uint32_t OpAggregator::State::shaped_id(std::uint32_t op, const lt_op_shapes_event& e) {
  std::string key = (op < op_names.size() && !op_names[op].empty() ? op_names[op] : "op#" + std::to_string(op));
  key += '\t';
  if (op >= op_args.size() || op_args[op].empty()) return intern(key);  // schema unknown: no shapes
  return intern(key + layout.shapes(op_args[op], e));
}

std::uint32_t OpAggregator::State::name_id_of(std::uint32_t op) {
  if (op < op_name_id.size() && op_name_id[op] != UINT32_MAX) return op_name_id[op];
  // An op whose name record is missing (a damaged trace): still a row.
  return intern(op < op_names.size() && !op_names[op].empty() ? op_names[op] : "op#" + std::to_string(op));
}

std::uint32_t OpAggregator::State::intern(const std::string& name) {
  auto [it, fresh] = name_ids.try_emplace(name, static_cast<std::uint32_t>(names.size()));
  if (fresh) names.push_back(name);
  return it->second;
}

OpAggregator::State::Proc& OpAggregator::State::proc(std::uint32_t pid) {
  auto [it, fresh] = procs.try_emplace(pid);
  if (fresh) {
    order.push_back(pid);
    it->second.boundaries.emplace_back(0, it->second.unknown);  // until the first boundary
  }
  return it->second;
}

void OpAggregator::State::process(const lt_event_header& h, const std::byte* record, std::uint64_t done,
                                  const std::string& action, const std::vector<Completion>& completions) {
  // Before the batch boundaries below: an action ends in the window it ran in.
  charge_completions(h, completions);
  switch (h.kind) {  // the action records count by what the action aggregator made of them
    case LT_EV_ACTION_BEGIN:
    case LT_EV_DIRECT_START:
    case LT_EV_FETCH_BEGIN: {
      auto it = procs.find(h.pid);
      if (it != procs.end())
        action_began(it->second, action);
      else if (batch_hook_of(action).role != BatchRole::none)  // steps count from the first, ops or not
        action_began(proc(h.pid), action);
      note_boundary(h.pid, h.ts_ns);
      note_innermost(h);
      return;
    }
    case LT_EV_ACTION_END:
    case LT_EV_DIRECT_STOP: {
      auto& seen = completed_seen[h.pid];
      if (done == seen) return;  // a stop that completed nothing (its start was before the attach)
      seen = done;
      auto it = procs.find(h.pid);
      if (it != procs.end())
        action_ended(it->second, action);
      else if (batch_hook_of(action).role != BatchRole::none)
        action_ended(proc(h.pid), action);
      note_boundary(h.pid, h.ts_ns);
      note_innermost(h);
      return;
    }
    default:
      break;
  }
  visit_record(h, record,
               overloaded{
                   [&](const lt_event_header&, const lt_sampler_info_event& e) {
                     out.period_ns = e.period_ns;
                     out.rate_hz = e.rate_hz;
                   },
                   [&](const lt_event_header&, const lt_op_name_event& e) { on_op_name(e); },
                   [&](const lt_event_header&, const lt_op_input_shapes_event& e) { on_input_shapes(e); },
                   [&](const lt_event_header& h, const lt_op_event& e) { on_op(h, e.op, e.depth, nullptr); },
                   [&](const lt_event_header& h, const lt_op_shapes_event& e) { on_op(h, e.op, e.depth, &e); },
                   [&](const lt_event_header& h, const lt_op_span_event& e) { on_span(h, e); },
                   [&](const lt_event_header& h, const lt_op_observer_event& e) { on_observer(h, e); },
                   [&](const lt_event_header& h, const lt_py_sample_event& e) {
                     if (h.kind == LT_EV_PY_SAMPLE) on_sample(h, e, action);  // not the stacks of launches, allocations
                   },
                   [&](const lt_event_header& h, const lt_module_call_event& e) { on_module_call(h, e); },
                   [&](const lt_event_header& h, const lt_module_name_event& e) { on_module_name(h, e); },
                   [&](const lt_event_header& h, const lt_mem_event& e) {
                     if (h.kind == LT_EV_MEM) on_mem(h, e);
                   },
                   [&](const lt_event_header& h, const lt_proc_event&) { on_proc(h); },
                   [&](const lt_event_header& h, const lt_gpu_name_event& e) { gpu_names.add(h.pid, e.n); },
                   [&](const lt_event_header& h, const lt_gpu_launch_event& e) { on_gpu_launch(h, e); },
                   [&](const lt_event_header& h, const lt_gpu_activity_event& e) { on_gpu_activity(h, e.a); },
               });
}

void OpAggregator::State::on_op_name(const lt_op_name_event& e) {
  if (e.op > 1'000'000) return;  // libtorch has ~3000 ops: a damaged record
  if (op_names.size() <= e.op) {
    op_names.resize(e.op + 1);
    op_name_id.resize(e.op + 1, UINT32_MAX);
  }
  op_names[e.op] = std::string(e.name, strnlen(e.name, sizeof e.name));
  op_name_id[e.op] = intern(op_names[e.op]);
  if (op_args.size() <= e.op) op_args.resize(e.op + 1);
  op_args[e.op].assign(e.arg_reg, e.arg_reg + std::min<std::size_t>(e.nargs, LT_OP_ARGS_MAX));
}

void OpAggregator::State::on_input_shapes(const lt_op_input_shapes_event& e) {
  if (e.op > 1'000'000) return;  // a damaged record
  if (op_shapes.size() <= e.op) op_shapes.resize(e.op + 1);
  op_shapes[e.op] = utf8_text(std::string_view(e.text, std::min<std::size_t>(e.len, sizeof e.text)));
  if (e.op < span_rows.size()) span_rows[e.op] = UINT32_MAX;
}

// An op entered (`shapes`: its tensor arguments, with --group-by-input-shapes).
void OpAggregator::State::on_op(const lt_event_header& h, std::uint32_t op, std::uint16_t depth,
                                const lt_op_shapes_event* shapes) {
  auto& p = proc(h.pid);
  p.last_ts = std::max(p.last_ts, h.ts_ns);
  ++p.calls;
  ++p.sink().probe_calls;
  const std::uint32_t base = name_id_of(op);  // torch merges by name, shapes aside
  const std::uint32_t id = shapes && opts.group_by_shapes ? shaped_id(op, *shapes) : base;
  if (depth == 0) {  // deeper than BPF tracks: counted, not nested
    ++p.too_deep;
    p.sink().row(id).calls++;
    return;
  }
  auto& st = p.running[h.tid];
  close_from(p, st, depth - 1u, h.ts_ns);
  // torch's EventList drops an op whose only child has its own name
  // (aten::sum calling aten::sum.dim_IntList shows as one call); the
  // child is counted only once a second child shows it was not alone.
  bool dup = false;
  if (!st.empty() && st.size() + 1 == depth) {
    auto& parent = st.back();
    ++parent.children;
    if (parent.children == 1 && parent.base == base) {
      dup = parent.first_child_dup = true;
      parent.first_child_row = id;
    } else if (parent.children == 2 && parent.first_child_dup) {
      parent.first_child_dup = false;
      p.sink().row(parent.first_child_row).calls++;
    }
  }
  if (!dup) p.sink().row(id).calls++;
  std::size_t interval = SIZE_MAX;
  if (opts.keep_intervals && st.size() + 1 == depth) {
    if (out.intervals.size() < kMaxIntervals) {
      interval = out.intervals.size();
      out.intervals.push_back({h.pid, h.tid, op, depth, h.ts_ns, h.ts_ns});
    } else {
      ++out.intervals_dropped;
    }
  }
  // Records lost (ring buffer full) leave the depth ahead of what we
  // hold: the op is counted, its nesting is unknown.
  // A merged child's samples go to its parent's row, as torch folds the
  // child's time into the parent.
  if (st.size() + 1 == depth) st.push_back({dup ? st.back().name : id, base, 0, false, id, interval});
}

// A stack sample: its ops' self and total (and its module calls').
void OpAggregator::State::on_sample(const lt_event_header& h, const lt_py_sample_event& e, const std::string& action) {
  auto it = procs.find(h.pid);
  if (it == procs.end()) return;  // no op seen yet in this process
  auto& p = it->second;
  p.last_ts = std::max(p.last_ts, h.ts_ns);
  const std::uint16_t nops = std::min<std::uint16_t>(e.nops, LT_OPS_DEPTH);
  const std::uint32_t* ops = e.ops;
  const std::uint64_t w = sample_weight(e);  // periods, as every count below
  p.sink().samples += w;
  if (e.flags & LT_SAMPLE_IN_PROBE) {
    // Time in our own probe handlers is our overhead: charging it to
    // the op being entered would inflate tiny ops.
    p.sink().in_probe += w;
    return;
  }
  // A sample an op or a module call holds is not the action's self
  // (torch: a record's self leaves out its children's time).
  const bool in_module = charge_modules(p, h.tid, e, nops);
  if ((nops > 0 || in_module) && !action.empty()) p.covered_samples[{h.tid, action}] += w;
  if (auto r = p.running.find(h.tid); r != p.running.end()) close_from(p, r->second, nops, h.ts_ns);
  if (nops == 0) return;
  // Grouped by shapes, a row is an (op, shapes) pair: the records'
  // view of the running ops has it (BPF's has only op indexes).
  const std::vector<Proc::Running>* run = nullptr;
  if (opts.group_by_shapes)
    if (auto r = p.running.find(h.tid); r != p.running.end() && r->second.size() == nops) run = &r->second;
  auto id_at = [&](unsigned i) { return run ? (*run)[i].name : name_id_of(ops[i]); };
  std::uint32_t seen[LT_OPS_DEPTH];
  unsigned nseen = 0;
  for (unsigned i = 0; i < nops; ++i) {
    const std::uint32_t id = id_at(i);
    // Recursion (an op calling itself) counts once toward total.
    if (std::find(seen, seen + nseen, id) == seen + nseen) {
      seen[nseen++] = id;
      p.sink().row(id).total += w;
    }
  }
  p.sink().row(id_at(nops - 1)).self += w;
}

void OpAggregator::State::on_module_name(const lt_event_header& h, const lt_module_name_event& e) {
  const std::string name(e.name, strnlen(e.name, sizeof e.name));
  // Lightning's row: "[pl][module]{type}: {name}"; the root (no name) has none.
  proc(h.pid).module_names.try_emplace(
      e.module, name.empty() ? std::string()
                             : "[pl][module]" + std::string(e.type, strnlen(e.type, sizeof e.type)) + ": " + name);
}

void OpAggregator::State::on_proc(const lt_event_header& h) {
  auto it = procs.find(h.pid);
  if (it == procs.end()) return;
  if (h.kind == LT_EV_PROC_EXIT) close_all(it->second, h.ts_ns);
  // A new image: the old allocations' addresses mean nothing any more, and
  // its op times come anew (the observer or the probes, as the tracer finds).
  if (h.kind == LT_EV_PROC_EXEC) {
    auto& p = it->second;
    std::unordered_map<std::uint64_t, std::int64_t>().swap(p.cpu_sizes);
    flush_ended(p, h.pid);
    p.measured = false;
    p.innermost.clear();
    p.recent_done.clear();
    p.last_call_end.clear();
    p.covered_ns.clear();
  }
}

OpsReport OpAggregator::finish() {
  auto& s = *s_;
  if (!s.held.empty()) s.replay();
  bool overridden = false;
  for (auto pid : s.order) {
    auto& p = s.procs[pid];
    s.flush_ended(p, pid);
    s.close_all(p, p.last_ts);
    // A batch cut by the detach: to its step's table if its step function
    // ended, else with the ops outside any batch.
    s.close_batch(p);
    // Fewer than five steps of a step function: --schedule keeps them all.
    for (auto& [step, early] : p.early) {
      if (!early.empty()) overridden = true;
      for (auto& e : early) s.keep(p, e.table, e.window);
    }
    ProcessOps po;
    po.pid = pid;
    po.calls = p.calls;
    po.too_deep = p.too_deep;
    po.skipped_steps = p.skipped;
    po.mem_events = p.mem_events;
    po.frees_unknown = p.frees_unknown;
    po.mem_without_ops = p.mem_without_ops;
    po.ooms = p.ooms;
    po.measured = p.measured;
    po.observer_not_used = p.observer_not_used;
    po.observer_dropped = p.observer_dropped;
    po.observer_too_deep = p.observer_too_deep;
    // A process that ran no step function (plain torch, a DataLoader
    // worker) has one table, "records", for the attach window; in one that
    // did, the ops of no batch (epoch ends, checkpoints, set-up) get a table
    // of their own, so the tables add up to the attach window.
    p.unknown->merge_into(p.outside);
    const bool stepped = std::any_of(p.tables.begin(), p.tables.end(), [](auto& t) { return t.steps > 0; });
    if (!p.outside->empty()) {
      const std::size_t t = s.table_index(p, stepped ? kOutsideTitle : "records", "");
      p.outside->merge_into(p.tables[t].acc);
      if (!stepped) p.tables[t].steps = 1;  // "records": the attach window, one window
    }
    for (auto& t : p.tables) {
      Window& w = *t.acc;
      if (t.steps == 0 && w.empty()) continue;  // every step left out by --schedule
      OpTableData table{t.title, {}, t.steps, w.samples, w.in_probe, w.has_cuda, w.has_memory, w.has_cuda_memory};
      table.probe_calls = w.probe_calls;
      for (auto id : w.order) {
        const Acc& a = w.rows[id];
        const std::string key = s.row_key(pid, id);
        if (key.empty()) continue;  // a module with no Lightning name (the LightningModule itself)
        const auto tab = key.find('\t');
        OpRowData row{key.substr(0, tab), 0, 0, 0, tab == std::string::npos ? std::string() : key.substr(tab + 1)};
        row.calls = a.calls;
        row.self_samples = a.self;
        row.total_samples = a.total;
        row.self_cuda_ns = a.self_cuda;
        row.cuda_total_ns = a.cuda_total;
        row.cpu_exact_ns = a.cpu_exact;
        row.record_self_ns = a.record_self_ns;
        row.record_total_ns = a.record_total_ns;
        row.measured_self_ns = a.span_self_ns;
        row.measured_total_ns = a.span_total_ns;
        row.device_row = a.device;
        row.cpu_mem = a.cpu_mem;
        row.self_cpu_mem = a.self_cpu_mem;
        row.cuda_mem = a.cuda_mem;
        row.self_cuda_mem = a.self_cuda_mem;
        table.rows.push_back(std::move(row));
      }
      po.tables.push_back(std::move(table));
    }
    bool any_rows = false;
    for (auto& t : po.tables) any_rows |= !t.rows.empty();
    if (any_rows) s.out.processes.push_back(std::move(po));
  }
  if (s.opts.schedule && overridden)
    s.out.notes.emplace_back(
        "The PyTorch Profiler default schedule will be overridden as there is not enough steps to properly record "
        "traces.");
  s.out.names = s.op_names;
  return std::move(s.out);
}

}  // namespace lt
