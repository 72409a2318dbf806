// c10d calls by the Python stack that issued them (--launch-stacks): each
// COMM record with LT_COMM_HAS_STACK is followed on its thread by a
// COMM_STACK (bpf/commprobe.bpf.c), the thread's Python stack at the call's
// entry.  Rows are (collective kind, stack): calls and bytes, exact counts.
// Which frame is the call site is the reader's: torch's own wrappers
// (distributed_c10d.py's all_reduce, its logging decorator) are the
// innermost frames, the user's call is below them.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "user/model/stack_profile.h"
#include "user/model/trace.h"

namespace lt {

struct CommStackRow {
  std::uint8_t kind = 0;
  std::vector<StackFrame> stack;  // root first ("<unknown>" for a code object never named)
  std::uint64_t calls = 0, bytes = 0;
};

struct ProcessCommStacks {
  std::uint32_t pid = 0;
  std::vector<CommStackRow> rows;   // most calls first
  std::uint64_t calls = 0;          // calls with a stack
  std::uint64_t calls_without = 0;  // calls whose stack was not taken or lost
  std::uint64_t rows_dropped = 0;   // calls of stacks past the bound: in no row
};

struct CommStacksReport {
  std::vector<ProcessCommStacks> processes;  // by pid; those whose calls were to carry stacks
};

class CommStackAggregator {
 public:
  CommStackAggregator();
  ~CommStackAggregator();
  // Takes COMM, COMM_STACK, PY_CODE, PY_LINE and PROC_EXEC; ignores the rest.
  void add(const lt_event_header& h, const std::byte* record);
  // A gap in the stream: a COMM's stack may be lost across it.
  void gap();
  CommStacksReport finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace lt
