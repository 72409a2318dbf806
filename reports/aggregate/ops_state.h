// OpAggregator's state, shared by the files that each handle one concern
// of it (internal to reports/aggregate/):
//   ops.cpp          records in, op calls and samples, the tables out
//   ops_batches.cpp  which window an op counts in: batches, steps, --schedule
//   ops_lightning.cpp [pl][module] and [pl][profile] rows
//   ops_memory.cpp   the memory columns (allocator records)
//   ops_gpu.cpp      the CUDA columns (launches joined to kernels)
//   ops_spans.cpp    the op observer's measured calls (OP_SPAN)
// and op_shape_layout.* (--group-by-input-shapes).
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "reports/aggregate/gpu_names.h"
#include "reports/aggregate/op_shape_layout.h"
#include "reports/aggregate/op_window.h"
#include "reports/aggregate/ops.h"
#include "reports/aggregate/step_batches.h"

namespace lt {

namespace ops_detail {
constexpr std::size_t kMaxIntervals = kMaxOpIntervals;
constexpr std::size_t kMaxHeld = 200'000;  // records held while the TensorImpl layout is unknown
constexpr const char* kOutsideTitle = "outside step functions";
// torch.profiler's row for allocations and frees made outside every op
// (MEMORY_EVENT_NAME).
constexpr const char* kMemoryRow = "[memory]";
// Window boundaries kept per process for the op observer's calls, which
// arrive up to a drain after the actions around them.
constexpr std::size_t kMaxBoundaries = 1 << 16;
constexpr std::size_t kMaxSpanDepth = 256;
constexpr std::size_t kMaxRecentDone = 4096;
constexpr std::uint32_t kNoAction = UINT32_MAX;
constexpr std::uint32_t kHiddenRow = UINT32_MAX;

}  // namespace ops_detail

struct OpAggregator::State {
  using Acc = ops_detail::Acc;
  using Window = ops_detail::Window;
  using WindowPtr = ops_detail::WindowPtr;

  const ActionAggregator& actions;
  OpAggregatorOptions opts;
  ShapeLayout layout;  // --group-by-input-shapes
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
  std::vector<Held> held;                         // the stream, while the TensorImpl layout is unknown
  std::vector<std::vector<std::int8_t>> op_args;  // op index -> per schema argument, tensor register or -1
  std::unordered_map<std::uint32_t, std::uint64_t> spans_seen;  // per process: completions read so far
  std::vector<std::string> op_names;                            // op index -> name
  std::vector<std::string> op_shapes;     // op index -> the op observer's input shapes (OP_INPUT_SHAPES), "" none
  std::vector<std::uint32_t> span_rows;   // op index -> its calls' row when grouped by shapes (UINT32_MAX: not yet)
  std::vector<std::uint32_t> op_name_id;  // op index -> name id
  std::vector<std::string> names;         // name id -> name
  std::unordered_map<std::string, std::uint32_t> name_ids;
  std::unordered_map<std::uint32_t, std::uint64_t> completed_seen;  // per process: actions completed so far
  // A process's state, one part per concern; each part's code is in the
  // file named (Proc is all of them: the parts' members are its own).
  //
  // Its windows and tables (ops_batches.cpp).
  struct ProcWindows {
    // Where this process's ops go now (see step_batches.h): into the batch
    // being run; into the gap after its end hooks (another end hook may
    // still come: then the gap was the batch's); outside any batch; or,
    // before the first batch boundary, into `unknown` (attached mid-batch:
    // the first boundary tells whether it was one).
    enum class Where { unknown, batch, gap, outside } where = Where::unknown;
    BatchStage stage = BatchStage::none;  // of the batch (batch, gap)
    std::string title;                    // the step function that ended in the batch, "" none yet
    WindowPtr batch, gap, unknown = ops_detail::fresh_window(), outside = ops_detail::fresh_window();
    std::map<BatchStage, std::string> last_title;  // per stage: the last step function's action name
    // The tables, in order of their first window; a table's total is a Window.
    struct Table {
      std::string title, step;
      WindowPtr acc = ops_detail::fresh_window();
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
    Window& sink() { return *sink_ptr(); }
    const WindowPtr& sink_ptr() const {
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
  };
  // The op calls running per thread, from the op probes (ops.cpp).
  struct ProcCalls {
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
  };
  // [pl][module] rows, --module-names (ops_lightning.cpp).
  struct ProcModules {
    // [pl][module] calls open per thread, outermost first, as far as
    // MODULE_CALL records and samples tell (no return probe: a call is over
    // once a sample no longer has its _call_impl at its depth, or a later
    // call starts at its depth or above).
    struct OpenModule {
      std::uint32_t depth;
      std::uint64_t code;
      std::uint32_t row;
    };
    std::unordered_map<std::uint32_t, std::vector<OpenModule>> modules_open;
    std::map<std::uint64_t, std::string> module_names;  // address -> row name, "" = no Lightning row
  };
  // [pl][profile] rows (ops_lightning.cpp).
  struct ProcLightning {
    // Per (thread, open action): samples in which an op ran while the
    // action was the thread's innermost, and the measured time of the
    // actions completed inside it.  Taken when it completes.
    std::map<std::pair<std::uint32_t, std::string>, std::uint64_t> covered_samples, child_ns;
    // A measured process's calls come a drain after the actions, so a
    // completed action waits (in order) until a call on its thread ended
    // after it; meanwhile each outermost call's time goes to the action
    // innermost on its thread when it started (`innermost`: the recent
    // changes per thread).
    struct Deferred {
      Completion c;
      WindowPtr window;
    };
    std::unordered_map<std::uint32_t, std::deque<Deferred>> deferred;  // per thread, in completion order
    std::unordered_map<std::uint32_t, std::deque<std::pair<std::uint64_t, std::uint32_t>>> innermost;
    std::unordered_map<std::uint32_t, std::uint64_t> last_call_end;  // per thread
    // Actions completed lately, per thread: a call they ran inside (the
    // closure's actions inside Optimizer.step#) holds them as children, as
    // Lightning's [pl][profile] scopes would be its children.
    struct Done {
      std::uint64_t begin, end;
      std::uint32_t parent;  // interned, kNoAction none
      bool claimed;
    };
    std::unordered_map<std::uint32_t, std::deque<Done>> recent_done;
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint64_t> covered_ns;  // (tid, action) -> ns
  };
  // The CUDA columns: launches joined to their kernels (ops_gpu.cpp).
  struct ProcGpu {
    // GPU launches by CUPTI correlation id: the window they were made in
    // and the ops running, outermost first.
    struct Launch {
      WindowPtr window;
      std::vector<std::uint32_t> ops;  // op indexes, outermost first (the op probes' stack)
      // An observed process's launch: the rows of the calls around it, found
      // by time as their spans come (ops_gpu.cpp); its kernels wait till then.
      bool by_rows = false, waiting = false;
      std::vector<lt_gpu_activity> queued;
    };

