#include "user/tracefile/trace_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>

#include "user/core/errors.h"
#include "user/tracefile/trace_format.h"

namespace lt::tracefile {

namespace {

// Where bytes come from: a memory buffer (fuzzer, tests) or a file
// descriptor (a file, a pipe, a FIFO, stdin).  `read` returns how many bytes
// it got; 0 only at the end.
class Source {
 public:
  virtual ~Source() = default;
  virtual std::size_t read(char* into, std::size_t n) = 0;
};

class MemorySource : public Source {
 public:
  explicit MemorySource(std::string_view b) : b_(b) {}
  std::size_t read(char* into, std::size_t n) override {
    n = std::min(n, b_.size() - at_);
    if (n) std::memcpy(into, b_.data() + at_, n);  // an empty view may have no data pointer
    at_ += n;
    return n;
  }

 private:
  std::string_view b_;
  std::size_t at_ = 0;
};

class FdSource : public Source {
 public:
  FdSource(int fd, std::string name) : fd_(fd), name_(std::move(name)) {}
  std::size_t read(char* into, std::size_t n) override {
    for (;;) {
      ssize_t got = ::read(fd_, into, n);
      if (got >= 0) return static_cast<std::size_t>(got);
      if (errno != EINTR) throw Error(ExitCode::io, "cannot read " + name_ + ": " + std::strerror(errno));
    }
  }

 private:
  int fd_;
  std::string name_;
};

// A window onto the input that can look ahead (a chunk, or a candidate
// chunk while resynchronising) without seeking: bytes stay buffered until
// skipped.  Compacts only when the consumed part is at least as large as
// what remains, so every byte is moved a bounded number of times.
class Window {
 public:
  explicit Window(Source& s) : src_(s) {}
  // At least n bytes available from the current position; false if the
  // input ends first.
  bool fill(std::size_t n) {
    while (avail() < n && !eof_) {
      if (head_ > 0 && head_ >= avail()) {
        buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(head_));
        head_ = 0;
      }
      // Grow by what is asked, read in steps: a lying size in a 1 KB
      // input never makes us allocate 64 MiB.
      const std::size_t want = std::min<std::size_t>(n - avail(), kStep);
      const std::size_t old = buf_.size();
      buf_.resize(old + want);
      const std::size_t got = src_.read(buf_.data() + old, want);
      buf_.resize(old + got);
      total_ += got;
      if (got == 0) eof_ = true;
    }
    return avail() >= n;
  }
  const char* at() const { return buf_.data() + head_; }
  std::size_t avail() const { return buf_.size() - head_; }
  void skip(std::size_t n) {
    head_ += n;
    offset_ += n;
  }
  std::uint64_t offset() const { return offset_; }  // of at(), from the start of the input
  std::uint64_t read_so_far() const { return total_; }

