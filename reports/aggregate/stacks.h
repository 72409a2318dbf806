// Stack samples (on-CPU) and blocking periods (off-CPU) per process and per
// Lightning action: each is charged to the innermost action open on its
// thread at that moment, as the ActionAggregator sees the stream.  Frames
// are named from the PY_CODE / PY_LINE / NATIVE_SYM records that precede
// the samples in the stream, so this never reads a live process.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "reports/aggregate/actions.h"
#include "user/model/stack_profile.h"

namespace lt {

// The section for time outside every Lightning action.
inline constexpr const char* kNoAction = "[no Lightning action]";

struct ProcessStacks {
  std::uint32_t pid = 0;
  std::vector<StackProfile> on_cpu;   // one per action: first-begin order, kNoAction last
  std::vector<StackProfile> off_cpu;  // same, weights in nanoseconds blocked
  // GPU kernel time by the Python stack that launched it (--launch-stacks):
  // same order, weights in nanoseconds of kernel and copy time (CUPTI),
  // counts in kernels.  Exact: each launch carries its stack.
  std::vector<StackProfile> gpu;
  std::uint64_t samples = 0;
  std::uint64_t samples_without_python = 0;  // threads with no Python thread state
  std::uint64_t truncated = 0;               // deeper than LT_STACK_MAX frames
  std::uint64_t in_probe = 0;                // in one of our uprobes: in no stack (our overhead)
  std::uint64_t unknown_frames = 0;          // code objects gone before we read them
  // ...of which the interpreter's shutdown freed them: first sampled after
  // its hold at Py_FinalizeEx (threading._shutdown, atexit handlers), named
  // kFreedAtExit, not counted in unknown_frames.
  std::uint64_t freed_at_exit_frames = 0;
  std::uint64_t offcpu_periods = 0;
  std::uint64_t offcpu_open_at_end = 0;  // still blocked at detach: not counted
  std::uint64_t gpu_records = 0;         // kernels / copies joined to a launch stack
  // Stacks charged to an action whose opening frame is known but that no
  // frame of the stack runs: kept whole (see stack_cut.h).
  std::uint64_t uncut = 0;
  // Stacks charged to an action whose opening frame is not known (no
  // ACTION_ORIGIN, or one that names none): kept whole.
  std::uint64_t no_origin = 0;
};

struct StacksReport {
  std::uint64_t period_ns = 0;  // 0: no on-CPU sampling in this stream
  unsigned rate_hz = 0;
  bool off_cpu = false;
  std::vector<ProcessStacks> processes;  // only those with samples or periods
};

class StackAggregator {
 public:
  // `actions` must see each record before this does.  Each stack charged
  // to an action keeps only the frames below the one that opened it
  // (stack_cut.h), unless `full_stacks` (--full-stacks): then whole stacks.
  explicit StackAggregator(const ActionAggregator& actions, bool full_stacks = false);
  ~StackAggregator();
  void add(const lt_event_header& h, const std::byte* record);
  StacksReport finish();
  // Records were lost here (a damaged chunk of a trace file): off-CPU
  // periods and launches open now are not joined across the gap.
  void gap();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace lt
