// Reads a trace file back, streaming: records go to a callback chunk by
// chunk, so a 10M-event trace needs one chunk in memory, not the whole
// stream, and a pipe reads as well as a file.  Never trusts the input:
// every size is bounded before use, every chunk is checksummed; a damaged
// chunk is skipped up to the next intact one (each damaged range reported),
// and a file cut short (recorder killed) yields the records up to the last
// good chunk plus a warning saying what was lost.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "user/model/trace.h"

namespace lt::tracefile {

// Bytes [offset, offset + length) of the input held no intact chunk: the
// records in them are lost.
struct DamagedRange {
  std::uint64_t offset = 0, length = 0;
  std::string why;  // what was wrong at `offset` (checksum mismatch, ...)
};

struct ReadResult {
  std::uint64_t chunks = 0;
  std::uint64_t records = 0;
  std::uint64_t bytes_cut = 0;        // bytes after the last complete chunk (a killed recorder)
  std::vector<DamagedRange> damaged;  // data lost inside the stream
  std::vector<std::string> warnings;  // one line each
  bool data_lost() const { return !damaged.empty(); }
};

using RecordSink = std::function<void(const lt_event_header&, const std::byte*)>;
// Called between records at the point of each damaged range, so consumers
// can stop pairing across it (a start before it with a stop after it).
using DamageSink = std::function<void(const DamagedRange&)>;

// Throws lt::Error(bad_trace) if the input is not a trace at all; lt::Error(io)
// if the file cannot be read.  `path` may be "-" (standard input), a pipe or
// a FIFO: the input is read once, front to back, never seeked.
ReadResult read_trace(std::string_view bytes, const RecordSink& sink, const DamageSink& on_damage = {});
ReadResult read_trace_file(const std::string& path, const RecordSink& sink, const DamageSink& on_damage = {});

// A trace file already open (read from its offset, front to back; `fd`
// stays open): one whose name may be gone meanwhile (the flight recorder's
// segment a capture reads, dropped while the capture is written).
ReadResult read_trace_fd(int fd, const std::string& name, const RecordSink& sink, const DamageSink& on_damage = {});

// Convenience: everything into a Trace.
ReadResult read_trace(std::string_view bytes, Trace& out);
ReadResult read_trace_file(const std::string& path, Trace& out);

}  // namespace lt::tracefile