 private:
  static constexpr std::size_t kStep = 1u << 20;
  Source& src_;
  std::vector<char> buf_;
  std::size_t head_ = 0;
  std::uint64_t offset_ = 0, total_ = 0;
  bool eof_ = false;
};

enum class Status { ok, short_input, damaged, gave_up };

struct Probe {
  Status status;
  std::string why;
  ChunkHeader c{};
};

// Work spent on candidate chunks while resynchronising (bytes checksummed
// and decompressed): bounded by a multiple of the input read so far, so a
// crafted file full of fake chunk headers costs linear time, not quadratic.
struct ResyncBudget {
  std::uint64_t spent = 0;
  bool allow(std::uint64_t cost, const Window& w) {
    spent += cost;
    return spent <= 4 * w.read_so_far() + (16u << 20);
  }
};

// Checks the chunk at the window's position without consuming it; when ok,
// `raw` holds its records, which tile it exactly in the stated number.
Probe probe_chunk(Window& w, std::vector<char>& raw, ResyncBudget* budget) {
  Probe p{Status::ok, {}, {}};
  ChunkHeader& c = p.c;
  if (!w.fill(sizeof c)) return {Status::short_input, "file ends inside a chunk header", {}};
  std::memcpy(&c, w.at(), sizeof c);
  if (c.magic != kChunkMagic) return {Status::damaged, "bad chunk magic", c};
  if (c.flags != kChunkZstd || c.raw_size > kMaxChunkRaw || c.stored_size > kMaxChunkStored)
    return {Status::damaged, "impossible sizes or flags", c};
  if (c.raw_size > std::uint64_t{kMaxRatio} * c.stored_size + kRatioSlack)
    return {Status::damaged, "implausible compression ratio", c};
  if (c.record_count > std::uint64_t{kMaxRecordsPerByte} * c.stored_size + kRatioSlack)
    return {Status::damaged, "implausible record count", c};
  if (!w.fill(sizeof c + c.stored_size)) return {Status::short_input, "file ends inside a chunk", c};
  if (budget && !budget->allow(c.stored_size, w)) return {Status::gave_up, "", c};
  const char* stored = w.at() + sizeof c;
  if (static_cast<std::uint32_t>(::crc32(0L, reinterpret_cast<const Bytef*>(stored), c.stored_size)) != c.crc32)
    return {Status::damaged, "checksum mismatch", c};
  if (budget && !budget->allow(c.raw_size, w)) return {Status::gave_up, "", c};
  raw.resize(c.raw_size);
  std::size_t n = ZSTD_decompress(raw.data(), raw.size(), stored, c.stored_size);
  if (ZSTD_isError(n) || n != c.raw_size) return {Status::damaged, "bad compressed data", c};
  std::size_t pos = 0, count = 0;
  while (pos < raw.size()) {
    lt_event_header h;
    if (raw.size() - pos < sizeof h) return {Status::damaged, "records do not fit the chunk", c};
    std::memcpy(&h, raw.data() + pos, sizeof h);
    if (h.size < sizeof h || h.size > raw.size() - pos) return {Status::damaged, "records do not fit the chunk", c};
    pos += h.size;
    ++count;
  }
  if (count != c.record_count) return {Status::damaged, "records do not fit the chunk", c};
  return p;
}

// Moves the window to the next chunk that checks out, scanning byte by byte
// for its magic.  The CRC over the whole payload (and, behind it, an exact
// decompressed size and record count) makes a false match in compressed
// data practically impossible, so no change of format is needed for this.
Status resync(Window& w, std::vector<char>& raw, ResyncBudget& budget) {
  const char magic[4] = {'L', 'T', 'C', 'K'};
  static_assert(kChunkMagic == 0x4b43544c);
  for (;;) {
    if (!w.fill(sizeof magic)) {
      w.skip(w.avail());
      return Status::short_input;
    }
    const void* hit = memmem(w.at(), w.avail(), magic, sizeof magic);
    if (!hit) {
      w.skip(w.avail() - (sizeof magic - 1));  // a magic may straddle what comes next
      if (!w.fill(sizeof magic)) {
        w.skip(w.avail());
        return Status::short_input;
      }
      continue;
    }
    w.skip(static_cast<std::size_t>(static_cast<const char*>(hit) - w.at()));
    Probe p = probe_chunk(w, raw, &budget);
    if (p.status == Status::ok || p.status == Status::gave_up) return p.status;
    w.skip(1);
  }
}

void deliver(const std::vector<char>& raw, std::uint16_t event_abi, const RecordSink& sink) {
  // The only layout change since event ABI 1: PY_SAMPLE grew ops[] (ABI 2).
  constexpr std::size_t kSampleSizeAbi1 = offsetof(lt_py_sample_event, ops);
  static_assert(sizeof(lt_py_sample_event) == kSampleSizeAbi1 + sizeof(std::uint32_t) * LT_OPS_DEPTH);
  lt_py_sample_event upgraded;
  for (std::size_t pos = 0; pos < raw.size();) {
    lt_event_header h;
    std::memcpy(&h, raw.data() + pos, sizeof h);
    if (event_abi < 2 && (h.kind == LT_EV_PY_SAMPLE || h.kind == LT_EV_OFFCPU_BEGIN) && h.size == kSampleSizeAbi1) {
      // ABI 1 samples had no ops[] tail (and 0 where nops now is): the
      // same record, zero-extended, reads as ABI 2.
      std::memset(&upgraded, 0, sizeof upgraded);
      std::memcpy(&upgraded, raw.data() + pos, h.size);
      upgraded.hdr.size = sizeof upgraded;
      sink(upgraded.hdr, reinterpret_cast<const std::byte*>(&upgraded));
    } else {
      sink(h, reinterpret_cast<const std::byte*>(raw.data() + pos));
    }
    pos += h.size;
  }
}

ReadResult read_from(Source& src, const std::string& what, const RecordSink& sink, const DamageSink& on_damage) {
  ReadResult r;
  Window w(src);
  FileHeader fh{};
  if (!w.fill(1)) throw Error(ExitCode::bad_trace, what + "empty input: not an ltrace-bpf trace file");
  if (!w.fill(sizeof fh) || std::memcmp(w.at(), kFileMagic, sizeof kFileMagic) != 0)
    throw Error(ExitCode::bad_trace, what + "not an ltrace-bpf trace file (bad magic)");
  std::memcpy(&fh, w.at(), sizeof fh);
  if (fh.format_major != kFormatMajor)
    throw Error(ExitCode::bad_trace, "trace format " + std::to_string(fh.format_major) + "." +
                                         std::to_string(fh.format_minor) + " is not supported (this reads " +
                                         std::to_string(kFormatMajor) + ".x)");
  if (fh.event_abi > LT_EVENT_ABI_VERSION)
    throw Error(ExitCode::bad_trace,
                "trace written by a newer ltrace-bpf (event ABI " + std::to_string(fh.event_abi) + ")");
  if (fh.header_size < sizeof fh || fh.header_size > 4096 || !w.fill(fh.header_size))
    throw Error(ExitCode::bad_trace, "trace file header is damaged");
  w.skip(fh.header_size);

  std::vector<char> raw;
  ResyncBudget budget;
  while (w.fill(1)) {
    const std::uint64_t start = w.offset();
    Probe p = probe_chunk(w, raw, nullptr);
    if (p.status == Status::ok) {
      deliver(raw, fh.event_abi, sink);
      r.records += p.c.record_count;
      ++r.chunks;
      w.skip(sizeof p.c + p.c.stored_size);
      continue;
    }
    // Damaged, or cut short: the next intact chunk, if any, tells which.
    w.skip(1);
    Status next = resync(w, raw, budget);
    const std::uint64_t skipped = w.offset() - start;
    if (next == Status::short_input && p.status == Status::short_input) {
      r.bytes_cut = skipped;
      r.warnings.push_back(p.why + ": its last " + std::to_string(skipped) +
                           " byte(s) cut (an incomplete chunk, not read; was the recorder killed, or the file cut?)");
      break;
    }
    DamagedRange d{start, skipped, p.why};
    if (next == Status::gave_up) {
      // Far more fake chunk headers than a damaged file has: give up on
      // the rest rather than spend superlinear time on it.
      w.skip(w.avail());
      while (w.fill(1 << 20)) w.skip(w.avail());
      w.skip(w.avail());
      d.length = w.offset() - start;
      r.warnings.push_back("damaged chunk at byte " + std::to_string(start) + " (" + p.why +
                           "): gave up looking for "
                           "an intact chunk after it (too many false chunk headers); " +
                           std::to_string(d.length) + " byte(s) skipped");
    } else {
      r.warnings.push_back("damaged chunk at byte " + std::to_string(start) + " (" + p.why + "): bytes " +
                           std::to_string(start) + ".." + std::to_string(start + skipped) + " skipped (" +
                           std::to_string(skipped) + " byte(s)), " +
                           (next == Status::ok ? "reading on at the next intact chunk" : "no intact chunk after it"));
    }
    r.damaged.push_back(d);
    if (on_damage) on_damage(d);
    if (next != Status::ok) break;
  }
  return r;
}

RecordSink into(Trace& out) {
  return [&out](const lt_event_header& h, const std::byte* p) { out.append(p, h.size); };
}

// What a non-regular path is, in words, for the message that refuses it.
const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  return nullptr;
}

}  // namespace

