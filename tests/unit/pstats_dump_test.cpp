// The .prof files (--dump-stats): the marshal encoder byte for byte against
// what CPython's marshal writes (less the FLAG_REF bit it sets on shared
// objects, which marshal.loads does not need), and the stats built from
// synthetic stacks.  tests/integration/test_prof_dump.py loads real dumps
// with pstats.
#include "reports/advanced/pstats_dump.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

using namespace lt;

namespace {

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int c : b) s.push_back(static_cast<char>(c));
  return s;
}

std::string le_double(double v) {
  std::string s(8, '\0');
  std::memcpy(s.data(), &v, 8);
  return s;
}

}  // namespace

// Expected bytes from Python 3.11: marshal.dumps(v) with 0x80 cleared on the type byte.
TEST(Marshal, IntsSmallAndLong) {
  std::string out;
  marshal::put_int(out, 5);
  EXPECT_EQ(out, bytes({'i', 5, 0, 0, 0}));
  out.clear();
  marshal::put_int(out, -1);
  EXPECT_EQ(out, bytes({'i', 0xff, 0xff, 0xff, 0xff}));
  out.clear();
  marshal::put_int(out, 2147483648LL);  // ec03000000 000000000200
  EXPECT_EQ(out, bytes({'l', 3, 0, 0, 0, 0, 0, 0, 0, 2, 0}));
  out.clear();
  marshal::put_int(out, -(1LL << 40));  // ecfdffffff 000000000004
  EXPECT_EQ(out, bytes({'l', 0xfd, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 4}));
  out.clear();
  marshal::put_int(out, INT64_MAX);  // ec05000000 ff7fff7fff7fff7f0700
  EXPECT_EQ(out, bytes({'l', 5, 0, 0, 0, 0xff, 0x7f, 0xff, 0x7f, 0xff, 0x7f, 0xff, 0x7f, 7, 0}));
}

TEST(Marshal, FloatAndString) {
  std::string out;
  marshal::put_float(out, 0.25);
  EXPECT_EQ(out, "g" + le_double(0.25));
  out.clear();
  marshal::put_str(out, "\xc3\xa9t\xc3\xa9");  // "été": 5 bytes of UTF-8
  EXPECT_EQ(out, bytes({'u', 5, 0, 0, 0}) + "\xc3\xa9t\xc3\xa9");
}

// marshal.loads gives {('a', 1, 'b'): (1, 2, 0.5, 1.0, {})} for these bytes.
TEST(Marshal, StatsDictLayout) {
  PstatsStats s;
  s[{"a", 1, "b"}].own = {1, 2, 0.5, 1.0};
  const std::string expect = bytes({'{', ')', 3, 'u', 1,   0, 0,   0, 'a', 'i', 1, 0,   0, 0, 'u', 1,
                                    0,   0,   0, 'b', ')', 5, 'i', 1, 0,   0,   0, 'i', 2, 0, 0,   0}) +
                             "g" + le_double(0.5) + "g" + le_double(1.0) + "{00";
  EXPECT_EQ(marshal_pstats(s), expect);
}

TEST(Marshal, CallersTupleStartsWithNc) {
  PstatsStats s;
  auto& e = s[{"f.py", 3, "g"}];
  e.own = {1, 1, 0, 0};
  e.callers[{"f.py", 1, "f"}] = {1, 7, 0, 0};  // cc 1, nc 7: written (7, 1, ...)
  const std::string out = marshal_pstats(s);
  const std::string caller_counts = bytes({')', 4, 'i', 7, 0, 0, 0, 'i', 1, 0, 0, 0});
  EXPECT_NE(out.find(caller_counts), std::string::npos);
}

TEST(Marshal, NamesThatAreNotUtf8AreEscaped) {
  PstatsStats s;
  s[{"x.py", 1, "bad\xff"}].own = {1, 1, 0, 0};
  const std::string out = marshal_pstats(s);
  EXPECT_NE(out.find(bytes({'u', 7, 0, 0, 0}) + "bad\\xff"), std::string::npos);
}

namespace {

StackFrame py(const char* fn, int first, int line) {
  return {fn, "/w/m.py", line, first, false};
}

}  // namespace

