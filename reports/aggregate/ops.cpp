#include "reports/aggregate/ops.h"

#include "reports/aggregate/gpu_names.h"
#include "reports/gpu/kernel_names.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>

namespace lt {

namespace {

constexpr std::size_t kMaxIntervals = 4'000'000;  // ~160 MB of timeline at most
constexpr std::size_t kMaxHeld = 200'000;         // records held while the TensorImpl layout is unknown

// Does a TensorImpl hold a contiguous tensor's SizesAndStrides at word k of
// the captured words: ndim (1..5), its sizes, zeros in the unused inline
// size slots, then contiguous strides?  The pattern is specific enough to
// find the field in any torch build from a few tensors.
bool sizes_at(const std::uint64_t* w, int k) {
  if (k < 0 || k + 11 > LT_SHAPE_WORDS) return false;
  const std::uint64_t n = w[k];
  if (n < 1 || n > 5) return false;
  for (std::uint64_t i = 0; i < 5; ++i) {
    const std::uint64_t size = w[k + 1 + i];
    if (i < n ? (size < 1 || size > (1ull << 40)) : size != 0) return false;
  }
  const std::uint64_t* stride = w + k + 6;
  if (stride[n - 1] != 1) return false;
  for (std::uint64_t i = n - 1; i-- > 0;)
    if (stride[i] != stride[i + 1] * w[k + 2 + i]) return false;
  return true;
}
constexpr const char* kStepFunctions[] = {"training_step", "validation_step", "test_step", "predict_step"};

struct Acc {
  std::uint64_t calls = 0, self = 0, total = 0;
  std::uint64_t self_cuda = 0, cuda_total = 0, cpu_exact = 0;
  bool device = false;
};

// kineto's names for copies in the op table.
const char* copy_row_name(const lt_gpu_activity& a) {
  if (a.kind == LT_GPU_MEMSET) return "Memset (Device)";
  switch (a.copy_kind) {
    case 1: return "Memcpy HtoD";
    case 2: return "Memcpy DtoH";
    case 8: return "Memcpy DtoD";
    case 10: return "Memcpy PtoP";
    default: return "Memcpy";
  }
}

// One profiler step of one process: op rows by name id, first-call order.
struct Window {
  std::unordered_map<std::uint32_t, Acc> rows;
  std::vector<std::uint32_t> order;
  std::uint64_t samples = 0, in_probe = 0;
  bool has_cuda = false;
  Acc& row(std::uint32_t name_id) {
    auto [it, fresh] = rows.try_emplace(name_id);
    if (fresh) order.push_back(name_id);
    return it->second;
  }
  bool empty() const { return rows.empty() && samples == 0; }
};

// A window once it is over: it has a place among the process's windows
// (seq) and a table (its title).  Kept only while a GPU launch made in it
// may still bring kernel times (the launches hold it); the window's rows
// themselves are already folded into its table.
struct WindowRef {
  bool closed = false;
  std::string title;
  std::uint64_t seq = 0;
  bool scheduled = true;       // counted by --schedule (not a wait/warmup step)
  std::uint32_t next_pos = 0;  // position of a row the window gains after closing
};

// One table as its windows are folded in as they end, so memory does not
// grow with the number of steps.  Rows keep where they first appeared
// (window, position in it): sorted by that, they come out in the order of
// folding every window at the end, even when a late kernel adds a row to a
// window already folded.
struct TableAcc {
  std::uint64_t first = 0;  // the first window folded in: table order
  std::uint64_t steps = 0, samples = 0, in_probe = 0;
  bool has_cuda = false;
  struct Row {
    Acc acc;
    std::uint64_t window;
    std::uint32_t pos;
  };
  std::unordered_map<std::uint32_t, Row> rows;
  Acc& row(std::uint32_t id, std::uint64_t window, std::uint32_t pos) {
    auto [it, fresh] = rows.try_emplace(id, Row{{}, window, pos});
    if (!fresh && std::pair(window, pos) < std::pair(it->second.window, it->second.pos)) {
      it->second.window = window;
      it->second.pos = pos;
    }
    return it->second.acc;
  }
};

void add_acc(Acc& to, const Acc& a) {
  to.calls += a.calls;
  to.self += a.self;
  to.total += a.total;
  to.self_cuda += a.self_cuda;
  to.cuda_total += a.cuda_total;
  to.cpu_exact += a.cpu_exact;
  to.device |= a.device;
}

}  // namespace

std::string step_function_of(const std::string& action) {
  for (const char* f : kStepFunctions) {
    const std::size_t n = std::strlen(f);
    if (action.size() >= n && action.compare(action.size() - n, n, f) == 0) return f;
  }
  return "";
}

struct OpAggregator::State {
  const ActionAggregator& actions;
  OpAggregatorOptions opts;
  // --group-by-input-shapes: word of TensorImpl's ndim among the captured
  // words (-1: not known yet), found by vote over the first tensors seen.
  int layout = -1;
  bool layout_given_up = false;
  int votes[LT_SHAPE_WORDS] = {};
  struct Held {
    lt_event_header h;
    std::vector<std::byte> bytes;
    std::uint64_t done;
    std::string last;
  };
  std::vector<Held> held;
  std::vector<std::vector<std::int8_t>> op_args;  // op index -> per schema argument, tensor register or -1
  void process(const lt_event_header& h, const std::byte* record, std::uint64_t done, const std::string& last);
  void vote(const std::byte* record) {
    lt_op_shapes_event e;
    std::memcpy(&e, record, sizeof e);
    for (unsigned r = 0; r < LT_SHAPE_REGS; ++r)
      if (e.tensors & (1u << r))
        for (int k = 0; k < LT_SHAPE_WORDS; ++k) votes[k] += sizes_at(e.impl[r], k);
    int best = 0, second = 0;
    for (int k = 1; k < LT_SHAPE_WORDS; ++k)
      if (votes[k] > votes[best]) best = k;
    for (int k = 0; k < LT_SHAPE_WORDS; ++k)
      if (k != best) second = std::max(second, votes[k]);
    if (votes[best] >= 8 && votes[best] >= 4 * second) layout = best;
  }
  // Decides with what there is (the stream ended or held too much), then
  // processes the held records in order.
  void replay() {
    if (layout < 0) {
      int best = 0;
      for (int k = 1; k < LT_SHAPE_WORDS; ++k)
        if (votes[k] > votes[best]) best = k;
      if (votes[best] > 0)
        layout = best;
      else
        layout_given_up = true;
    }
    auto pending = std::move(held);
    held.clear();
    for (auto& r : pending) process(r.h, r.bytes.data(), r.done, r.last);
  }
  // The row id of an (op, input shapes) pair, torch's format: one entry per
  // schema argument, a tensor's sizes or [].
  std::uint32_t shaped_id(std::uint32_t op, const std::byte* record) {
    lt_op_shapes_event e;
    std::memcpy(&e, record, sizeof e);
    std::string key = (op < op_names.size() && !op_names[op].empty() ? op_names[op] : "op#" + std::to_string(op));
    key += '\t';
    if (op >= op_args.size() || op_args[op].empty()) return intern(key);  // schema unknown: no shapes
    key += '[';
    bool first = true;
    for (std::int8_t reg : op_args[op]) {
      key += first ? "[" : ", [";
      first = false;
      if (reg >= 0 && reg < LT_SHAPE_REGS && (e.tensors & (1u << reg)) && layout >= 0) {
        const std::uint64_t* w = e.impl[reg] + layout;
        if (w[0] > 5) {
          key += "...";  // sizes out of line (more than 5 dims): not captured
        } else {
          for (std::uint64_t i = 0; i < w[0] && layout + 1 + static_cast<int>(i) < LT_SHAPE_WORDS; ++i)
            key += (i ? ", " : "") + std::to_string(w[1 + i]);
        }
      }
      key += ']';
    }
    key += ']';
    return intern(key);
  }
  std::vector<std::string> op_names;      // op index -> name
  std::vector<std::uint32_t> op_name_id;  // op index -> name id
  std::vector<std::string> names;         // name id -> name
  std::unordered_map<std::string, std::uint32_t> name_ids;
  struct Proc {
    std::uint64_t completed_seen = 0;
    Window pending;
    std::shared_ptr<WindowRef> pending_ref;  // made when a launch needs it
    std::uint64_t next_seq = 0;              // windows folded so far
    // Tables by title: every window (`all`), and with --schedule also only
    // the steps Lightning's schedule records; finish() picks per step
    // function, once it knows how many steps there were.
    std::map<std::string, TableAcc> all, scheduled;
    std::map<std::string, std::uint64_t> skipped_of;   // step function -> windows left out of `scheduled`
    std::map<std::string, std::uint64_t> windows_of;   // step function -> windows numbered so far
    std::map<std::string, std::uint64_t> steps_ended;  // ...of which closed by the step's end
    std::string last_title, last_step;
    // Per thread, the ops running as far as the records tell, outermost first.
    struct Running {
      std::uint32_t name;  // its row: the op, or the (op, input shapes) pair
      std::uint32_t base;  // the op's name alone
      std::uint32_t children;
      bool first_child_dup;           // its only child so far has its name
      std::uint32_t first_child_row;  // that child's row
      std::size_t interval;           // index in out.intervals, SIZE_MAX: none
    };
    std::unordered_map<std::uint32_t, std::vector<Running>> running;
    std::uint64_t calls = 0, too_deep = 0, last_ts = 0;
    // GPU launches by CUPTI correlation id: the window they were made in
    // and the ops running, outermost first.
    struct Launch {
      std::shared_ptr<WindowRef> window;
      std::vector<std::uint32_t> ops;
    };
    std::unordered_map<std::uint32_t, Launch> launches;
    std::vector<std::uint32_t> launch_order;
    std::size_t launch_head = 0;
    std::shared_ptr<WindowRef> pending_window() {
      if (!pending_ref) pending_ref = std::make_shared<WindowRef>();
      return pending_ref;
    }
  };
  GpuNameTable gpu_names;
  void on_gpu_launch(const lt_event_header& h, const lt_gpu_launch_event& e);
  void on_gpu_activity(const lt_event_header& h, const lt_gpu_activity& a);
  std::map<std::uint32_t, Proc> procs;
  std::vector<std::uint32_t> order;  // pids, first op seen
  OpsReport out;

