// lt::python::line_for() against what the real interpreters say: the vectors in
// tests/unit/data/line_tables_3.<minor>.txt were written by gen_line_tables.py
// running under each CPython (see its docstring for the format).  Then the
// formats' corner cases by hand, and hostile tables that must not crash.
#include "user/python/line_table.h"

#include <gtest/gtest.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using lt::python::kNoLine;
using lt::python::line_for;

namespace {

using Bytes = std::vector<std::uint8_t>;

// First byte of a 3.11+ location entry: bit 7, the kind, the length in code units - 1.
constexpr std::uint8_t head(int kind, int units) {
  return static_cast<std::uint8_t>(0x80 | kind << 3 | (units - 1));
}

// The unit tests run from the repo root (build/unit-tests); LT_SRCDIR points
// elsewhere when they do not.
std::string data_path(int minor) {
  const char* root = std::getenv("LT_SRCDIR");
  std::string dir = root && *root ? std::string(root) + "/" : std::string();
  return dir + "tests/unit/data/line_tables_3." + std::to_string(minor) + ".txt";
}

bool parse_hex(const std::string& hex, Bytes& out) {
  out.clear();
  if (hex == "-") return true;
  if (hex.size() % 2) return false;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    char* end = nullptr;
    const std::string byte = hex.substr(i, 2);
    const unsigned long v = std::strtoul(byte.c_str(), &end, 16);
    if (*end) return false;
    out.push_back(static_cast<std::uint8_t>(v));
  }
  return true;
}

class LineTableVectors : public testing::TestWithParam<int> {};

TEST_P(LineTableVectors, MatchCPython) {
  const int minor = GetParam();
  const std::string path = data_path(minor);
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing " << path << " (run from the repo root or set LT_SRCDIR)";

  int file_minor = -1;
  std::string code_name;
  int first_line = 0;
  Bytes table;
  bool have_code = false;
  long vectors = 0, failures = 0;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string tag;
    fields >> tag;
    if (tag == "minor") {
      ASSERT_TRUE(fields >> file_minor) << path << ":" << line_no;
      ASSERT_EQ(file_minor, minor) << path;
    } else if (tag == "code") {
      std::string hex;
      ASSERT_TRUE(fields >> code_name >> first_line >> hex) << path << ":" << line_no;
      ASSERT_TRUE(parse_hex(hex, table)) << path << ":" << line_no;
      have_code = true;
    } else if (tag == "v") {
      int index = 0, expected = 0;
      ASSERT_TRUE(fields >> index >> expected) << path << ":" << line_no;
      ASSERT_TRUE(have_code) << path << ":" << line_no << ": vector before any code record";
      ++vectors;
      const int got = line_for(minor, first_line, table, index);
      if (got != expected && ++failures <= 20)
        ADD_FAILURE() << path << ":" << line_no << " " << code_name << " index " << index << ": expected line "
                      << expected << ", got " << got;
    } else {
      FAIL() << path << ":" << line_no << ": unknown record '" << tag << "'";
    }
  }
  EXPECT_EQ(file_minor, minor) << path << ": no minor record";
  EXPECT_GT(vectors, 0) << path << ": no vectors";
  EXPECT_EQ(failures, 0) << failures << " of " << vectors << " vectors wrong for 3." << minor;
}

INSTANTIATE_TEST_SUITE_P(LineTable, LineTableVectors, testing::Range(8, 14),
                         [](const testing::TestParamInfo<int>& p) { return "py3_" + std::to_string(p.param); });

// --- The formats by hand: each case pins one rule the vectors rely on. ---

TEST(LineTableFormat, LnotabDeltaAppliesFromTheNewAddress) {
  // addr 0..5 line 10; from 6 line 11; from 10 line 13; +200 lines split into 127 + 73
  // with a zero address delta; -3 as a signed byte.
  const Bytes t = {6, 1, 4, 2, 2, 127, 0, 73, 2, 0xfd};
  EXPECT_EQ(line_for(8, 10, t, -1), 10);
  EXPECT_EQ(line_for(8, 10, t, 0), 10);
  EXPECT_EQ(line_for(8, 10, t, 4), 10);
  EXPECT_EQ(line_for(8, 10, t, 6), 11);
  EXPECT_EQ(line_for(9, 10, t, 10), 13);
  EXPECT_EQ(line_for(9, 10, t, 12), 213);
  EXPECT_EQ(line_for(9, 10, t, 14), 210);
  EXPECT_EQ(line_for(9, 10, t, 1000), 210);  // past the end: the last line, like CPython
}

TEST(LineTableFormat, Linetable310DeltaAppliesToItsOwnRange) {
  // [0,4) line 11; zero-length +200 then [4,8) +1 -> 212; [8,10) no line; [10,12) -2 -> 210.
  const Bytes t = {4, 1, 0, 127, 0, 73, 4, 1, 2, 0x80, 2, 0xfe};
  EXPECT_EQ(line_for(10, 10, t, -1), 10);
  EXPECT_EQ(line_for(10, 10, t, 0), 11);  // index is in code units: byte 0
  EXPECT_EQ(line_for(10, 10, t, 1), 11);  // byte 2
  EXPECT_EQ(line_for(10, 10, t, 2), 212);
  EXPECT_EQ(line_for(10, 10, t, 4), kNoLine);
  EXPECT_EQ(line_for(10, 10, t, 5), 210);  // -128 did not move the running line
  EXPECT_EQ(line_for(10, 10, t, 6), 10);   // past the end: first_line
}

