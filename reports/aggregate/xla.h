// torch_xla's work per process and per Lightning action, from the XLA
// records (bpf/xlaprobe.bpf.c; docs/design-xla.md): uncached compiles,
// graph executions, host->device and device->host transfers, step marks,
// each counted exactly at its entry, and timed where torch_xla's own timer
// for it ended while we watched (its TimedSection: CompileTime, ExecuteTime,
// TransferToDeviceTime, ...).  A time is torch_xla's own where the timer's
// start was read at its end (where the section's destructor runs out of
// line); else it runs from the call's entry to the timer's end (a few
// microseconds more than torch_xla's own, whose section starts just inside
// the call).  A compile's or transfer's timer ends on the thread that
// called; an execution's when the execution completes, on a runtime thread,
// in the order the executions were issued.
//
// A call is charged to the innermost action open on its thread at its
// entry, or, on a thread outside every action, to the one open on the
// process's main thread.  A compile is a recompilation when it comes after
// a step (the stretch between two step marks) that executed graphs and
// compiled none -- the graphs had settled -- in an action that ran graphs
// in an earlier step: a new one (a new input shape, a changed Python path)
// was needed where the old ones had served.  Pure: the records in, the report out.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bpf/events.h"

namespace lt {

class ActionAggregator;

// One kind of runtime call: how many, and the time of those whose timer ended.
struct XlaCalls {
  std::uint64_t calls = 0;
  std::uint64_t tensors = 0;  // transfers: tensors moved
  std::uint64_t timed = 0;    // calls with a time
  std::uint64_t ns = 0;       // their total time
  std::uint64_t sized = 0;    // transfers whose bytes torch_xla recorded (InboundData, OutboundData)
  std::uint64_t bytes = 0;    // their bytes
  void add_time(std::uint64_t t) {
    ++timed;
    ns += t;
  }
};

struct XlaRow {
  std::string action;  // kNoAction outside every action
  XlaCalls compiles, executions, to_device, from_device;
  std::uint64_t mark_steps = 0;
  bool empty() const {
    return !compiles.calls && !executions.calls && !to_device.calls && !from_device.calls && !mark_steps;
  }
};

struct XlaCompile {
  std::uint64_t ts_ns = 0;  // its entry
  std::uint64_t ns = 0;     // its time (0: its timer did not end while attached)
  std::uint64_t step = 0;   // step marks seen before it in the process
  std::string action;       // as in XlaRow
  bool recompile = false;   // after the graphs had settled (above)
};

// One timed call, for the exports: from its entry, on its calling thread,
// for its time.
struct XlaSlice {
  std::uint32_t tid = 0;
  std::uint64_t begin_ns = 0, end_ns = 0;
  std::uint32_t site = 0;  // enum lt_xla_site
};
// "XLA compile", "XLA execute", ... (the exports' slice names).
const char* xla_site_name(std::uint32_t site);

struct XlaProcess {
  std::string version, device, library;  // from XLA_INFO ("" unknown)
  std::vector<XlaRow> actions;           // in order of first call
  XlaRow total;
  std::vector<XlaCompile> compiles;  // in time order (the first kMaxCompiles)
  std::uint64_t compiles_dropped = 0;
  // torch_xla's timers that ended while attached, by metric name (samples).
  std::map<std::string, std::uint64_t> timers;
  // Timer ends whose call began before the attach (no entry to pair with).
  std::uint64_t ends_unpaired = 0;
  // Transfer byte samples that could not be read back, or had no transfer
  // call on their thread to go to.
  std::uint64_t values_lost = 0;
  std::vector<XlaSlice> slices;  // keep_slices: the timed calls (the first kMaxSlices)
  std::uint64_t recompiles() const;
};

struct XlaReport {
  std::uint64_t window_begin_ns = 0;  // the attach (0: unknown)
  std::map<std::uint32_t, XlaProcess> procs;
  bool empty() const { return procs.empty(); }
};

// The call kind (enum lt_xla_site) a torch_xla timer measures, by its
// metric name, or 0 (exposed for unit tests).
std::uint32_t xla_timer_site(const std::string& metric);
// The transfer whose bytes a value metric counts: OutboundData (host to
// device), InboundData (device to host); else 0.
std::uint32_t xla_bytes_site(const std::string& metric);

class XlaAggregator {
 public:
  // keep_slices: every timed call kept for the exports (memory in
  // proportion to the trace: only when an export is asked for).
  explicit XlaAggregator(const ActionAggregator& actions, bool keep_slices = false);
  ~XlaAggregator();
  // Call right after actions.add(h, p) for the same record.
  void add(const lt_event_header& h, const std::byte* record);
  // A damaged stretch of a trace file: nothing pairs across it.
  void gap();
  XlaReport finish();

  static constexpr std::size_t kMaxCompiles = 100'000;
  static constexpr std::size_t kMaxSlices = 2'000'000;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace lt
