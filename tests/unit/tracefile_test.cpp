// Trace files: write, read back, and survive damage.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "reports/aggregate/actions.h"
#include "user/core/errors.h"
#include "user/model/trace.h"
#include "user/tracefile/trace_format.h"
#include "user/tracefile/trace_reader.h"
#include "user/tracefile/trace_writer.h"

using namespace lt;

namespace {

std::string temp_path(const char* name) {
  return "/tmp/lt-unit-" + std::to_string(getpid()) + "-" + name;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes `chunks` chunks of `per_chunk` action records each.
std::string write_sample(const std::string& path, int chunks, int per_chunk) {
  tracefile::TraceWriter w(path);
  for (int c = 0; c < chunks; ++c) {
    for (int i = 0; i < per_chunk; ++i) {
      lt_action_event e{};
      e.hdr = {LT_EV_ACTION_BEGIN, sizeof e, 7, 7, 0, static_cast<u64>(c * 1000 + i)};
      e.key = static_cast<u64>(i);
      std::snprintf(e.name, sizeof e.name, "action_%d", i % 5);
      w.append(&e, sizeof e);
    }
    w.flush();
  }
  w.close();
  return slurp(path);
}

}  // namespace

TEST(TraceFile, RoundTrip) {
  auto path = temp_path("rt");
  std::string bytes = write_sample(path, 3, 100);
  Trace t;
  auto r = tracefile::read_trace(bytes, t);
  EXPECT_EQ(r.chunks, 3u);
  EXPECT_EQ(r.records, 300u);
  EXPECT_EQ(t.count(), 300u);
  EXPECT_EQ(r.bytes_cut, 0u);
  EXPECT_TRUE(r.warnings.empty());
  // Compression: fixed 272-byte records of repetitive content shrink a lot.
  EXPECT_LT(bytes.size(), 300u * 20);
  unlink(path.c_str());
}

TEST(TraceFile, TruncatedAnywhereReadsCompleteChunks) {
  auto path = temp_path("cut");
  std::string bytes = write_sample(path, 3, 50);
  for (std::size_t len = sizeof(tracefile::FileHeader); len < bytes.size(); len += 7) {
    Trace t;
    auto r = tracefile::read_trace(std::string_view(bytes).substr(0, len), t);
    EXPECT_EQ(t.count() % 50, 0u) << len;  // only whole chunks
    EXPECT_EQ(r.records, t.count());
    if (r.bytes_cut) {
      EXPECT_FALSE(r.warnings.empty());
    }
  }
  unlink(path.c_str());
}

TEST(TraceFile, FlippedByteIsDetected) {
  auto path = temp_path("flip");
  std::string bytes = write_sample(path, 2, 50);
  // Damage the second chunk's payload: the first chunk survives.
  std::string bad = bytes;
  bad[bad.size() - 10] ^= 0x5a;
  Trace t;
  auto r = tracefile::read_trace(bad, t);
  EXPECT_EQ(r.records, 50u);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("checksum"), std::string::npos);
  unlink(path.c_str());
}

TEST(TraceFile, NotATraceIsAnError) {
  Trace t;
  try {
    tracefile::read_trace("hello, this is not a trace file at all, no sir, not even close......", t);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::bad_trace);
  }
}

