#include "reports/aggregate/ops.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <unordered_map>

#include "reports/aggregate/gpu_names.h"
#include "reports/aggregate/kernel_names.h"
#include "reports/aggregate/step_batches.h"

namespace lt {

namespace {

constexpr std::size_t kMaxIntervals = kMaxOpIntervals;
constexpr std::size_t kMaxHeld = 200'000;  // records held while the TensorImpl layout is unknown

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
  std::int64_t cpu_mem = 0, self_cpu_mem = 0, cuda_mem = 0, self_cuda_mem = 0;
  std::uint64_t record_self_ns = 0, record_total_ns = 0;  // [pl][profile] rows: measured total, estimated self
  bool device = false;
};

// kineto's names for copies in the op table.
const char* copy_row_name(const lt_gpu_activity& a) {
  if (a.kind == LT_GPU_MEMSET) return "Memset (Device)";
  switch (a.copy_kind) {
    case 1:
      return "Memcpy HtoD";
    case 2:
      return "Memcpy DtoH";
    case 8:
      return "Memcpy DtoD";
    case 10:
      return "Memcpy PtoP";
    default:
      return "Memcpy";
  }
}

// Ops of one process over a stretch of time: a batch, the gap after a
// batch's end hooks, the ops outside any batch, or a table's total.  When a
// window is merged into another, `forward` sends the GPU records that come
// later (kernels finish after their launch) to where its ops went.
struct Window;
using WindowPtr = std::shared_ptr<Window>;
struct Window {
  std::unordered_map<std::uint32_t, Acc> rows;
  std::vector<std::uint32_t> order;
  std::uint64_t samples = 0, in_probe = 0;
  bool has_cuda = false;
  bool has_memory = false, has_cuda_memory = false;
  bool dropped = false;  // left out by --schedule
  WindowPtr forward;
  Acc& row(std::uint32_t name_id) {
    auto [it, fresh] = rows.try_emplace(name_id);
    if (fresh) order.push_back(name_id);
    return it->second;
  }
  bool empty() const { return rows.empty() && samples == 0; }
  // Adds this window to `to` and frees its rows.
  void merge_into(const WindowPtr& to) {
    for (auto id : order) {
      const Acc& a = rows[id];
      Acc& r = to->row(id);
      r.calls += a.calls;
      r.self += a.self;
      r.total += a.total;
      r.self_cuda += a.self_cuda;
      r.cuda_total += a.cuda_total;
      r.cpu_exact += a.cpu_exact;
      r.cpu_mem += a.cpu_mem;
      r.self_cpu_mem += a.self_cpu_mem;
      r.cuda_mem += a.cuda_mem;
      r.self_cuda_mem += a.self_cuda_mem;
      r.record_self_ns += a.record_self_ns;
      r.record_total_ns += a.record_total_ns;
      r.device |= a.device;
    }
    to->samples += samples;
    to->in_probe += in_probe;
    to->has_cuda |= has_cuda;
    to->has_memory |= has_memory;
    to->has_cuda_memory |= has_cuda_memory;
    release();
    forward = to;
  }
  void drop() {
    release();
    dropped = true;
  }
  void release() {
    std::unordered_map<std::uint32_t, Acc>().swap(rows);
    std::vector<std::uint32_t>().swap(order);
  }
};

// Where a window's records now count (nullptr: left out).
Window* resolve(Window* w) {
  while (w && !w->dropped && w->forward) w = w->forward.get();
  return w && !w->dropped ? w : nullptr;
}

WindowPtr fresh_window() {
  return std::make_shared<Window>();
}

constexpr const char* kOutsideTitle = "outside step functions";
// torch.profiler's row for allocations and frees made outside every op
// (MEMORY_EVENT_NAME).
constexpr const char* kMemoryRow = "[memory]";

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
  // An action completed by a record, and the action open around it on its
  // thread right after (its parent, "" none): [pl][profile] rows.
  struct Completion {
    CompletedSpan span;
    std::string parent;
  };
  struct Held {
    lt_event_header h;
    std::vector<std::byte> bytes;
    std::uint64_t done;
    std::string last;
    std::vector<Completion> completions;
  };
  std::vector<Held> held;
  std::vector<std::vector<std::int8_t>> op_args;  // op index -> per schema argument, tensor register or -1
  std::unordered_map<std::uint32_t, std::uint64_t> spans_seen;  // per process: completions read so far
  std::vector<Completion> completions_of(const lt_event_header& h);
  void charge_completions(const lt_event_header& h, const std::vector<Completion>& done);
  void process(const lt_event_header& h, const std::byte* record, std::uint64_t done, const std::string& action,
               const std::vector<Completion>& completions);
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
    for (auto& r : pending) process(r.h, r.bytes.data(), r.done, r.last, r.completions);
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
  std::unordered_map<std::uint32_t, std::uint64_t> completed_seen;  // per process: actions completed so far
  struct Proc {
    // Where this process's ops go now (see step_batches.h): into the batch
    // being run; into the gap after its end hooks (another end hook may
    // still come: then the gap was the batch's); outside any batch; or,
    // before the first batch boundary, into `unknown` (attached mid-batch:
    // the first boundary tells whether it was one).
    enum class Where { unknown, batch, gap, outside } where = Where::unknown;
    BatchStage stage = BatchStage::none;  // of the batch (batch, gap)
    std::string title;                    // the step function that ended in the batch, "" none yet
    WindowPtr batch, gap, unknown = fresh_window(), outside = fresh_window();
    std::map<BatchStage, std::string> last_title;  // per stage: the last step function's action name
    // The tables, in order of their first window; a table's total is a Window.
    struct Table {
      std::string title, step;
      WindowPtr acc = fresh_window();
      std::uint64_t steps = 0;
    };
    std::vector<Table> tables;
    std::map<std::string, std::size_t> table_of;
    // --schedule: windows numbered per step function; the first five wait
    // until it is known whether there will be five (else all are kept).
    struct Early {
      std::size_t table;
      std::uint64_t index;
      WindowPtr window;
    };
    std::map<std::string, std::uint64_t> windows_of;
    std::map<std::string, std::vector<Early>> early;
    std::uint64_t skipped = 0;
    Window& sink() {
      switch (where) {
        case Where::batch:
          return *batch;
        case Where::gap:
          return *gap;
        case Where::unknown:
          return *unknown;
        default:
          return *outside;
      }
    }
    WindowPtr sink_ptr() {
      switch (where) {
        case Where::batch:
          return batch;
        case Where::gap:
          return gap;
        case Where::unknown:
          return unknown;
        default:
          return outside;
      }
    }
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
    // [pl][module] calls (--module-names) open per thread, outermost first,
    // as far as MODULE_CALL records and samples tell (no return probe: a
    // call is over once a sample no longer has its _call_impl at its depth,
    // or a later call starts at its depth or above).
    struct OpenModule {
      std::uint32_t depth;
      std::uint64_t code;
      std::uint32_t row;
    };
    std::unordered_map<std::uint32_t, std::vector<OpenModule>> modules_open;
    std::map<std::uint64_t, std::string> module_names;  // address -> row name, "" = no Lightning row
    // [pl][profile] rows, per (thread, open action): samples in which an op
    // ran while the action was the thread's innermost, and the measured time
    // of the actions completed inside it.  Taken when it completes.
    std::map<std::pair<std::uint32_t, std::string>, std::uint64_t> covered_samples, child_ns;
    std::uint64_t calls = 0, too_deep = 0, last_ts = 0;
    // GPU launches by CUPTI correlation id: the window they were made in
    // and the ops running, outermost first.
    struct Launch {
      WindowPtr window;
      std::vector<std::uint32_t> ops;
    };
    std::unordered_map<std::uint32_t, Launch> launches;
    std::vector<std::uint32_t> launch_order;
    std::size_t launch_head = 0;
    // CPU allocations seen, by address: a free's size (Delete has only
    // the pointer).
    std::unordered_map<std::uint64_t, std::int64_t> cpu_sizes;
    std::uint64_t mem_events = 0, frees_unknown = 0, mem_without_ops = 0, ooms = 0;
  };
  void on_mem(const lt_event_header& h, const lt_mem_event& e);
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
  // A module's row until its name is known (MODULE_NAME may come after its
  // first calls): renamed, or dropped when it has no Lightning name, at the end.
  // Its key holds a NUL, which no op name from a record can (they are cut
  // at the first): a crafted OP_NAME can neither pose as a module row nor
  // reach the module lookup.
  std::unordered_map<std::uint32_t, std::uint64_t> module_of_row;  // row id -> the module's self
  std::uint32_t module_row(std::uint64_t self) {
    const std::uint32_t id = intern(std::string("\0module ", 8) + std::to_string(self));
    module_of_row.emplace(id, self);
    return id;
  }
  void on_module_call(const lt_event_header& h, const lt_module_call_event& e) {
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
  bool charge_modules(Proc& p, std::uint32_t tid, const std::byte* record, std::uint16_t nops) {
    auto it = p.modules_open.find(tid);
    if (it == p.modules_open.end() || it->second.empty()) return false;
    lt_py_sample_event e;
    std::memcpy(&e, record, sizeof e);
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
        p.sink().row(m.row).total++;
      }
    if (!st.empty() && nops == 0) p.sink().row(st.back().row).self++;
    return !st.empty();
  }
  // The row name of an interned key: a module's resolved name, "" for none.
  std::string row_key(std::uint32_t pid, std::uint32_t id) {
    auto module = module_of_row.find(id);
    if (module == module_of_row.end()) return names[id];
    auto& named = procs[pid].module_names;
    auto it = named.find(module->second);
    return it == named.end() ? std::string() : it->second;
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
  std::size_t table_index(Proc& p, const std::string& title, const std::string& step) {
    auto [it, fresh] = p.table_of.try_emplace(title, p.tables.size());
    if (fresh) p.tables.push_back({title, step});
    return it->second;
  }
  void keep(Proc& p, std::size_t t, const WindowPtr& w) {
    p.tables[t].steps++;
    w->merge_into(p.tables[t].acc);
  }
  // Lightning: torch.profiler.schedule(wait=1, warmup=1, active=3),
  // repeating, counted per step function; with fewer than 5 steps of a
  // stage it records every step instead (and warns).
  void keep_scheduled(Proc& p, const Proc::Early& e) {
    if (e.index % 5 < 2) {
      ++p.skipped;
      e.window->drop();
    } else {
      keep(p, e.table, e.window);
    }
  }
  // A finished batch whose step function ended: one step of its table.
  void close_step(Proc& p, const std::string& title, const WindowPtr& w) {
    const std::string step = step_function_of(title);
    const std::size_t t = table_index(p, title, step);
    if (!opts.schedule) return keep(p, t, w);
    Proc::Early e{t, p.windows_of[step]++, w};
    if (e.index >= 5) return keep_scheduled(p, e);
    auto& early = p.early[step];
    early.push_back(std::move(e));
    if (early.size() == 5) {  // five steps: the schedule applies to this step function
      for (auto& x : early) keep_scheduled(p, x);
      early.clear();
    }
  }
  // The batch (and its gap) is over: its ops go to its step's table, or,
  // if no step function ran in it, outside; the gap's go outside.
  void close_batch(Proc& p) {
    using W = Proc::Where;
    if (p.where != W::batch && p.where != W::gap) return;
    if (!p.title.empty()) {
      p.last_title[p.stage] = p.title;
      close_step(p, p.title, p.batch);
    } else {
      p.batch->merge_into(p.outside);
    }
    if (p.where == W::gap) p.gap->merge_into(p.outside);
    p.batch.reset();
    p.gap.reset();
    p.title.clear();
    p.where = W::outside;
  }
  void open_batch(Proc& p, BatchStage stage) {
    using W = Proc::Where;
    if (p.where == W::unknown) p.unknown->merge_into(p.outside);  // a batch begins: we were outside one
    close_batch(p);
    p.batch = fresh_window();
    p.stage = stage;
    p.title.clear();
    p.where = W::batch;
  }
  // We were in a batch of `stage` all along (attached mid-batch).
  void adopt_unknown(Proc& p, BatchStage stage) {
    p.batch = p.unknown;
    p.unknown = fresh_window();
    p.stage = stage;
    p.title.clear();
    p.where = Proc::Where::batch;
  }
  void action_began(Proc& p, const std::string& name) {
    using W = Proc::Where;
    const BatchHook hook = batch_hook_of(name);
    if (hook.role == BatchRole::none) {
      if (p.where == W::gap) close_batch(p);  // past the end hooks: the batch is over
      return;
    }
    const bool same = (p.where == W::batch || p.where == W::gap) && p.stage == hook.stage;
    if (hook.role == BatchRole::batch_end) {
      if (same && p.where == W::gap) {  // the next end hook (the LightningModule's after the callbacks')
        p.gap->merge_into(p.batch);
        p.gap.reset();
        p.where = W::batch;
      } else if (!same) {
        if (p.where == W::unknown)
          adopt_unknown(p, hook.stage);
        else
          open_batch(p, hook.stage);
      }
      return;
    }
    // A step (or the training batch's body) with nothing seen before it: the
    // ops so far were in a batch of its stage, this one (we attached after
    // its start hooks) or, in a loop without hooks, the previous step's.
    if (p.where == W::unknown && hook.role != BatchRole::batch_start) return adopt_unknown(p, hook.stage);
    // batch_start, body or step: a new batch, unless it is this one's (the
    // step inside run_training_batch; a step whose batch has no hooks is a
    // new batch once the previous step ended).
    if (same && p.where == W::batch && (p.title.empty() || hook.role == BatchRole::body)) return;
    open_batch(p, hook.stage);
  }
  void action_ended(Proc& p, const std::string& name) {
    using W = Proc::Where;
    const BatchHook hook = batch_hook_of(name);
    if (hook.role != BatchRole::step && hook.role != BatchRole::batch_end) return;
    if (p.where == W::unknown) adopt_unknown(p, hook.stage);
    if ((p.where != W::batch && p.where != W::gap) || p.stage != hook.stage) {
      if (hook.role == BatchRole::batch_end) return;  // an end hook of no batch we know: its ops stay where they went
      open_batch(p, hook.stage);                      // a step function ran outside any batch we saw
    }
    if (hook.role == BatchRole::step) {
      if (p.where == W::gap) {
        p.gap->merge_into(p.batch);
        p.gap.reset();
        p.where = W::batch;
      }
      if (p.title.empty()) p.title = name;  // nested step actions: the innermost names it
    } else if (p.where == W::batch) {
      p.gap = fresh_window();
      p.where = W::gap;
    }
  }
};

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
  if (s.opts.group_by_shapes && s.layout < 0 && !s.layout_given_up) {
    // Until the TensorImpl layout is known, hold the stream (in order, with
    // what the action aggregator said at each record) and replay it then.
    s.held.push_back({h, std::vector<std::byte>(record, record + h.size), done, name, completions});
    if (h.kind == LT_EV_OP_SHAPES && h.size >= sizeof(lt_op_shapes_event)) s.vote(record);
    if (s.layout >= 0 || s.held.size() >= kMaxHeld) s.replay();
    return;
  }
  s.process(h, record, done, name, completions);
}

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
    const std::uint64_t dur = c.span.end_ns - c.span.begin_ns;
    const auto key = std::make_pair(c.span.tid, c.span.name);
    std::uint64_t covered = 0, children = 0;
    if (auto it = p.covered_samples.find(key); it != p.covered_samples.end()) {
      covered = it->second * out.period_ns;
      p.covered_samples.erase(it);
    }
    if (auto it = p.child_ns.find(key); it != p.child_ns.end()) {
      children = it->second;
      p.child_ns.erase(it);
    }
    Acc& a = p.sink().row(intern("[pl][profile]" + c.span.name));
    a.calls++;
    a.record_total_ns += dur;
    a.record_self_ns += dur - std::min(dur, covered + children);
    if (!c.parent.empty()) p.child_ns[{c.span.tid, c.parent}] += dur;
  }
}