ReadResult read_trace(std::string_view bytes, const RecordSink& sink, const DamageSink& on_damage) {
  MemorySource src(bytes);
  return read_from(src, "", sink, on_damage);
}

ReadResult read_trace_file(const std::string& path, const RecordSink& sink, const DamageSink& on_damage) {
  const bool std_in = path == "-";
  const std::string name = std_in ? "standard input" : path;
  int fd = std_in ? STDIN_FILENO : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(ExitCode::io, "cannot open " + path + ": " + std::strerror(errno));
  struct Closer {
    int fd;
    bool own;
    ~Closer() {
      if (own) ::close(fd);
    }
  } closer{fd, !std_in};
  struct stat st {};
  if (fstat(fd, &st) != 0) throw Error(ExitCode::io, "cannot read " + name + ": " + std::strerror(errno));
  if (const char* kind = kind_of(st.st_mode)) {
    if (S_ISCHR(st.st_mode) && isatty(fd))
      throw Error(ExitCode::io, "cannot read " + name +
                                    ": it is a terminal, not a trace file (pipe one in: "
                                    "ltrace-bpf report - < FILE)");
    throw Error(ExitCode::io, "cannot read " + name + ": it is " + kind + ", not a trace file" +
                                  (S_ISDIR(st.st_mode) ? std::string(" (") + std::strerror(EISDIR) + ")" : ""));
  }
  // Regular files, pipes, FIFOs and sockets are all read as a stream; the
  // messages about a stream say what it is.
  std::string what;
  if (S_ISFIFO(st.st_mode))
    what = name + " (" + (std_in ? "a pipe" : "a pipe or FIFO") + "): ";
  else if (S_ISSOCK(st.st_mode))
    what = name + " (a socket): ";
  else if (std_in)
    what = name + ": ";
  FdSource src(fd, name);
  return read_from(src, what, sink, on_damage);
}

ReadResult read_trace_fd(int fd, const std::string& name, const RecordSink& sink, const DamageSink& on_damage) {
  FdSource src(fd, name);
  return read_from(src, "", sink, on_damage);
}

ReadResult read_trace(std::string_view bytes, Trace& out) {
  return read_trace(bytes, into(out));
}
ReadResult read_trace_file(const std::string& path, Trace& out) {
  return read_trace_file(path, into(out));
}

}  // namespace lt::tracefile
