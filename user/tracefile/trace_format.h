// The on-disk trace format (docs/trace-format.md): a 64-byte file header,
// then chunks, each a 40-byte header and a zstd frame holding a run of
// event records exactly as they are in memory (user/model/trace.h).
// Everything here is little-endian and fixed-size.
#pragma once
#include <cstdint>

namespace lt::tracefile {

constexpr char kFileMagic[8] = {'L', 'T', 'R', 'A', 'C', 'E', 'B', 'F'};
constexpr std::uint16_t kFormatMajor = 1;
constexpr std::uint16_t kFormatMinor = 1;
constexpr std::uint32_t kChunkMagic = 0x4b43544c;  // "LTCK"
constexpr std::uint32_t kChunkZstd = 0x1;
// Bounds a reader enforces before it allocates anything.
constexpr std::uint32_t kMaxChunkRaw = 64u << 20;
constexpr std::uint32_t kMaxChunkStored = 64u << 20;
// A chunk may expand at most this much (format 1.1): a 1 MB crafted file
// of ~8000x zstd frames was ~10 GB of records to aggregate.  Real record
// streams compress ~20-300x (an idle thread sampled at 99 Hz, the most
// repetitive we know, ~300x); a writer pads a chunk that would exceed
// kWriterMaxRatio with a zstd skippable frame, which every reader skips.
constexpr std::uint32_t kMaxRatio = 1024;
constexpr std::uint32_t kWriterMaxRatio = 512;
constexpr std::uint32_t kRatioSlack = 4096;  // small chunks: headers dominate
// Likewise records per stored byte: each record's timestamp alone costs a
// real stream about a byte or more; 30,000 identical 32-byte records per KB
// would be that many calls into every aggregator.
constexpr std::uint32_t kMaxRecordsPerByte = 4;
constexpr std::uint32_t kWriterMaxRecordsPerByte = 2;

struct FileHeader {
  char magic[8];
  std::uint16_t format_major;
  std::uint16_t format_minor;
  std::uint16_t event_abi;    // LT_EVENT_ABI_VERSION of the records
  std::uint16_t header_size;  // sizeof(FileHeader): newer minors may grow it
  std::uint64_t created_realtime_ns;
  std::uint64_t created_monotonic_ns;
  std::uint8_t reserved[32];
};
static_assert(sizeof(FileHeader) == 64);

struct ChunkHeader {
  std::uint32_t magic;
  std::uint32_t flags;
  std::uint32_t raw_size;     // bytes of records after decompression
  std::uint32_t stored_size;  // bytes that follow this header
  std::uint32_t record_count;
  std::uint32_t crc32;  // of the stored bytes (zlib crc32)
  std::uint64_t first_ts_ns;
  std::uint64_t last_ts_ns;
};
static_assert(sizeof(ChunkHeader) == 40);

}  // namespace lt::tracefile
