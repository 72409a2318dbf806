// Weighted call stacks: what the sampler (on-CPU) and the scheduler probe
// (off-CPU) produce once symbolised.  One StackProfile per (process, action);
// the Advanced report, the collapsed/flamegraph/speedscope exports and the
// HTML flame graph are pure functions of these.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lt {

// A Python frame whose code object its interpreter's shutdown freed before
// it could be read (LT_CODE_FREED_AT_EXIT): what ran in Py_FinalizeEx.
inline constexpr const char* kFreedAtExit = "<freed at exit>";

struct StackFrame {
  std::string function;  // qualified name (co_qualname on 3.11+, co_name before)
  std::string file;      // co_filename as the target has it (full path)
  int line = 0;          // line being executed (0: unknown)
  int first_line = 0;    // co_firstlineno: the `def` line (pstats' lineno)
  bool native = false;   // a native frame (function = symbol, file = DSO)
  bool operator==(const StackFrame&) const = default;
};

// The name reports show for a Python function (co_qualname / co_name):
// itself, except Dynamo's graph-break resume functions, which continue a
// user's function after a graph break and are named after it
// (`torch_dynamo_resume_in_forward_at_33`, nested for later breaks): shown
// as that function, `MLP.forward [after graph break]`; their file and lines
// are the user's own.
std::string python_function_name(std::string_view qualname);

enum class StackUnit { samples, nanoseconds };

struct WeightedStack {
  std::vector<std::uint32_t> frames;  // indices into StackProfile::frames, root first
  std::uint64_t weight = 0;           // samples, or nanoseconds blocked
  std::uint64_t count = 0;            // samples, or number of blocking periods
};

struct StackProfile {
  std::string name;  // the action ("[no Lightning action]" outside them)
  StackUnit unit = StackUnit::samples;
  std::uint64_t period_ns = 0;  // samples: nanoseconds per sample (estimates)
  std::vector<StackFrame> frames;
  std::vector<WeightedStack> stacks;
  std::uint64_t total_weight() const {
    std::uint64_t t = 0;
    for (auto& s : stacks) t += s.weight;
    return t;
  }
};

// "function (file:line)" as py-spy labels a frame; native frames are
// "function (dso)".  Shared by every export so the same frame reads the same.
std::string frame_label(const StackFrame& f);

}  // namespace lt
