// Turns the (code object, instruction) pairs of stack samples into names,
// files and lines, by reading the code objects out of the target, once per
// (pid, code, checksum).  What it learns goes into the event stream as
// PY_CODE / PY_LINE records, ahead of the first sample that needs them, so
// reports (live or from a trace file) never read the target.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "bpf/events.h"
#include "user/python/discovery.h"

namespace lt::python {

class Symbolizer {
 public:
  using Emit = std::function<void(const void* record, std::size_t size)>;
  explicit Symbolizer(Emit emit) : emit_(std::move(emit)) {}
  // Emits whatever `e` needs that was not described yet.  `forked_from`:
  // the processes this one was forked from, nearest first; a code object
  // made before the fork is at the same address there, and is read there
  // when the process itself has exited (short-lived DataLoader workers).
  // `shutting_down_since`: when the process's interpreter went on past
  // its hold at Py_FinalizeEx (0: it has not); a code object first sampled
  // after that and unreadable was freed by the shutdown.
  void describe(const lt_py_sample_event& e, const Interpreter& interp, const std::vector<pid_t>& forked_from = {},
                std::uint64_t shutting_down_since = 0);
  // Emits the PY_CODE of one code object (a compiled region's function,
  // REGION_CODE), once.
  void describe_code(pid_t pid, std::uint64_t code, std::uint32_t checksum, const Interpreter& interp,
                     std::uint64_t ts) {
    this->code({pid, code, checksum}, interp, ts, {}, false);
  }
  // A process exec'd or exited: its addresses mean something else now.
  void forget(pid_t pid);
  // Every instruction's line is emitted again when next described (watch's
  // ring keeps lines per segment: KeepInWindow::segment); code objects stay
  // named once.
  void forget_lines() { lines_.clear(); }
  // Code objects met for the first time so far (read, or found gone): the
  // drain loop chases while it grows (Session::run).
  std::uint64_t codes_met() const { return codes_met_; }

 private:
  struct Code {
    bool readable = false;
    int first_line = 0;
    std::vector<std::uint8_t> table;  // co_lnotab / co_linetable
  };
  using CodeKey = std::tuple<pid_t, std::uint64_t, std::uint32_t>;
  const Code& code(const CodeKey& key, const Interpreter& interp, std::uint64_t ts,
                   const std::vector<pid_t>& forked_from, bool at_exit);
  Emit emit_;
  std::map<CodeKey, Code> codes_;
  std::uint64_t codes_met_ = 0;
  std::set<std::tuple<pid_t, std::uint64_t, std::uint32_t, std::int32_t>> lines_;
};

// The checksum BPF computes over a code object's argcount, flags, first
// line and co_filename pointer (bpf/pyread.bpf.h): recomputed here to
// reject a reused address.  The filename tells apart module bodies (all
// argcount 0, the same flags, first line 1) freed and reallocated at one
// address as one import follows another: their files' str objects stay
// alive as the modules' __file__.
std::uint32_t code_checksum(std::uint32_t argcount, std::uint32_t flags, std::uint32_t first_line,
                            std::uint64_t filename);

}  // namespace lt::python