// A file of event ABI 1 (before ops): its samples lack the ops[] tail.  They
// are read as ABI 2 samples with no ops, frames intact.
TEST(TraceFile, ReadsEventAbi1Samples) {
  auto path = temp_path("abi1");
  const std::size_t old_size = offsetof(lt_py_sample_event, ops);
  {
    tracefile::TraceWriter w(path);
    lt_py_sample_event s{};
    s.hdr = {LT_EV_PY_SAMPLE, static_cast<u16>(old_size), 7, 7, 0, 42};
    s.nframes = 1;
    s.frames[0].code = 0x1234;
    s.frames[0].lasti = 5;
    w.append(&s, old_size);
    w.close();
  }
  std::string bytes = slurp(path);
  const u16 abi1 = 1;
  std::memcpy(bytes.data() + offsetof(tracefile::FileHeader, event_abi), &abi1, sizeof abi1);
  Trace t;
  auto r = tracefile::read_trace(bytes, t);
  ASSERT_EQ(r.records, 1u);
  int seen = 0;
  t.for_each([&](const lt_event_header& h, const std::byte* p) {
    ASSERT_EQ(h.size, sizeof(lt_py_sample_event));
    lt_py_sample_event e;
    std::memcpy(&e, p, sizeof e);
    EXPECT_EQ(e.nframes, 1);
    EXPECT_EQ(e.frames[0].code, 0x1234u);
    EXPECT_EQ(e.nops, 0);
    ++seen;
  });
  EXPECT_EQ(seen, 1);
  // The same bytes claiming ABI 2 are kept as they are (a short record).
  const u16 abi2 = 2;
  std::memcpy(bytes.data() + offsetof(tracefile::FileHeader, event_abi), &abi2, sizeof abi2);
  Trace t2;
  tracefile::read_trace(bytes, t2);
  t2.for_each([&](const lt_event_header& h, const std::byte*) { EXPECT_EQ(h.size, old_size); });
  unlink(path.c_str());
}

namespace {

// Byte offsets of each chunk in a trace file.
std::vector<std::size_t> chunk_offsets(const std::string& bytes) {
  std::vector<std::size_t> at;
  for (std::size_t o = sizeof(tracefile::FileHeader); o + sizeof(tracefile::ChunkHeader) <= bytes.size();) {
    tracefile::ChunkHeader c;
    std::memcpy(&c, bytes.data() + o, sizeof c);
    at.push_back(o);
    o += sizeof c + c.stored_size;
  }
  return at;
}

}  // namespace

// One flipped byte anywhere in a middle chunk (magic, sizes, checksum or
// payload) loses that chunk only: the reader finds the next intact one,
// names the damaged range, and tells the consumer where the gap is.
TEST(TraceFile, DamagedMiddleChunkIsSkippedAndReadingGoesOn) {
  auto path = temp_path("mid");
  const std::string bytes = write_sample(path, 5, 50);
  const auto at = chunk_offsets(bytes);
  ASSERT_EQ(at.size(), 5u);
  const std::size_t third = at[2], fourth = at[3];
  for (std::size_t flip : {third + 1, third + 13, third + 21, third + 40, (third + fourth) / 2, fourth - 1}) {
    std::string bad = bytes;
    bad[flip] ^= 0x20;
    std::uint64_t before_gap = 0, seen = 0;
    int gaps = 0;
    auto r = tracefile::read_trace(
        bad, [&](const lt_event_header&, const std::byte*) { ++seen; },
        [&](const tracefile::DamagedRange&) {
          ++gaps;
          before_gap = seen;
        });
    EXPECT_EQ(r.records, 200u) << flip;
    EXPECT_EQ(seen, 200u) << flip;
    EXPECT_EQ(gaps, 1) << flip;
    EXPECT_EQ(before_gap, 100u) << flip;
    ASSERT_EQ(r.damaged.size(), 1u) << flip;
    EXPECT_EQ(r.damaged[0].offset, third) << flip;
    EXPECT_EQ(r.damaged[0].length, fourth - third) << flip;
    EXPECT_TRUE(r.data_lost());
    EXPECT_EQ(r.bytes_cut, 0u);
    ASSERT_EQ(r.warnings.size(), 1u) << flip;
    EXPECT_NE(r.warnings[0].find(std::to_string(third) + ".." + std::to_string(fourth)), std::string::npos)
        << r.warnings[0];
  }
  unlink(path.c_str());
}

// Garbage between chunks (a block of a disk overwritten) is skipped too.
TEST(TraceFile, GarbageBetweenChunksIsSkipped) {
  auto path = temp_path("garbage");
  const std::string bytes = write_sample(path, 3, 50);
  const auto at = chunk_offsets(bytes);
  std::string bad = bytes.substr(0, at[1]) + std::string(1000, 'L') + "LTCK" + bytes.substr(at[1]);
  Trace t;
  auto r = tracefile::read_trace(bad, t);
  EXPECT_EQ(r.records, 150u);
  ASSERT_EQ(r.damaged.size(), 1u);
  EXPECT_EQ(r.damaged[0].offset, at[1]);
  EXPECT_EQ(r.damaged[0].length, 1004u);
  unlink(path.c_str());
}

