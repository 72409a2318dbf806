// Python frame names for stacks that ride along with other records (the
// Python stack of an allocation, MEM_STACK): the PY_CODE / PY_LINE records
// the collector writes before the first record that needs them, per process.
// StackAggregator keeps its own table (it also caches whole samples and
// native leaves); this one is the plain lookup the memory report needs.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "user/model/stack_profile.h"
#include "user/model/trace.h"

namespace lt {

class PySymbols {
 public:
  // Takes PY_CODE, PY_LINE and PROC_EXEC (a new program: its codes mean
  // other things); ignores every other record.
  void add(const lt_event_header& h, const std::byte* record);
  // The Python frames of a stack record, root first ("<unknown>" for a
  // code object never named).  Native leaves are left out: a stack taken at
  // an allocator's entry always ends in the allocator.
  std::vector<StackFrame> frames(const lt_py_sample_event& e) const;

 private:
  struct Code {
    std::string name, file;
    int first_line = 0;
  };
  using CodeKey = std::pair<std::uint64_t, std::uint32_t>;                 // code, checksum
  using LineKey = std::tuple<std::uint64_t, std::uint32_t, std::int32_t>;  // code, checksum, lasti
  struct Process {
    std::map<CodeKey, Code> codes;
    std::map<LineKey, int> lines;
  };
  std::map<std::uint32_t, Process> by_pid_;
};

}  // namespace lt
