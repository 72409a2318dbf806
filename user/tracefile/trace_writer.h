// Writes a trace file as records arrive.  Records are buffered and written
// as one compressed chunk at least every second (and every 4 MiB), with
// write(2) straight to the file: if the recorder is killed, every chunk
// written so far is intact on disk and the reader stops cleanly after it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "bpf/events.h"

namespace lt::tracefile {

class TraceWriter {
 public:
  // Creates or truncates `path`; throws lt::Error(io).
  explicit TraceWriter(const std::string& path, int zstd_level = 3);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  void append(const void* record, std::size_t size);
  // Writes a chunk if a second has passed since the last one.
  void maybe_flush(std::uint64_t now_monotonic_ns);
  // When maybe_flush() next writes (UINT64_MAX: nothing pending).
  std::uint64_t next_flush_ns() const;
  void flush();
  // Flushes and fsyncs; further appends are errors.
  void close();
  // Closes without writing what is pending (after a write error); the
  // chunks already written stay readable.
  void abandon();
  // The records appended and not yet written (whole records, as appended),
  // handed over: after a write error, so that they need not be lost.
  std::vector<std::uint8_t> take_pending();

  std::uint64_t bytes_written() const { return bytes_written_; }
  std::uint64_t records() const { return records_; }

 private:
  int fd_ = -1;
  int level_;
  std::string path_;
  std::vector<std::uint8_t> pending_;
  std::uint32_t pending_records_ = 0;
  std::uint64_t first_ts_ = 0, last_ts_ = 0;
  std::uint64_t last_flush_ns_ = 0;
  std::uint64_t bytes_written_ = 0, records_ = 0;
  void write_all(const void* p, std::size_t n);
};

}  // namespace lt::tracefile