    std::unordered_map<std::uint32_t, Launch> launches;
    std::vector<std::uint32_t> launch_order;
    std::size_t launch_head = 0;
  };
  // The memory columns (ops_memory.cpp).
  struct ProcMemory {
    // CPU allocations seen, by address: a free's size (Delete has only
    // the pointer).
    std::unordered_map<std::uint64_t, std::int64_t> cpu_sizes;
    std::uint64_t mem_events = 0, frees_unknown = 0, mem_without_ops = 0, ooms = 0;
  };
  // An observed process's CUDA launches and allocations by thread, in
  // time order, until the calls around them are all in (the observer's
  // watermark passed them): ops_by_time.cpp.
  struct ProcWaiting {
    struct Waiting {
      std::uint64_t ts;
      std::vector<std::uint32_t> rows;  // the calls around it, innermost first
      std::uint32_t correlation;        // a launch's (0: an allocation)
      std::int64_t bytes;               // an allocation's, signed
      bool cpu;
      WindowPtr window;  // an allocation's: where it happened
    };
    std::unordered_map<std::uint32_t, std::deque<Waiting>> waiting;
    std::size_t waiting_n = 0;
  };
  // The op observer's measured calls (ops_spans.cpp).
  struct ProcObserver {
    // Where the windows began, in time, so that a call counts where its
    // start fell; and per thread, by depth, calls that ended and wait for
    // their parent (torch drops an only child that has its parent's name,
    // folding its self time into the parent).
    std::vector<std::pair<std::uint64_t, WindowPtr>> boundaries;
    struct EndedCall {
      std::uint32_t row;   // kHiddenRow: left out by --ops (kept for the nesting)
      std::uint32_t base;  // its op's name alone (torch merges by name, shapes aside)
      std::uint64_t start;
      WindowPtr window;
      std::uint64_t self_ns, total_ns;
      std::uint32_t action;  // innermost on its thread when it started (interned; kNoAction none)
    };
    std::unordered_map<std::uint32_t, std::vector<std::vector<EndedCall>>> ended;  // [depth - 1]
    bool measured = false;
    std::string observer_not_used;
    std::uint64_t observer_dropped = 0, observer_too_deep = 0;
  };
  struct Proc : ProcWindows, ProcCalls, ProcModules, ProcLightning, ProcGpu, ProcMemory, ProcWaiting, ProcObserver {};
  GpuNameTable gpu_names;
  std::map<std::uint32_t, Proc> procs;
  std::vector<std::uint32_t> order;  // pids, first op seen
  // A module's row until its name is known (MODULE_NAME may come after its
  // first calls): renamed, or dropped when it has no Lightning name, at the end.
  // Its key holds a NUL, which no op name from a record can (they are cut
  // at the first): a crafted OP_NAME can neither pose as a module row nor
  // reach the module lookup.
  std::unordered_map<std::uint32_t, std::uint64_t> module_of_row;  // row id -> the module's self
  OpsReport out;

  State(const ActionAggregator& a, OpAggregatorOptions o) : actions(a), opts(o) {}

