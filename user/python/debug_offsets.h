// CPython 3.13+ publishes its own layout for out-of-process tools:
// _Py_DebugOffsets, at the start of _PyRuntime.  Its own layout changes with
// each minor version, so it is described here as data (one line of field
// names per version, every field a uint64), and read from the live process.
// The layout we use is then built from what it publishes, with our table
// (offsets.cpp) for the fields it does not, and as the cross-check.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "user/python/offsets.h"

namespace lt::python {

struct DebugOffsets {
  int major = 3, minor = 0;
  bool free_threaded = false;
  std::map<std::string, std::uint64_t> fields;  // "thread_state.current_frame" -> 72
  std::optional<std::uint64_t> get(const std::string& name) const {
    auto it = fields.find(name);
    return it == fields.end() ? std::nullopt : std::optional<std::uint64_t>(it->second);
  }
};

// Minor versions whose _Py_DebugOffsets we can parse.
bool debug_offsets_known(int minor);
// Parses a raw copy of _Py_DebugOffsets as the `minor` format.  Throws
// lt::Error(unsupported) on a bad cookie, a version that is not `minor`, or
// a truncated buffer.
DebugOffsets parse_debug_offsets(const std::uint8_t* raw, std::size_t len, int minor);
// Reads and parses it from the live process.
DebugOffsets read_debug_offsets(pid_t pid, std::uint64_t runtime_addr, int minor);

// Overwrites every field of `layout` that the interpreter publishes with the
// published value.  A published value that differs from our table means a
// build we have not seen, whose unpublished fields we cannot trust either:
// throws lt::Error(unsupported) naming the field.
void apply_debug_offsets(const DebugOffsets& d, Layout& layout);

}  // namespace lt::python
