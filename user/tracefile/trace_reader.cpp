#include "user/tracefile/trace_reader.h"

#include <zlib.h>
#include <zstd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "user/core/errors.h"
#include "user/tracefile/trace_format.h"

namespace lt::tracefile {

ReadResult read_trace(std::string_view bytes, Trace& out) {
  ReadResult r;
  FileHeader fh{};
  if (bytes.size() < sizeof fh || std::memcmp(bytes.data(), kFileMagic, sizeof kFileMagic) != 0)
    throw Error(ExitCode::bad_trace, "not an ltrace-bpf trace file (bad magic)");
  std::memcpy(&fh, bytes.data(), sizeof fh);
  if (fh.format_major != kFormatMajor)
    throw Error(ExitCode::bad_trace, "trace format " + std::to_string(fh.format_major) + "." +
                                         std::to_string(fh.format_minor) + " is not supported (this reads " +
                                         std::to_string(kFormatMajor) + ".x)");
  if (fh.event_abi > LT_EVENT_ABI_VERSION)
    throw Error(ExitCode::bad_trace,
                "trace written by a newer ltrace-bpf (event ABI " + std::to_string(fh.event_abi) + ")");
  if (fh.header_size < sizeof fh || fh.header_size > bytes.size())
    throw Error(ExitCode::bad_trace, "trace file header is damaged");

  std::size_t at = fh.header_size;
  std::vector<char> raw;
  while (at < bytes.size()) {
    const std::size_t left = bytes.size() - at;
    ChunkHeader c{};
    if (left < sizeof c) {
      r.bytes_cut = left;
      r.warnings.push_back("file ends inside a chunk header: " + std::to_string(left) +
                           " byte(s) cut (was the recorder killed?)");
      break;
    }
    std::memcpy(&c, bytes.data() + at, sizeof c);
    auto corrupt = [&](const std::string& why) {
      r.bytes_cut = left;
      r.warnings.push_back("damaged chunk at byte " + std::to_string(at) + " (" + why + "): " + std::to_string(left) +
                           " byte(s) after it ignored");
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
    const auto* payload = reinterpret_cast<const Bytef*>(bytes.data() + at + sizeof c);
    if (static_cast<std::uint32_t>(::crc32(0L, payload, c.stored_size)) != c.crc32) {
      corrupt("checksum mismatch");
      break;
    }
    raw.resize(c.raw_size);
    std::size_t n = ZSTD_decompress(raw.data(), raw.size(), payload, c.stored_size);
    if (ZSTD_isError(n) || n != c.raw_size) {
      corrupt("bad compressed data");
      break;
    }
    // The records must tile the chunk exactly.
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
      out.append(raw.data() + pos, h.size);
      pos += h.size;
    }
    r.records += count;
    ++r.chunks;
    at += sizeof c + c.stored_size;
  }
  return r;
}

ReadResult read_trace_file(const std::string& path, Trace& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ExitCode::io, "cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(ExitCode::io, "cannot read " + path);
  std::string bytes = ss.str();
  return read_trace(bytes, out);
}

}  // namespace lt::tracefile
