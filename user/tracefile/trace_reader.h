// Reads a trace file back into a Trace.  Never trusts the file: every size
// is bounded before use, every chunk is checksummed, and a file cut short
// (recorder killed) or damaged yields the records up to the last good chunk
// plus a warning saying what was lost.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "reports/model/trace.h"

namespace lt::tracefile {

struct ReadResult {
  std::uint64_t chunks = 0;
  std::uint64_t records = 0;
  std::uint64_t bytes_cut = 0;        // bytes after the last complete chunk
  std::vector<std::string> warnings;  // one line each
};

// Throws lt::Error(bad_trace) if `bytes` is not a trace at all.
ReadResult read_trace(std::string_view bytes, Trace& out);
// Throws lt::Error(io) if the file cannot be read.
ReadResult read_trace_file(const std::string& path, Trace& out);

}  // namespace lt::tracefile