// A cut tail is still a cut (a killed recorder), not damage.
TEST(TraceFile, CutTailIsNotDamage) {
  auto path = temp_path("cuttail");
  const std::string bytes = write_sample(path, 3, 50);
  Trace t;
  auto r = tracefile::read_trace(std::string_view(bytes).substr(0, bytes.size() - 5), t);
  EXPECT_EQ(r.records, 100u);
  EXPECT_FALSE(r.data_lost());
  EXPECT_GT(r.bytes_cut, 0u);
  unlink(path.c_str());
}

// Fake chunk headers each claiming the rest of the file: resynchronising
// gives up within a budget instead of checksumming the rest per header.
TEST(TraceFile, FakeChunkHeadersDoNotMakeResyncQuadratic) {
  auto path = temp_path("fake");
  std::string bytes = write_sample(path, 1, 50);
  bytes[sizeof(tracefile::FileHeader) + 50] ^= 1;
  const std::size_t fakes = 100'000;
  for (std::size_t i = 0; i < fakes; ++i) {
    tracefile::ChunkHeader c{};
    c.magic = tracefile::kChunkMagic;
    c.flags = tracefile::kChunkZstd;
    c.stored_size = static_cast<u32>((fakes - i - 1) * sizeof c);
    c.raw_size = 1u << 20;
    bytes.append(reinterpret_cast<const char*>(&c), sizeof c);
  }
  Trace t;
  auto r = tracefile::read_trace(bytes, t);
  EXPECT_EQ(r.records, 0u);
  ASSERT_EQ(r.damaged.size(), 1u);
  EXPECT_EQ(r.damaged[0].offset + r.damaged[0].length, bytes.size());
  unlink(path.c_str());
}

// A chunk that expands more than any record stream does is refused; the
// writer pads its own rare repetitive chunks so they stay readable (by
// 1.0 readers too: the padding is a zstd skippable frame).
TEST(TraceFile, CompressionRatioIsBounded) {
  auto path = temp_path("ratio");
  {
    tracefile::TraceWriter w(path);
    lt_action_event e{};
    e.hdr = {LT_EV_ACTION_END, sizeof e, 7, 7, 0, 1};
    for (int i = 0; i < 20000; ++i) w.append(&e, sizeof e);  // identical records: ~5 MB raw
    w.close();
  }
  const std::string bytes = slurp(path);
  Trace t;
  auto r = tracefile::read_trace(bytes, t);
  EXPECT_EQ(r.records, 20000u);
  EXPECT_FALSE(r.data_lost());
  for (std::size_t o : chunk_offsets(bytes)) {
    tracefile::ChunkHeader c;
    std::memcpy(&c, bytes.data() + o, sizeof c);
    EXPECT_LE(c.raw_size, std::uint64_t{tracefile::kWriterMaxRatio} * c.stored_size);
    EXPECT_LE(c.record_count, std::uint64_t{tracefile::kWriterMaxRecordsPerByte} * c.stored_size);
  }
  // The same chunk without its padding is refused as implausible.
  const std::size_t first = chunk_offsets(bytes)[0];
  tracefile::ChunkHeader c;
  std::memcpy(&c, bytes.data() + first, sizeof c);
  const char* payload = bytes.data() + first + sizeof c;
  std::size_t frame = ZSTD_findFrameCompressedSize(payload, c.stored_size);
  ASSERT_FALSE(ZSTD_isError(frame));
  ASSERT_LT(frame, c.stored_size);  // padded
  ASSERT_GT(c.raw_size, std::uint64_t{tracefile::kMaxRatio} * frame + tracefile::kRatioSlack);
  {
    std::string bad = bytes.substr(0, first + sizeof c + frame);
    tracefile::ChunkHeader b = c;
    b.stored_size = static_cast<u32>(frame);
    b.crc32 = static_cast<u32>(::crc32(0L, reinterpret_cast<const Bytef*>(payload), static_cast<uInt>(frame)));
    std::memcpy(bad.data() + first, &b, sizeof b);
    Trace t2;
    auto r2 = tracefile::read_trace(bad, t2);
    EXPECT_EQ(r2.records, 0u);
    ASSERT_EQ(r2.damaged.size(), 1u);
    EXPECT_NE(r2.damaged[0].why.find("implausible"), std::string::npos) << r2.damaged[0].why;
  }
  unlink(path.c_str());
}

