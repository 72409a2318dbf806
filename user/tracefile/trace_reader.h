// Reads a trace file back, streaming: records go to a callback chunk by
// chunk, so a 10M-event trace needs one chunk in memory, not the whole
// stream.  Never trusts the file: every size is bounded before use, every
// chunk is checksummed, and a file cut short (recorder killed) or damaged
// yields the records up to the last good chunk plus a warning saying what
// was lost.
#pragma once
#include <cstdint>
#include <functional>
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

using RecordSink = std::function<void(const lt_event_header&, const std::byte*)>;

// Throws lt::Error(bad_trace) if the input is not a trace at all; lt::Error(io)
// if the file cannot be read.
ReadResult read_trace(std::string_view bytes, const RecordSink& sink);
ReadResult read_trace_file(const std::string& path, const RecordSink& sink);

// Convenience: everything into a Trace.
ReadResult read_trace(std::string_view bytes, Trace& out);
ReadResult read_trace_file(const std::string& path, Trace& out);

}  // namespace lt::tracefile
