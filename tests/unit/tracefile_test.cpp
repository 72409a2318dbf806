// Trace files: write, read back, and survive damage.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "reports/model/trace.h"
#include "user/core/errors.h"
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