void OpAggregator::State::process(const lt_event_header& h, const std::byte* record, std::uint64_t done,
                                  const std::string& action, const std::vector<Completion>& completions) {
  auto& s = *this;
  // Before the batch boundaries below: an action ends in the window it ran in.
  s.charge_completions(h, completions);
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
    case LT_EV_ACTION_BEGIN:
    case LT_EV_DIRECT_START:
    case LT_EV_FETCH_BEGIN: {
      auto it = s.procs.find(h.pid);
      if (it != s.procs.end())
        s.action_began(it->second, action);
      else if (batch_hook_of(action).role != BatchRole::none)  // steps count from the first, ops or not
        s.action_began(s.proc(h.pid), action);
      return;
    }
    case LT_EV_ACTION_END:
    case LT_EV_DIRECT_STOP: {
      auto& seen = s.completed_seen[h.pid];
      if (done == seen) return;  // a stop that completed nothing (its start was before the attach)
      seen = done;
      auto it = s.procs.find(h.pid);
      if (it != s.procs.end())
        s.action_ended(it->second, action);
      else if (batch_hook_of(action).role != BatchRole::none)
        s.action_ended(s.proc(h.pid), action);
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
        p.sink().row(id).calls++;
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
          p.sink().row(parent.first_child_row).calls++;
        }
      }
      if (!dup) p.sink().row(id).calls++;
      std::size_t interval = SIZE_MAX;
      if (s.opts.keep_intervals && st.size() + 1 == e.depth) {
        if (s.out.intervals.size() < kMaxIntervals) {
          interval = s.out.intervals.size();
          s.out.intervals.push_back({h.pid, h.tid, e.op, e.depth, h.ts_ns, h.ts_ns});
        } else {
          ++s.out.intervals_dropped;
        }
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
      p.sink().samples++;
      std::uint16_t flags;
      std::memcpy(&flags, record + offsetof(lt_py_sample_event, flags), sizeof flags);
      if (flags & LT_SAMPLE_IN_PROBE) {
        // Time in our own probe handlers is our overhead: charging it to
        // the op being entered would inflate tiny ops.
        p.sink().in_probe++;
        return;
      }
      // A sample an op or a module call holds is not the action's self
      // (torch: a record's self leaves out its children's time).
      const bool in_module = s.charge_modules(p, h.tid, record, nops);
      if ((nops > 0 || in_module) && !action.empty()) p.covered_samples[{h.tid, action}]++;
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
          p.sink().row(id).total++;
        }
      }
      p.sink().row(id_at(nops - 1)).self++;
      return;
    }
    case LT_EV_MODULE_CALL: {
      if (h.size < sizeof(lt_module_call_event)) return;
      lt_module_call_event e;
      std::memcpy(&e, record, sizeof e);
      s.on_module_call(h, e);
      return;
    }
    case LT_EV_MODULE_NAME: {
      if (h.size < sizeof(lt_module_name_event)) return;
      lt_module_name_event e;
      std::memcpy(&e, record, sizeof e);
      const std::string name(e.name, strnlen(e.name, sizeof e.name));
      // Lightning's row: "[pl][module]{type}: {name}"; the root (no name) has none.
      s.proc(h.pid).module_names.try_emplace(
          e.module, name.empty() ? std::string()
                                 : "[pl][module]" + std::string(e.type, strnlen(e.type, sizeof e.type)) + ": " + name);
      return;
    }
    case LT_EV_MEM: {
      if (h.size < sizeof(lt_mem_event)) return;
      lt_mem_event e;
      std::memcpy(&e, record, sizeof e);
      s.on_mem(h, e);
      return;
    }
    case LT_EV_PROC_EXIT: {
      auto it = s.procs.find(h.pid);
      if (it != s.procs.end()) s.close_all(it->second, h.ts_ns);
      return;
    }
    case LT_EV_PROC_EXEC: {
      // A new image: the old allocations' addresses mean nothing any more.
      auto it = s.procs.find(h.pid);
      if (it != s.procs.end()) std::unordered_map<std::uint64_t, std::int64_t>().swap(it->second.cpu_sizes);
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

// One allocator event: its signed size (a CPU free's from the allocation
// seen), charged to the innermost op running on its thread (self) and to
// every distinct op running (total), or to the "[memory]" row when none.
void OpAggregator::State::on_mem(const lt_event_header& h, const lt_mem_event& e) {
  auto& p = proc(h.pid);
  p.last_ts = std::max(p.last_ts, h.ts_ns);
  ++p.mem_events;
  const bool cpu = e.device_type == 0;
  std::int64_t bytes = e.bytes;
  switch (e.what) {
    case LT_MEM_ALLOC:
      if (bytes <= 0) return;
      if (cpu) p.cpu_sizes[e.ptr] = bytes;
      break;
    case LT_MEM_FREE:
      if (cpu && bytes == 0) {
        auto it = p.cpu_sizes.find(e.ptr);
        if (it == p.cpu_sizes.end()) {  // allocated before the attach
          ++p.frees_unknown;
          return;
        }
        bytes = -it->second;
        p.cpu_sizes.erase(it);
      }
      if (bytes > 0) bytes = -bytes;
      break;
    case LT_MEM_OOM:
      ++p.ooms;
      return;
    default:
      return;
  }
  if (!(e.flags & LT_MEM_OPS_KNOWN)) {
    ++p.mem_without_ops;
    return;
  }
  auto& st = p.running[h.tid];
  close_from(p, st, e.depth, h.ts_ns);
  Window& w = p.sink();
  w.has_memory = true;
  w.has_cuda_memory |= !cpu;
  std::int64_t Acc::*total = cpu ? &Acc::cpu_mem : &Acc::cuda_mem;
  std::int64_t Acc::*self = cpu ? &Acc::self_cpu_mem : &Acc::self_cuda_mem;
  if (st.empty()) {
    Acc& a = w.row(intern(std::string(kMemoryRow) + '\t'));
    a.calls++;
    a.*total += bytes;
    a.*self += bytes;
    return;
  }
  std::uint32_t seen[LT_OPS_DEPTH];
  unsigned nseen = 0;
  for (std::size_t i = 0; i < st.size() && nseen < LT_OPS_DEPTH; ++i) {
    const std::uint32_t id = st[i].name;
    if (std::find(seen, seen + nseen, id) != seen + nseen) continue;  // recursion counts once
    seen[nseen++] = id;
    w.row(id).*total += bytes;
  }
  w.row(st.back().name).*self += bytes;
}

void OpAggregator::State::on_gpu_launch(const lt_event_header& h, const lt_gpu_launch_event& e) {
  if (e.source != LT_LAUNCH_CUPTI || !e.correlation) return;  // uprobe launches have no GPU times to join
  auto it = procs.find(h.pid);
  if (it == procs.end()) return;  // no op seen in this process: no op table
  auto& p = it->second;
  Proc::Launch l{p.sink_ptr(), {}};
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
  Window* target = resolve(l->second.window.get());
  if (!target) return;  // its step was left out by --schedule
  Window& w = *target;
  w.has_cuda = true;
  const std::uint64_t dur = a.end_ns > a.start_ns ? a.end_ns - a.start_ns : 0;
  switch (a.kind) {
    case LT_GPU_KERNEL:
    case LT_GPU_MEMCPY:
    case LT_GPU_MEMSET: {
      const std::string name = a.kind == LT_GPU_KERNEL
                                   ? demangle_kernel(gpu_names.get(h.pid, LT_NAME_KERNEL, a.name_id, "kernel#"))
                                   : copy_row_name(a);
      Acc& r = w.row(intern(name + '\t'));
      r.device = true;
      r.calls++;
      r.self_cuda += dur;
      r.cuda_total += dur;
      const auto& ops = l->second.ops;
      std::uint32_t seen[LT_OPS_DEPTH];
      unsigned nseen = 0;
      for (std::size_t i = 0; i < ops.size(); ++i) {
        const std::uint32_t id = name_id_of(ops[i]);
        if (std::find(seen, seen + nseen, id) == seen + nseen) {
          seen[nseen++] = id;
          w.row(id).cuda_total += dur;
        }
      }
      if (!ops.empty()) w.row(name_id_of(ops.back())).self_cuda += dur;
      return;
    }
    case LT_GPU_RUNTIME: {
      // torch lists the runtime calls (cudaLaunchKernel, ...) with their
      // CPU time; CUPTI measured it.
      Acc& r = w.row(intern(gpu_names.get(h.pid, LT_NAME_RUNTIME_API, a.cbid, "runtime#") + '\t'));
      r.calls++;
      r.cpu_exact += dur;
      return;
    }
    default:
      return;
  }
}

OpsReport OpAggregator::finish() {
  auto& s = *s_;
  if (!s.held.empty()) s.replay();
  bool overridden = false;
  for (auto pid : s.order) {
    auto& p = s.procs[pid];
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
    s.out.notes.push_back(
        "The PyTorch Profiler default schedule will be overridden as there is not enough steps to properly record "
        "traces.");
  s.out.names = s.op_names;
  return std::move(s.out);
}

}  // namespace lt
