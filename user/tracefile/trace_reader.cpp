#include "user/tracefile/trace_reader.h"

#include <sys/stat.h>
#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "user/core/errors.h"
#include "user/tracefile/trace_format.h"

namespace lt::tracefile {

namespace {

// Where bytes come from: a memory buffer (fuzzer, tests) or a file read
// chunk by chunk.  `read` returns how many bytes it got (short at the end).
class Source {
 public:
  virtual ~Source() = default;
  virtual std::size_t read(char* into, std::size_t n) = 0;
  virtual std::uint64_t remaining() = 0;
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
  std::uint64_t remaining() override { return b_.size() - at_; }

 private:
  std::string_view b_;
  std::size_t at_ = 0;
};

class FileSource : public Source {
 public:
  explicit FileSource(const std::string& path) : in_(path, std::ios::binary) {
    const int e = errno;
    // A directory opens; reading it fails: say so up front.
    struct stat st {};
    if (in_ && stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      throw Error(ExitCode::io, "cannot read " + path + ": " + std::strerror(EISDIR));
    if (!in_) throw Error(ExitCode::io, "cannot open " + path + ": " + std::strerror(e ? e : EIO));
    in_.seekg(0, std::ios::end);
    size_ = static_cast<std::uint64_t>(in_.tellg());
    in_.seekg(0);
  }
  std::size_t read(char* into, std::size_t n) override {
    in_.read(into, static_cast<std::streamsize>(n));
    auto got = static_cast<std::size_t>(in_.gcount());
    at_ += got;
    return got;
  }
  std::uint64_t remaining() override { return size_ - at_; }

 private:
  std::ifstream in_;
  std::uint64_t size_ = 0, at_ = 0;
};

ReadResult read_from(Source& src, const RecordSink& sink) {
  ReadResult r;
  FileHeader fh{};
  if (src.read(reinterpret_cast<char*>(&fh), sizeof fh) != sizeof fh ||
      std::memcmp(fh.magic, kFileMagic, sizeof kFileMagic) != 0)
    throw Error(ExitCode::bad_trace, "not an ltrace-bpf trace file (bad magic)");
  if (fh.format_major != kFormatMajor)
    throw Error(ExitCode::bad_trace, "trace format " + std::to_string(fh.format_major) + "." +
                                         std::to_string(fh.format_minor) + " is not supported (this reads " +
                                         std::to_string(kFormatMajor) + ".x)");
  if (fh.event_abi > LT_EVENT_ABI_VERSION)
    throw Error(ExitCode::bad_trace,
                "trace written by a newer ltrace-bpf (event ABI " + std::to_string(fh.event_abi) + ")");
  if (fh.header_size < sizeof fh || fh.header_size - sizeof fh > src.remaining())
    throw Error(ExitCode::bad_trace, "trace file header is damaged");
  std::vector<char> skip(fh.header_size - sizeof fh);
  src.read(skip.data(), skip.size());

  std::uint64_t offset = fh.header_size;
  // The only layout change since event ABI 1: PY_SAMPLE grew ops[] (ABI 2).
  constexpr std::size_t kSampleSizeAbi1 = offsetof(lt_py_sample_event, ops);
  static_assert(sizeof(lt_py_sample_event) == kSampleSizeAbi1 + sizeof(std::uint32_t) * LT_OPS_DEPTH);
  lt_py_sample_event upgraded;
  std::vector<char> stored, raw;
  while (src.remaining() > 0) {
    const std::uint64_t left = src.remaining();
    ChunkHeader c{};
    if (left < sizeof c) {
      r.bytes_cut = left;
      r.warnings.push_back("file ends inside a chunk header: " + std::to_string(left) +
                           " byte(s) cut (was the recorder killed?)");
      break;
    }
    src.read(reinterpret_cast<char*>(&c), sizeof c);
    auto corrupt = [&](const std::string& why) {
      r.bytes_cut = left;
      r.warnings.push_back("damaged chunk at byte " + std::to_string(offset) + " (" + why +
                           "): " + std::to_string(left) + " byte(s) after it ignored");
    };
    if (c.magic != kChunkMagic) {
      corrupt("bad chunk magic");
      break;
    }
    if (c.flags != kChunkZstd || c.raw_size > kMaxChunkRaw || c.stored_size > kMaxChunkStored) {
      corrupt("impossible sizes or flags");
      break;
    }
    if (left - sizeof c < c.stored_size) {
      r.bytes_cut = left;
      r.warnings.push_back("file ends inside a chunk: " + std::to_string(left) +
                           " byte(s) cut (was the recorder killed?)");
      break;
    }
    stored.resize(c.stored_size);
    src.read(stored.data(), stored.size());
    if (static_cast<std::uint32_t>(::crc32(0L, reinterpret_cast<const Bytef*>(stored.data()), c.stored_size)) !=
        c.crc32) {
      corrupt("checksum mismatch");
      break;
    }
    raw.resize(c.raw_size);
    std::size_t n = ZSTD_decompress(raw.data(), raw.size(), stored.data(), stored.size());
    if (ZSTD_isError(n) || n != c.raw_size) {
      corrupt("bad compressed data");
      break;
    }
    // The records must tile the chunk exactly, in the stated number.
    std::size_t pos = 0, count = 0;
    bool ok = true;
    while (pos < raw.size()) {
      lt_event_header h;
      if (raw.size() - pos < sizeof h) {
        ok = false;
        break;
      }
      std::memcpy(&h, raw.data() + pos, sizeof h);
      if (h.size < sizeof h || h.size > raw.size() - pos) {
        ok = false;
        break;
      }
      pos += h.size;
      ++count;
    }
    if (!ok || count != c.record_count) {
      corrupt("records do not fit the chunk");
      break;
    }
    for (pos = 0; pos < raw.size();) {
      lt_event_header h;
      std::memcpy(&h, raw.data() + pos, sizeof h);
      if (fh.event_abi < 2 && (h.kind == LT_EV_PY_SAMPLE || h.kind == LT_EV_OFFCPU_BEGIN) &&
          h.size == kSampleSizeAbi1) {
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
    r.records += count;
    ++r.chunks;
    offset += sizeof c + c.stored_size;
  }
  return r;
}

RecordSink into(Trace& out) {
  return [&out](const lt_event_header& h, const std::byte* p) { out.append(p, h.size); };
}

}  // namespace

ReadResult read_trace(std::string_view bytes, const RecordSink& sink) {
  MemorySource src(bytes);
  return read_from(src, sink);
}

ReadResult read_trace_file(const std::string& path, const RecordSink& sink) {
  FileSource src(path);
  return read_from(src, sink);
}

ReadResult read_trace(std::string_view bytes, Trace& out) {
  return read_trace(bytes, into(out));
}
ReadResult read_trace_file(const std::string& path, Trace& out) {
  return read_trace_file(path, into(out));
}

}  // namespace lt::tracefile
