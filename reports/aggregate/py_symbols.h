// The names of a record stream's stacks, shared by every aggregator that
// shows Python frames (stacks, memory, collectives, compiled regions): the
// PY_CODE / PY_LINE / NATIVE_SYM records the collector writes before the
// first record that needs them, per process; a PROC_EXEC drops a
// process's (a new program: its addresses mean other things).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "user/model/stack_profile.h"
#include "user/model/trace.h"

namespace lt {

struct PyCodeSymbol {
  std::string name, file;  // name as python_function_name gives it
  int first_line = 0;
  bool readable = false;
  bool freed_at_exit = false;  // unreadable: first sampled as its interpreter shut down
};

class PySymbols {
 public:
  // Takes PY_CODE, PY_LINE, NATIVE_SYM and PROC_EXEC; ignores every other
  // record.
  void add(const lt_event_header& h, const std::byte* record);
  // Changes whenever a name does (what was looked up before may be stale).
  std::uint64_t epoch() const { return epoch_; }

  // nullptr: never named.
  const PyCodeSymbol* code(std::uint32_t pid, std::uint64_t code, std::uint32_t checksum) const;
  // The line of an instruction; 0 unknown.
  int line(std::uint32_t pid, std::uint64_t code, std::uint32_t checksum, std::int32_t lasti) const;
  // A sampled native leaf's frame; nullptr unknown.
  const StackFrame* native(std::uint32_t pid, std::uint64_t ip) const;
  // One Python frame: named, kFreedAtExit, or "<unknown>".
  StackFrame frame(std::uint32_t pid, const lt_py_frame& f) const;

  // The Python frames of a stack record, root first.  Native leaves are
  // left out: a stack taken at an allocator's entry always ends in the
  // allocator.
  std::vector<StackFrame> frames(const lt_py_sample_event& e) const;

 private:
  using CodeKey = std::pair<std::uint64_t, std::uint32_t>;                 // code, checksum
  using LineKey = std::tuple<std::uint64_t, std::uint32_t, std::int32_t>;  // code, checksum, lasti
  struct Process {
    std::map<CodeKey, PyCodeSymbol> codes;
    std::map<LineKey, int> lines;
    // Native leaf frames: one NATIVE_SYM per sampled instruction address,
    // and over a long attach the sampled addresses of a hot function keep
    // coming; each names its frame by index, each frame is stored once.
    std::unordered_map<std::uint64_t, std::uint32_t> natives;  // by instruction address
    std::vector<StackFrame> native_frames;
    std::map<std::pair<std::string, std::string>, std::uint32_t> native_frame_index;  // (function, dso)
    bool add_native(std::uint64_t ip, StackFrame f);  // whether ip now names another frame
    // NATIVE_FUNC: every address in [start, end) -> a frame.
    std::map<std::uint64_t, std::pair<std::uint64_t, std::uint32_t>> native_ranges;  // start -> (end, frame)
    bool add_native_range(std::uint64_t start, std::uint64_t end, StackFrame f);
    std::uint32_t frame_index(StackFrame f);
  };
  const Process* process(std::uint32_t pid) const;
  std::map<std::uint32_t, Process> by_pid_;
  std::uint64_t epoch_ = 1;
};

}  // namespace lt