  // ops.cpp
  void process(const lt_event_header& h, const std::byte* record, std::uint64_t done, const std::string& action,
               const std::vector<Completion>& completions);
  // Decides the layout with what there is, then processes the held records in order.
  void replay();
  void on_op_name(const lt_op_name_event& e);
  void on_input_shapes(const lt_op_input_shapes_event& e);
  std::uint32_t span_row(std::uint32_t op, bool user);  // a call's row, by shapes when grouped so
  void on_op(const lt_event_header& h, std::uint32_t op, std::uint16_t depth, const lt_op_shapes_event* shapes);
  void on_sample(const lt_event_header& h, const lt_py_sample_event& e, const std::string& action);
  void on_module_name(const lt_event_header& h, const lt_module_name_event& e);
  void on_proc(const lt_event_header& h);
  // ops_spans.cpp (the op observer's calls)
  void note_boundary(std::uint32_t pid, std::uint64_t ts);
  void forget_before(Proc& p, std::uint32_t pid, std::uint64_t ts);
  WindowPtr window_at(Proc& p, std::uint64_t ts);
  void on_span(const lt_event_header& h, const lt_op_span_event& e);
  void on_observer(const lt_event_header& h, const lt_op_observer_event& e);
  void count_call(const Proc::EndedCall& c);
  void flush_ended(Proc& p, std::uint32_t pid);
  std::uint32_t shaped_id(std::uint32_t op, const lt_op_shapes_event& e);
  std::uint32_t name_id_of(std::uint32_t op);
  std::uint32_t intern(const std::string& name);
  Proc& proc(std::uint32_t pid);
  // ops_batches.cpp
  void close_from(Proc&, std::vector<Proc::Running>& st, std::size_t keep, std::uint64_t ts);
  void close_all(Proc& p, std::uint64_t ts);
  std::size_t table_index(Proc& p, const std::string& title, const std::string& step);
  void keep(Proc& p, std::size_t t, const WindowPtr& w);
  void keep_scheduled(Proc& p, const Proc::Early& e);
  void close_step(Proc& p, const std::string& title, const WindowPtr& w);
  void close_batch(Proc& p);
  void open_batch(Proc& p, BatchStage stage);
  void adopt_unknown(Proc& p, BatchStage stage);
  void action_began(Proc& p, const std::string& name);
  void action_ended(Proc& p, const std::string& name);
  // ops_lightning.cpp
  std::vector<Completion> completions_of(const lt_event_header& h);
  void charge_completions(const lt_event_header& h, const std::vector<Completion>& done);
  void charge_completion(Proc& p, const Completion& c, Window& into, std::uint64_t covered);
  void note_innermost(const lt_event_header& h);
  std::uint32_t action_id(const std::string& name) { return name.empty() ? ops_detail::kNoAction : intern(name); }
  std::uint32_t action_at(Proc& p, std::uint32_t tid, std::uint64_t ts);
  std::uint64_t claim_actions(Proc& p, std::uint32_t tid, std::uint64_t start, std::uint64_t end, std::uint32_t parent);
  void charge_call_to_action(Proc& p, std::uint32_t tid, std::uint32_t action, std::uint64_t start, std::uint64_t end,
                             std::uint64_t self);
  void flush_deferred(Proc& p, std::uint32_t tid, bool all);
  void flush_all_deferred(Proc& p);
  std::uint32_t module_row(std::uint64_t self);
  void on_module_call(const lt_event_header& h, const lt_module_call_event& e);
  bool charge_modules(Proc& p, std::uint32_t tid, const lt_py_sample_event& e, std::uint16_t nops);
  std::string row_key(std::uint32_t pid, std::uint32_t id);
  // ops_memory.cpp
  void on_mem(const lt_event_header& h, const lt_mem_event& e);
  // ops_gpu.cpp
  void on_gpu_launch(const lt_event_header& h, const lt_gpu_launch_event& e);
  void on_gpu_activity(const lt_event_header& h, const lt_gpu_activity& a);
  void charge_gpu(std::uint32_t pid, const Proc::Launch& l, const lt_gpu_activity& a);
  // A launch or an allocation of an observed process: waits for the calls around it.
  void wait_for_calls(Proc& p, std::uint32_t pid, std::uint32_t tid, Proc::Waiting w);
  // A measured call [start, end] on tid: what waits in it is inside it.
  void calls_around(Proc& p, std::uint32_t tid, std::uint64_t start, std::uint64_t end, std::uint32_t row);
  // What waits from before `ts` has every call around it: charged now.
  void settle_waiting(Proc& p, std::uint32_t pid, std::uint64_t ts);
  void launch_settled(Proc& p, std::uint32_t pid, std::uint32_t correlation, const std::vector<std::uint32_t>& rows);
  // An allocation's bytes into window w: the calls around it (outermost
  // first: total, once each; the innermost: self), or the [memory] row.
  void charge_memory(Window& w, const std::uint32_t* rows, std::size_t n, std::int64_t bytes, bool cpu);
};

}  // namespace lt
