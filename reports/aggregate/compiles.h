// torch.compile's compiled regions as the op records show them
// (docs/design-compile.md): per process, each compile id ("Torch-Compiled
// Region: F/C" rows, F the frame Dynamo compiled, C its C-th graph) with its
// calls and when it first ran while we watched, and the recompilations seen:
// a frame's new compile id running for the first time after one of its
// earlier ids ran while attached (Dynamo runs a graph right after compiling
// it, and keeps an id per guard set, so a new id after an older one ran means
// the older one's guards failed and the frame compiled again).  Each
// recompile is charged to the Lightning action open on the thread that ran
// it, and joined by compile id to what Dynamo itself recorded of the compile
// (COMPILE_NOTE: the guard that failed, how long it took; read from the
// target's Python objects), which also lists the compiles before the attach
// and the graph breaks Dynamo met.  Pure: the records in, the report out.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bpf/events.h"
#include "reports/aggregate/py_symbols.h"

namespace lt {

class ActionAggregator;

// One compile as Dynamo recorded it (torch._dynamo.utils._compilation_metrics).
struct DynamoCompileNote {
  std::string id;             // "0/1"
  std::string function;       // "forward (model.py:31)"
  std::int64_t start_ns = 0;  // on the trace's clock (CLOCK_MONOTONIC); 0 unknown
  std::int64_t duration_us = -1;
  std::int64_t graph_breaks = -1;
  std::string reason;   // the recompile reason; "" = the frame's first compile
  std::string failure;  // "" = it compiled
  bool truncated = false;
};

struct GraphBreakNote {
  std::string reason;
  std::int64_t count = 0;  // since the process began
};

struct CompiledRegion {
  unsigned frame = 0, compile = 0;
  std::uint64_t calls = 0;
  std::uint64_t first_ns = 0;  // its first entry we saw
  std::string function;        // the user's function Dynamo compiled: "MLP.forward (file.py:31)"; "" unknown
  // CUDA graphs (inductor's cudagraph trees replay them inside the region):
  // cudaGraphLaunch / cuGraphLaunch calls made while it ran, and the kernels
  // of those replays (CUPTI: joined by correlation id).
  std::uint64_t graph_replays = 0, graph_kernels = 0, graph_kernel_ns = 0;
};

struct Recompile {
  unsigned frame = 0, compile = 0;   // the new graph
  std::uint64_t at_ns = 0;           // its first entry: just after its compile ended
  unsigned after = 0;                // the compile id of the frame that ran before (whose guards failed)
  std::string function;              // as in CompiledRegion
  std::vector<std::string> kernels;  // inductor kernels first called in it (its new code, if any)
  std::string action;                // the Lightning action open where it first ran; "" none or unknown
  int note = -1;                     // what Dynamo recorded of its compile: index in CompilesProcess::compiles
};

// A stack sample inside a function Dynamo compiled but outside all of its
// compiled regions, and not compiling: Python the graph breaks left to run
// eagerly between the graphs.
struct EagerSample {
  std::uint64_t ts_ns = 0;
  std::uint32_t weight = 1;  // sampling periods it stands for (sample_weight.h)
  std::uint32_t site = 0;    // CompilesProcess::eager_sites: the compiled function's line it was at
};

struct CompilesProcess {
  std::vector<CompiledRegion> regions;       // by (frame, compile)
  std::vector<Recompile> recompiles;         // in time order
  std::vector<DynamoCompileNote> compiles;   // Dynamo's record, by start time; empty: not read
  std::vector<GraphBreakNote> graph_breaks;  // most met first
  std::uint64_t graph_replays_outside = 0;   // CUDA graph replays outside every compiled region
  std::uint64_t graph_kernels_outside = 0;
  std::vector<EagerSample> eager;        // in time order
  std::vector<std::string> eager_sites;  // "Model.forward (model.py:40)": the line, not the first one
  std::uint64_t period_ns = 0;           // the on-CPU sampling period the samples stand for (0: none)
};

struct CompilesReport {
  std::uint64_t window_begin_ns = 0;  // the attach (0: unknown)
  std::map<std::uint32_t, CompilesProcess> procs;
  bool empty() const { return procs.empty(); }
};

class CompileAggregator {
 public:
  // With `actions` (fed each record before this one), recompiles are charged
  // to the action open where they first ran.
  explicit CompileAggregator(const ActionAggregator* actions = nullptr) : actions_(actions) {}
  void add(const lt_event_header& h, const std::byte* record);
  CompilesReport finish();

 private:
  struct Proc {
    std::map<std::pair<unsigned, unsigned>, CompiledRegion> regions;
    std::map<unsigned, unsigned> last_compile;  // per frame: the newest id that ran
    std::vector<Recompile> recompiles;
    std::map<std::uint32_t, bool> kernel_seen;  // op -> called before
    std::vector<std::uint32_t> open_recompile;  // kernels' first calls go to the newest recompile
    std::map<std::uint32_t, std::pair<std::uint64_t, std::uint32_t>> code_of_op;  // REGION_CODE: op -> code
    std::map<std::string, DynamoCompileNote> notes;                               // COMPILE_NOTE by id
    std::map<std::string, std::int64_t> breaks;                                   // graph break -> count
    // CUDA graph replays by correlation id -> the region they ran in
    // ({~0u, ~0u}: none), the oldest forgotten past kMaxReplays.
    std::map<std::uint32_t, std::pair<unsigned, unsigned>> replays;
    std::deque<std::uint32_t> replay_order;
    std::uint64_t replays_outside = 0, kernels_outside = 0;
    std::set<std::string> compiled;  // the functions regions ran for, as CompiledRegion::function
    // What each sampled code object is (cleared when a name or `compiled` changes).
    enum class Code : std::uint8_t { other, compiled, compiling, wrapper, graph };
    std::map<std::pair<std::uint64_t, std::uint32_t>, Code> code_kind;
    std::uint64_t code_kind_epoch = 0;
    std::vector<EagerSample> eager;
    std::vector<std::string> eager_sites;
    std::map<std::string, std::uint32_t> eager_site_index;
  };
  void on_sample(const lt_event_header& h, const lt_py_sample_event& e);
  struct Name {
    bool region = false;
    unsigned frame = 0, compile = 0;
    bool kernel = false;
    std::string text;
  };
  std::vector<Name> names_;  // by op index
  std::map<std::uint32_t, Proc> procs_;
  PySymbols symbols_;  // the regions' functions
  std::uint64_t window_begin_ = 0;
  std::int64_t wall_minus_mono_ns_ = 0;  // HOST_INFO: realtime - monotonic; 0 unknown
  std::uint64_t period_ns_ = 0;          // SAMPLER_INFO's on-CPU period
  const ActionAggregator* actions_ = nullptr;
};

// "Torch-Compiled Region: F/C" -> (F, C); false for any other name.
bool parse_region_name(const std::string& name, unsigned& frame, unsigned& compile);

}  // namespace lt