TEST(PstatsFromStacks, TimesCallersAndCallPaths) {
  StackProfile p;
  p.period_ns = 1'000'000;  // 1 ms per sample
  p.frames = {py("a", 1, 10), py("b", 20, 21), py("c", 30, 31), py("a", 1, 12)};
  // a (line 10) -> b: 6 samples; a (line 10) -> c: 3; a alone: 1;
  // a (line 12) -> b: 2 (another call site: another call of b).
  p.stacks = {{{0, 1}, 6, 6}, {{0, 2}, 3, 3}, {{0}, 1, 1}, {{3, 1}, 2, 2}};
  auto s = pstats_from_stacks(p);
  ASSERT_EQ(s.size(), 3u);
  const PstatsKey a{"/w/m.py", 1, "a"}, b{"/w/m.py", 20, "b"}, c{"/w/m.py", 30, "c"};
  EXPECT_DOUBLE_EQ(s[a].own.tt, 0.001);
  EXPECT_DOUBLE_EQ(s[a].own.ct, 0.012);
  EXPECT_EQ(s[a].own.nc, 1u);
  EXPECT_TRUE(s[a].callers.empty());  // its caller is the action's opening frame
  EXPECT_DOUBLE_EQ(s[b].own.tt, 0.008);
  EXPECT_DOUBLE_EQ(s[b].own.ct, 0.008);
  EXPECT_EQ(s[b].own.nc, 2u);  // two call sites seen: at least two calls
  EXPECT_EQ(s[b].own.cc, 2u);
  ASSERT_EQ(s[b].callers.size(), 1u);
  EXPECT_EQ(s[b].callers[a].nc, 2u);
  EXPECT_DOUBLE_EQ(s[b].callers[a].ct, 0.008);
  EXPECT_DOUBLE_EQ(s[c].own.tt, 0.003);
  EXPECT_EQ(s[c].own.nc, 1u);
}

TEST(PstatsFromStacks, RecursionCountsTimeOnceAndCallsAsRecursive) {
  StackProfile p;
  p.period_ns = 1'000'000;
  p.frames = {py("a", 1, 2), py("r", 5, 6), py("r", 5, 7)};
  p.stacks = {{{0, 1, 2}, 4, 4}};  // a -> r -> r
  auto s = pstats_from_stacks(p);
  const PstatsKey r{"/w/m.py", 5, "r"};
  EXPECT_EQ(s[r].own.nc, 2u);  // two nested calls
  EXPECT_EQ(s[r].own.cc, 1u);  // one of them primitive
  EXPECT_DOUBLE_EQ(s[r].own.ct, 0.004);
  EXPECT_DOUBLE_EQ(s[r].own.tt, 0.004);
  EXPECT_EQ(s[r].callers.size(), 2u);  // from a, and from itself
  EXPECT_EQ(s[r].callers[r].cc, 0u);
}

TEST(PstatsFromStacks, PseudoFramesAndNativeFramesKeys) {
  StackProfile p;
  p.period_ns = 1'000'000;
  p.frames = {{"[action's own frame]", "", 0, 0, false}, {"memcpy", "/lib/libc.so.6", 0, 0, true}};
  p.stacks = {{{0}, 1, 1}, {{1}, 1, 1}};
  auto s = pstats_from_stacks(p);
  EXPECT_TRUE(s.count({"~", 0, "[action's own frame]"}));
  EXPECT_TRUE(s.count({"/lib/libc.so.6", 0, "memcpy"}));
}

// pstats.Stats refuses an empty dump: an action no sample caught gets one row, 0 calls, 0 s.
TEST(PstatsFromStacks, NoSamplesIsOneEmptyRow) {
  auto s = pstats_from_stacks(StackProfile{});
  ASSERT_EQ(s.size(), 1u);
  const auto& [key, e] = *s.begin();
  EXPECT_EQ(key.file, "~");
  EXPECT_EQ(key.name, kNoSamplesRow);
  EXPECT_EQ(e.own.nc, 0u);
  EXPECT_EQ(e.own.tt, 0.0);
}