// Pipes and FIFOs read as streams; a directory is named as one.
TEST(TraceFile, ReadsPipesAndRefusesDirectories) {
  auto path = temp_path("pipe");
  const std::string bytes = write_sample(path, 3, 50);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::thread writer([&] {
    std::size_t at = 0;
    while (at < bytes.size()) {
      // small, uneven writes: the reader must not rely on whole chunks per read
      ssize_t w = ::write(fds[1], bytes.data() + at, std::min<std::size_t>(777, bytes.size() - at));
      if (w <= 0) break;
      at += static_cast<std::size_t>(w);
    }
    ::close(fds[1]);
  });
  Trace t;
  auto r = tracefile::read_trace_file("/proc/self/fd/" + std::to_string(fds[0]), t);
  writer.join();
  ::close(fds[0]);
  EXPECT_EQ(r.records, 150u);
  EXPECT_TRUE(r.warnings.empty());
  try {
    tracefile::read_trace_file("/tmp", t);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::io);
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
  unlink(path.c_str());
}

// An action whose stop was in the damaged chunk must not pair with a stop
// after it that belongs to another start lost there (a reused key).
TEST(TraceFile, ActionsDoNotPairAcrossADamagedChunk) {
  auto path = temp_path("pair");
  u64 ts = 1000;
  auto act = [&](tracefile::TraceWriter& w, u16 kind, u64 key, const char* name) {
    lt_action_event e{};
    e.hdr = {kind, sizeof e, 7, 7, 0, ts += 1000};
    e.key = key;
    std::snprintf(e.name, sizeof e.name, "%s", name);
    w.append(&e, sizeof e);
  };
  {
    tracefile::TraceWriter w(path);
    act(w, LT_EV_ACTION_BEGIN, 1, "a");
    act(w, LT_EV_ACTION_END, 1, "");
    act(w, LT_EV_ACTION_BEGIN, 2, "b");
    w.flush();
    act(w, LT_EV_ACTION_END, 2, "");     // lost with the chunk
    act(w, LT_EV_ACTION_BEGIN, 2, "c");  // lost: the same generator key again
    w.flush();
    act(w, LT_EV_ACTION_END, 2, "");  // c's end: must not end b
    act(w, LT_EV_ACTION_BEGIN, 3, "a");
    act(w, LT_EV_ACTION_END, 3, "");
    w.close();
  }
  std::string bytes = slurp(path);
  const auto at = chunk_offsets(bytes);
  ASSERT_EQ(at.size(), 3u);
  bytes[at[1] + 50] ^= 1;
  ActionAggregator agg;
  auto r = tracefile::read_trace(
      bytes, [&](const lt_event_header& h, const std::byte* p) { agg.add(h, p); },
      [&](const tracefile::DamagedRange&) { agg.gap(); });
  ASSERT_EQ(r.damaged.size(), 1u);
  auto rep = agg.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  const auto& p = rep.processes[0];
  EXPECT_EQ(rep.damaged_ranges, 1u);
  ASSERT_EQ(p.actions.size(), 1u);
  EXPECT_EQ(p.actions[0].name, "a");
  EXPECT_EQ(p.actions[0].calls, 2u);
  EXPECT_EQ(p.lost_to_damage, 2u);  // b (open at the gap) and the stop after it
  EXPECT_EQ(p.unmatched_stops, 0u);
  unlink(path.c_str());
}