TEST(LineTableFormat, LocationTableKinds) {
  // clang-format off
  const Bytes t = {
      head(0, 2), 0x05,                           // short form, same line: 10
      head(11, 1), 0x04, 0x08,                    // one-line form, +1: 11
      head(13, 3), 0x70, 0x12,                    // no columns, signed varint 1200 = +600: 611
      head(15, 1),                                // no location
      head(14, 1), 0x7b, 0x12, 0x00, 0x01, 0x02,  // long form, 1211 = -605: 6; end line, columns
  };
  // clang-format on
  EXPECT_EQ(line_for(11, 10, t, -1), 10);
  EXPECT_EQ(line_for(11, 10, t, 0), 10);
  EXPECT_EQ(line_for(12, 10, t, 1), 10);  // an inline cache unit of the first instruction
  EXPECT_EQ(line_for(12, 10, t, 2), 11);
  EXPECT_EQ(line_for(13, 10, t, 3), 611);
  EXPECT_EQ(line_for(13, 10, t, 5), 611);
  EXPECT_EQ(line_for(13, 10, t, 6), kNoLine);
  EXPECT_EQ(line_for(13, 10, t, 7), 6);
  EXPECT_EQ(line_for(13, 10, t, 8), 10);  // past the end: first_line
}

TEST(LineTableFormat, UnknownVersionGivesFirstLine) {
  const Bytes t = {6, 1, 4, 2};
  EXPECT_EQ(line_for(7, 10, t, 8), 10);
  EXPECT_EQ(line_for(16, 10, t, 8), 10);
  EXPECT_EQ(line_for(-1, 10, t, 8), 10);
}

// --- Hostile input: the table may be torn or not a table at all. ---

TEST(LineTableMalformed, EmptyTable) {
  for (int minor = 8; minor <= 13; ++minor) {
    for (int index : {-1, 0, 1, 1000, INT_MAX, INT_MIN}) {
      EXPECT_EQ(line_for(minor, 42, {}, index), 42) << "3." << minor << " index " << index;
    }
  }
}

TEST(LineTableMalformed, HugeIndex) {
  const Bytes t310 = {4, 1, 4, 1};
  const Bytes t311 = {head(11, 8), 0, 0};
  EXPECT_EQ(line_for(8, 5, t310, INT_MAX), 7);
  EXPECT_EQ(line_for(10, 5, t310, INT_MAX), 5);  // 2 * INT_MAX must not overflow into range
  EXPECT_EQ(line_for(11, 5, t311, INT_MAX), 5);
  EXPECT_EQ(line_for(13, 5, t311, INT_MIN), 5);
}

TEST(LineTableMalformed, OddLengthPairTables) {
  // The trailing half pair is a torn read: ignored, never read past.
  const Bytes t = {4, 1, 4};
  EXPECT_EQ(line_for(8, 5, t, 6), 6);
  EXPECT_EQ(line_for(10, 5, t, 1), 6);
  EXPECT_EQ(line_for(10, 5, t, 2), 5);
}

TEST(LineTableMalformed, TruncatedVarints) {
  // Continue bit set on the table's last byte, and on a byte followed by the
  // next entry's start.
  const Bytes cut = {head(13, 1), 0x44};
  EXPECT_EQ(line_for(11, 5, cut, 0), 7);  // what was read: +2
  EXPECT_EQ(line_for(11, 5, cut, 1), 5);
  const Bytes cut_mid = {head(14, 1), 0x42, head(11, 1), 0, 0};
  EXPECT_EQ(line_for(12, 5, cut_mid, 0), 6);
  EXPECT_EQ(line_for(12, 5, cut_mid, 1), 7);
  const Bytes head_only = {head(14, 4)};
  EXPECT_EQ(line_for(13, 5, head_only, 2), 5);
}

TEST(LineTableMalformed, EndlessVarintAndLineOverflow) {
  // A 10000-byte varint: consumed in bounded time, its high chunks dropped.
  Bytes t = {head(13, 1)};
  t.insert(t.end(), 10000, 0x7e);
  t.push_back(head(13, 1));
  t.push_back(0x02);
  EXPECT_NO_FATAL_FAILURE(line_for(11, 5, t, 0));
  EXPECT_NO_FATAL_FAILURE(line_for(11, 5, t, 1));
  // Lines saturate instead of overflowing int (UBSan would flag the overflow).
  const Bytes up(1000, 127);
  EXPECT_EQ(line_for(8, INT_MAX - 10, up, INT_MAX), INT_MAX);
  EXPECT_EQ(line_for(10, INT_MAX - 10, up, 200), INT_MAX);
  const Bytes down(1000, 0x81);  // lnotab: +129 address, -127 lines
  EXPECT_EQ(line_for(9, INT_MIN + 10, down, INT_MAX), INT_MIN);
}

TEST(LineTableMalformed, NotALocationTable) {
  // An entry must start with bit 7 set; otherwise the bytes are not a 3.11+ table.
  EXPECT_EQ(line_for(11, 5, Bytes{0x01, 0x02, 0x03}, 0), 5);
  EXPECT_EQ(line_for(12, 5, Bytes{head(11, 1), 0, 0, head(10, 1)}, 0), 6);
}

TEST(LineTableMalformed, RandomBytesNeverCrash) {
  // Exactly sized heap buffers, so ASan (make asan) catches any read past the end.
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> len(0, 64), byte(0, 255), idx(-4, 200), minor(7, 14);
  long sum = 0;
  for (int i = 0; i < 50000; ++i) {
    Bytes t(static_cast<std::size_t>(len(rng)));
    for (auto& b : t) b = static_cast<std::uint8_t>(byte(rng));
    sum += line_for(minor(rng), 1, t, idx(rng));
  }
  SUCCEED() << sum;
}

}  // namespace