  State(const ActionAggregator& a, OpAggregatorOptions o) : actions(a), opts(o) {}

  std::uint32_t name_id_of(std::uint32_t op) {
    if (op < op_name_id.size() && op_name_id[op] != UINT32_MAX) return op_name_id[op];
    // An op whose name record is missing (a damaged trace): still a row.
    return intern(op < op_names.size() && !op_names[op].empty() ? op_names[op] : "op#" + std::to_string(op));
  }
  std::uint32_t intern(const std::string& name) {
    auto [it, fresh] = name_ids.try_emplace(name, static_cast<std::uint32_t>(names.size()));
    if (fresh) names.push_back(name);
    return it->second;
  }
  Proc& proc(std::uint32_t pid) {
    auto [it, fresh] = procs.try_emplace(pid);
    if (fresh) order.push_back(pid);
    return it->second;
  }
  // The ops of a thread from position `keep` on are over at `ts`.
  void close_from(Proc&, std::vector<Proc::Running>& st, std::size_t keep, std::uint64_t ts) {
    for (std::size_t i = keep; i < st.size(); ++i)
      if (st[i].interval != SIZE_MAX)  // a damaged stream may go back in time
        out.intervals[st[i].interval].end_ns = std::max(ts, out.intervals[st[i].interval].begin_ns);
    if (st.size() > keep) st.resize(keep);
  }
  void close_all(Proc& p, std::uint64_t ts) {
    for (auto& [tid, st] : p.running)
      for (auto& r : st)
        if (r.interval != SIZE_MAX) out.intervals[r.interval].end_ns = std::max(ts, out.intervals[r.interval].begin_ns);
    p.running.clear();
  }
  // A step function ended on this process: the pending window is its step.
  void step_ended(Proc& p, const std::string& title) {
    const std::string step = step_function_of(title);
    if (step.empty()) return;
    p.steps_ended[step]++;
    fold(p, title, step, p.windows_of[step]++);
    p.last_title = title;
    p.last_step = step;
  }
  // The pending window is over: into its table(s), then a new one.
  void fold(Proc& p, const std::string& title, const std::string& step, std::uint64_t index) {
    const std::uint64_t seq = p.next_seq++;
    // Lightning: torch.profiler.schedule(wait=1, warmup=1, active=3),
    // repeating, counted per step function.
    const bool scheduled = step.empty() || index % 5 >= 2;
    auto add = [&](TableAcc& t) {
      if (t.steps == 0) t.first = seq;
      t.steps++;
      t.samples += p.pending.samples;
      t.in_probe += p.pending.in_probe;
      t.has_cuda |= p.pending.has_cuda;
      for (std::uint32_t pos = 0; pos < p.pending.order.size(); ++pos) {
        const std::uint32_t id = p.pending.order[pos];
        add_acc(t.row(id, seq, pos), p.pending.rows[id]);
      }
    };
    add(p.all[title]);
    if (opts.schedule) {
      if (scheduled)
        add(p.scheduled[title]);
      else
        ++p.skipped_of[step];
    }
    if (p.pending_ref) {
      *p.pending_ref = {true, title, seq, scheduled, static_cast<std::uint32_t>(p.pending.order.size())};
      p.pending_ref.reset();
    }
    p.pending = Window{};
  }
};

OpAggregator::OpAggregator(const ActionAggregator& actions, OpAggregatorOptions opts)
    : s_(std::make_unique<State>(actions, opts)) {}
OpAggregator::~OpAggregator() = default;

void OpAggregator::add(const lt_event_header& h, const std::byte* record) {
  auto& s = *s_;
  const bool action_end = h.kind == LT_EV_ACTION_END || h.kind == LT_EV_DIRECT_STOP;
  const std::uint64_t done = action_end ? s.actions.completed(h.pid) : 0;
  const std::string last = action_end ? s.actions.last_completed(h.pid) : std::string();
  if (s.opts.group_by_shapes && s.layout < 0 && !s.layout_given_up) {
    // Until the TensorImpl layout is known, hold the stream (in order, with
    // what the action aggregator said at each record) and replay it then.
    s.held.push_back({h, std::vector<std::byte>(record, record + h.size), done, last});
    if (h.kind == LT_EV_OP_SHAPES && h.size >= sizeof(lt_op_shapes_event)) s.vote(record);
    if (s.layout >= 0 || s.held.size() >= kMaxHeld) s.replay();
    return;
  }
  s.process(h, record, done, last);
}

void OpAggregator::State::process(const lt_event_header& h, const std::byte* record, std::uint64_t done,
                                  const std::string& last) {
  auto& s = *this;
  switch (h.kind) {
    case LT_EV_SAMPLER_INFO: {
      if (h.size < sizeof(lt_sampler_info_event)) return;
      lt_sampler_info_event e;
      std::memcpy(&e, record, sizeof e);
      s.out.period_ns = e.period_ns;
      s.out.rate_hz = e.rate_hz;
      return;
    }
    case LT_EV_OP_NAME: {
      if (h.size < sizeof(lt_op_name_event)) return;
      lt_op_name_event e;
      std::memcpy(&e, record, sizeof e);
      if (e.op > 1'000'000) return;  // libtorch has ~3000 ops: a damaged record
      if (s.op_names.size() <= e.op) {
        s.op_names.resize(e.op + 1);
        s.op_name_id.resize(e.op + 1, UINT32_MAX);
      }
      s.op_names[e.op] = std::string(e.name, strnlen(e.name, sizeof e.name));
      s.op_name_id[e.op] = s.intern(s.op_names[e.op]);
      if (s.op_args.size() <= e.op) s.op_args.resize(e.op + 1);
      s.op_args[e.op].assign(e.arg_reg, e.arg_reg + std::min<std::size_t>(e.nargs, LT_OP_ARGS_MAX));
      return;
    }
    case LT_EV_ACTION_END:
    case LT_EV_DIRECT_STOP: {
      auto it = s.procs.find(h.pid);
      if (it == s.procs.end()) {
        // No op yet in this process: still count its steps, so that
        // --schedule numbers them as Lightning does.
        if (!step_function_of(last).empty()) {
          auto& p = s.proc(h.pid);
          p.completed_seen = done;
          s.step_ended(p, last);
        }
        return;
      }
      if (done != it->second.completed_seen) {
        it->second.completed_seen = done;
        s.step_ended(it->second, last);
      }
      return;
    }
    case LT_EV_OP:
    case LT_EV_OP_SHAPES: {
      if (h.size < sizeof(lt_op_event)) return;
      lt_op_event e;
      std::memcpy(&e, record, sizeof e);  // OP_SHAPES starts like OP
      if (h.kind == LT_EV_OP_SHAPES && h.size < sizeof(lt_op_shapes_event)) return;
      auto& p = s.proc(h.pid);
      p.last_ts = std::max(p.last_ts, h.ts_ns);
      ++p.calls;
      const std::uint32_t base = s.name_id_of(e.op);  // torch merges by name, shapes aside
      const std::uint32_t id = h.kind == LT_EV_OP_SHAPES && s.opts.group_by_shapes ? s.shaped_id(e.op, record) : base;
      if (e.depth == 0) {  // deeper than BPF tracks: counted, not nested
        ++p.too_deep;
        p.pending.row(id).calls++;
        return;
      }
      auto& st = p.running[h.tid];
      s.close_from(p, st, e.depth - 1u, h.ts_ns);
      // torch's EventList drops an op whose only child has its own name
      // (aten::sum calling aten::sum.dim_IntList shows as one call); the
      // child is counted only once a second child shows it was not alone.
      bool dup = false;
      if (!st.empty() && st.size() + 1 == e.depth) {
        auto& parent = st.back();
        ++parent.children;
        if (parent.children == 1 && parent.base == base) {
          dup = parent.first_child_dup = true;
          parent.first_child_row = id;
        } else if (parent.children == 2 && parent.first_child_dup) {
          parent.first_child_dup = false;
          p.pending.row(parent.first_child_row).calls++;
        }
      }
      if (!dup) p.pending.row(id).calls++;
      std::size_t interval = SIZE_MAX;
      if (s.opts.keep_intervals && s.out.intervals.size() < kMaxIntervals && st.size() + 1 == e.depth) {
        interval = s.out.intervals.size();
        s.out.intervals.push_back({h.pid, h.tid, e.op, e.depth, h.ts_ns, h.ts_ns});
      }
      // Records lost (ring buffer full) leave the depth ahead of what we
      // hold: the op is counted, its nesting is unknown.
      // A merged child's samples go to its parent's row, as torch folds the
      // child's time into the parent.
      if (st.size() + 1 == e.depth) st.push_back({dup ? st.back().name : id, base, 0, false, id, interval});
      return;
    }
    case LT_EV_PY_SAMPLE: {
      if (h.size < sizeof(lt_py_sample_event)) return;
      auto it = s.procs.find(h.pid);
      if (it == s.procs.end()) return;  // no op seen yet in this process
      auto& p = it->second;
      p.last_ts = std::max(p.last_ts, h.ts_ns);
      std::uint16_t nops;
      std::memcpy(&nops, record + offsetof(lt_py_sample_event, nops), sizeof nops);
      nops = std::min<std::uint16_t>(nops, LT_OPS_DEPTH);
      std::uint32_t ops[LT_OPS_DEPTH];
      std::memcpy(ops, record + offsetof(lt_py_sample_event, ops), sizeof ops);
      p.pending.samples++;
      std::uint16_t flags;
      std::memcpy(&flags, record + offsetof(lt_py_sample_event, flags), sizeof flags);
      if (flags & LT_SAMPLE_IN_PROBE) {
        // Time in our own probe handlers is our overhead: charging it to
        // the op being entered would inflate tiny ops.
        p.pending.in_probe++;
        return;
      }
      if (auto r = p.running.find(h.tid); r != p.running.end()) s.close_from(p, r->second, nops, h.ts_ns);
      if (nops == 0) return;
      // Grouped by shapes, a row is an (op, shapes) pair: the records'
      // view of the running ops has it (BPF's has only op indexes).
      const std::vector<Proc::Running>* run = nullptr;
      if (s.opts.group_by_shapes)
        if (auto r = p.running.find(h.tid); r != p.running.end() && r->second.size() == nops) run = &r->second;
      auto id_at = [&](unsigned i) { return run ? (*run)[i].name : s.name_id_of(ops[i]); };
      std::uint32_t seen[LT_OPS_DEPTH];
      unsigned nseen = 0;
      for (unsigned i = 0; i < nops; ++i) {
        const std::uint32_t id = id_at(i);
        // Recursion (an op calling itself) counts once toward total.
        if (std::find(seen, seen + nseen, id) == seen + nseen) {
          seen[nseen++] = id;
          p.pending.row(id).total++;
        }
      }
      p.pending.row(id_at(nops - 1)).self++;
      return;
    }
    case LT_EV_PROC_EXIT: {
      auto it = s.procs.find(h.pid);
      if (it != s.procs.end()) s.close_all(it->second, h.ts_ns);
      return;
    }
    case LT_EV_GPU_NAME: {
      if (h.size < sizeof(lt_gpu_name_event)) return;
      lt_gpu_name_event e;
      std::memcpy(&e, record, sizeof e);
      s.gpu_names.add(h.pid, e.n);
      return;
    }
    case LT_EV_GPU_LAUNCH: {
      if (h.size < sizeof(lt_gpu_launch_event)) return;
      lt_gpu_launch_event e;
      std::memcpy(&e, record, sizeof e);
      s.on_gpu_launch(h, e);
      return;
    }
    case LT_EV_GPU_ACTIVITY: {
      if (h.size < sizeof(lt_gpu_activity_event)) return;
      lt_gpu_activity_event e;
      std::memcpy(&e, record, sizeof e);
      s.on_gpu_activity(h, e.a);
      return;
    }
    default:
      return;
  }
}

void OpAggregator::State::on_gpu_launch(const lt_event_header& h, const lt_gpu_launch_event& e) {
  if (e.source != LT_LAUNCH_CUPTI || !e.correlation) return;  // uprobe launches have no GPU times to join
  auto it = procs.find(h.pid);
  if (it == procs.end()) return;  // no op seen in this process: no op table
  auto& p = it->second;
  Proc::Launch l{p.pending_window(), {}};
  const unsigned n = std::min<unsigned>(e.nops, LT_OPS_DEPTH);
  l.ops.assign(e.ops, e.ops + n);
  // Bounded: a kernel runs within seconds of its launch.
  constexpr std::size_t kMax = 1'000'000;
  if (p.launch_order.size() - p.launch_head >= kMax) p.launches.erase(p.launch_order[p.launch_head++]);
  if (p.launch_head > kMax) {
    p.launch_order.erase(p.launch_order.begin(), p.launch_order.begin() + static_cast<std::ptrdiff_t>(p.launch_head));
    p.launch_head = 0;
  }
  if (p.launches.insert_or_assign(e.correlation, std::move(l)).second) p.launch_order.push_back(e.correlation);
}

// torch.profiler's device columns: a kernel is a row of its own (its time
// both self and total), and a child of the innermost op that launched it:
// that op's Self CUDA, and the CUDA total of every op around it.
void OpAggregator::State::on_gpu_activity(const lt_event_header& h, const lt_gpu_activity& a) {
  auto it = procs.find(h.pid);
  if (it == procs.end()) return;
  auto& p = it->second;
  auto l = p.launches.find(a.correlation);
  if (!a.correlation || l == p.launches.end()) return;  // launched before the attach (or the op report's window)
  // The window still open, or the table(s) it was folded into.
  WindowRef& ref = *l->second.window;
  auto touch = [&](std::uint32_t id, auto&& f) {
    if (!ref.closed) return f(p.pending.row(id));
    const std::uint32_t pos = ref.next_pos++;
    f(p.all[ref.title].row(id, ref.seq, pos));
    if (opts.schedule && ref.scheduled) f(p.scheduled[ref.title].row(id, ref.seq, pos));
  };
  if (!ref.closed) {
    p.pending.has_cuda = true;
  } else {
    p.all[ref.title].has_cuda = true;
    if (opts.schedule && ref.scheduled) p.scheduled[ref.title].has_cuda = true;
  }
  const std::uint64_t dur = a.end_ns > a.start_ns ? a.end_ns - a.start_ns : 0;
  switch (a.kind) {
    case LT_GPU_KERNEL:
    case LT_GPU_MEMCPY:
    case LT_GPU_MEMSET: {
      const std::string name = a.kind == LT_GPU_KERNEL
                                   ? demangle_kernel(gpu_names.get(h.pid, LT_NAME_KERNEL, a.name_id, "kernel#"))
                                   : copy_row_name(a);
      touch(intern(name + '\t'), [&](Acc& r) {
        r.device = true;
        r.calls++;
        r.self_cuda += dur;
        r.cuda_total += dur;
      });
      const auto& ops = l->second.ops;
      std::uint32_t seen[LT_OPS_DEPTH];
      unsigned nseen = 0;
      for (std::size_t i = 0; i < ops.size(); ++i) {
        const std::uint32_t id = name_id_of(ops[i]);
        if (std::find(seen, seen + nseen, id) == seen + nseen) {
          seen[nseen++] = id;
          touch(id, [&](Acc& r) { r.cuda_total += dur; });
        }
      }
      if (!ops.empty()) touch(name_id_of(ops.back()), [&](Acc& r) { r.self_cuda += dur; });
      return;
    }
    case LT_GPU_RUNTIME: {
      // torch lists the runtime calls (cudaLaunchKernel, ...) with their
      // CPU time; CUPTI measured it.
      touch(intern(gpu_names.get(h.pid, LT_NAME_RUNTIME_API, a.cbid, "runtime#") + '\t'), [&](Acc& r) {
        r.calls++;
        r.cpu_exact += dur;
      });
      return;
    }
    default:
      return;
  }
}

OpsReport OpAggregator::finish() {
  auto& s = *s_;
  if (!s.held.empty()) s.replay();
  const bool schedule = s.opts.schedule;
  bool overridden = false;
  for (auto pid : s.order) {
    auto& p = s.procs[pid];
    s.close_all(p, p.last_ts);
    // Ops after the last step's end belong to the step that never ended;
    // a process without step functions has one window, "records".
    if (!p.pending.empty()) {
      if (p.last_step.empty())
        s.fold(p, "records", "", 0);
      else
        s.fold(p, p.last_title, p.last_step, p.windows_of[p.last_step]++);
    }
    ProcessOps po;
    po.pid = pid;
    po.calls = p.calls;
    po.too_deep = p.too_deep;
    // With fewer than 5 steps of a step function Lightning records every
    // step instead (and warns).
    auto uses_schedule = [&](const std::string& step) { return schedule && !step.empty() && p.steps_ended[step] >= 5; };
    for (auto& [step, n] : p.windows_of)
      if (schedule && n > 0 && !step.empty()) {
        if (uses_schedule(step))
          po.skipped_steps += p.skipped_of[step];
        else
          overridden = true;
      }
    std::vector<std::pair<const std::string*, TableAcc*>> chosen;
    for (auto& [title, t] : p.all) {
      if (!uses_schedule(step_function_of(title))) {
        chosen.push_back({&title, &t});
      } else if (auto it = p.scheduled.find(title); it != p.scheduled.end()) {
        chosen.push_back({&title, &it->second});
      }
    }
    std::sort(chosen.begin(), chosen.end(), [](auto& x, auto& y) { return x.second->first < y.second->first; });
    for (auto& [title, t] : chosen) {
      OpTableData table{*title, {}, t->steps, t->samples, t->in_probe, t->has_cuda};
      std::vector<std::pair<const TableAcc::Row*, std::uint32_t>> rows;
      rows.reserve(t->rows.size());
      for (auto& [id, r] : t->rows) rows.push_back({&r, id});
      std::sort(rows.begin(), rows.end(), [](auto& x, auto& y) {
        return std::pair(x.first->window, x.first->pos) < std::pair(y.first->window, y.first->pos);
      });
      for (auto& [r, id] : rows) {
        const std::string& key = s.names[id];
        const auto tab = key.find('\t');
        const Acc& a = r->acc;
        OpRowData row{key.substr(0, tab), a.calls, a.self, a.total,
                      tab == std::string::npos ? std::string() : key.substr(tab + 1)};
        row.self_cuda_ns = a.self_cuda;
        row.cuda_total_ns = a.cuda_total;
        row.cpu_exact_ns = a.cpu_exact;
        row.device_row = a.device;
        table.rows.push_back(std::move(row));
      }
      po.tables.push_back(std::move(table));
    }
    bool any_rows = false;
    for (auto& t : po.tables) any_rows |= !t.rows.empty();
    if (any_rows) s.out.processes.push_back(std::move(po));
  }
  if (schedule && overridden)
    s.out.notes.push_back(
        "The PyTorch Profiler default schedule will be overridden as there is not enough steps to properly record "
        "traces.");
  s.out.names = s.op_names;
  return std::move(s.out);
}

}  // namespace lt
