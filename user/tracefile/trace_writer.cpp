#include "user/tracefile/trace_writer.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <utility>

#include "user/core/clocks.h"
#include "user/core/errors.h"
#include "user/core/output_file.h"
#include "user/tracefile/trace_format.h"

namespace lt::tracefile {

namespace {
constexpr std::size_t kFlushBytes = 4u << 20;
constexpr std::uint64_t kFlushNs = 1'000'000'000ull;
}  // namespace

TraceWriter::TraceWriter(const std::string& path, int zstd_level) : level_(zstd_level), path_(path) {
  // Checked as every output (user/core/output_file.h), and locked: a second
  // recorder on the same file is refused before anything is truncated.
  fd_ = open_output_fd(path, OutputMode::exclusive_truncate, OutputAccess::owner_only);
  FileHeader h{};
  std::memcpy(h.magic, kFileMagic, sizeof h.magic);
  h.format_major = kFormatMajor;
  h.format_minor = kFormatMinor;
  h.event_abi = LT_EVENT_ABI_VERSION;
  h.header_size = sizeof(FileHeader);
  h.created_realtime_ns = clock_ns(CLOCK_REALTIME);
  h.created_monotonic_ns = clock_ns(CLOCK_MONOTONIC);
  last_flush_ns_ = h.created_monotonic_ns;
  try {
    write_all(&h, sizeof h);
  } catch (...) {
    // A disk that refused even the header: the descriptor (and its lock)
    // goes with the object that never was.
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

TraceWriter::~TraceWriter() {
  if (fd_ >= 0) {
    try {
      close();
    } catch (...) {
      // a destructor must not throw; close() reported nothing we can act on
    }
  }
}

void TraceWriter::write_all(const void* p, std::size_t n) {
  auto* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd_, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw Error(ExitCode::io, "cannot write " + path_ + ": " + std::strerror(errno));
    c += w;
    n -= static_cast<std::size_t>(w);
    bytes_written_ += static_cast<std::uint64_t>(w);
  }
}

void TraceWriter::append(const void* record, std::size_t size) {
  if (fd_ < 0) throw Error(ExitCode::internal, "trace writer used after close");
  lt_event_header h;
  std::memcpy(&h, record, sizeof h);
  if (pending_records_ == 0) first_ts_ = h.ts_ns;
  last_ts_ = h.ts_ns > last_ts_ ? h.ts_ns : last_ts_;
  auto* b = static_cast<const std::uint8_t*>(record);
  pending_.insert(pending_.end(), b, b + size);
  ++pending_records_;
  ++records_;
  if (pending_.size() >= kFlushBytes) flush();
}

void TraceWriter::maybe_flush(std::uint64_t now_ns) {
  if (now_ns - last_flush_ns_ >= kFlushNs) flush();
}

std::uint64_t TraceWriter::next_flush_ns() const {
  return pending_.empty() ? UINT64_MAX : last_flush_ns_ + kFlushNs;
}

void TraceWriter::flush() {
  last_flush_ns_ = clock_ns(CLOCK_MONOTONIC);
  if (pending_.empty()) return;
  std::vector<std::uint8_t> out(ZSTD_compressBound(pending_.size()));
  std::size_t n = ZSTD_compress(out.data(), out.size(), pending_.data(), pending_.size(), level_);
  if (ZSTD_isError(n)) throw Error(ExitCode::internal, std::string("zstd: ") + ZSTD_getErrorName(n));
  // Records this repetitive would look crafted to a reader (kMaxRatio,
  // kMaxRecordsPerByte): pad
  // with a skippable frame (magic, u32 length, zeros), which ZSTD_decompress
  // skips, so readers of format 1.0 read the chunk too.
  if (pending_.size() > std::uint64_t{kWriterMaxRatio} * n ||
      pending_records_ > std::uint64_t{kWriterMaxRecordsPerByte} * n) {
    const std::size_t want =
        std::max<std::size_t>(pending_.size() / kWriterMaxRatio, pending_records_ / kWriterMaxRecordsPerByte) + 1;
    const std::size_t pad = std::max<std::size_t>(want - n, 8) - 8;
    out.resize(n + 8 + pad);
    const std::uint32_t magic = 0x184D2A50, len = static_cast<std::uint32_t>(pad);
    std::memcpy(out.data() + n, &magic, 4);
    std::memcpy(out.data() + n + 4, &len, 4);
    std::memset(out.data() + n + 8, 0, pad);
    n += 8 + pad;
  }
  ChunkHeader c{};
  c.magic = kChunkMagic;
  c.flags = kChunkZstd;
  c.raw_size = static_cast<std::uint32_t>(pending_.size());
  c.stored_size = static_cast<std::uint32_t>(n);
  c.record_count = pending_records_;
  c.crc32 = static_cast<std::uint32_t>(::crc32(0L, out.data(), static_cast<uInt>(n)));
  c.first_ts_ns = first_ts_;
  c.last_ts_ns = last_ts_;
  // One write for header and payload, so a kill leaves either the whole
  // chunk or a short tail the reader recognises as cut.
  std::vector<std::uint8_t> buf(sizeof c + n);
  std::memcpy(buf.data(), &c, sizeof c);
  std::memcpy(buf.data() + sizeof c, out.data(), n);
  write_all(buf.data(), buf.size());
  pending_.clear();
  pending_records_ = 0;
}

std::vector<std::uint8_t> TraceWriter::take_pending() {
  pending_records_ = 0;
  return std::exchange(pending_, {});
}

void TraceWriter::abandon() {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  pending_.clear();
  pending_records_ = 0;
}

void TraceWriter::close() {
  if (fd_ < 0) return;
  flush();
  // A disk that takes the writes but not their syncing (NFS, a full
  // thin-provisioned volume) is a write error too.
  const bool synced = fsync(fd_) == 0 || errno == EINVAL || errno == EROFS;
  const int err = errno;
  const bool closed = ::close(fd_) == 0;
  fd_ = -1;
  if (!synced || !closed)
    throw Error(ExitCode::io, "cannot write " + path_ + ": " + std::strerror(synced ? errno : err));
}

}  // namespace lt::tracefile
