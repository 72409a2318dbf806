// Long action names from ACTION_NAME_TAIL pieces (as BPF sends them), the
// cut marker past the bound or when a piece is lost, UTF-8 that is always
// valid, and control characters escaped for terminals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "user/cli/terminal_escape.h"
#include "user/model/action_name.h"

using namespace lt;

namespace {

struct Sent {
  std::vector<lt_action_name_tail_event> tails;
  lt_action_event begin{};
};

// What pyactions.bpf.c sends for a str whose code units are `units`
// (kind 0 = ASCII), mirroring emit_name_tails() and read_name().
Sent send(const std::string& units, unsigned kind, std::uint64_t key, std::uint32_t len) {
  Sent s;
  const std::size_t head = kind ? LT_NAME_MAX : LT_NAME_MAX - 1;
  for (int i = 0; i < LT_NAME_TAILS_MAX; ++i) {
    std::size_t off = head + static_cast<std::size_t>(i) * LT_NAME_TAIL_CHUNK;
    if (off >= units.size()) break;
    if (i == LT_NAME_TAILS_MAX - 1 && units.size() - off > LT_NAME_TAIL_CHUNK) off = units.size() - LT_NAME_TAIL_CHUNK;
    lt_action_name_tail_event t{};
    t.hdr = {LT_EV_ACTION_NAME_TAIL, sizeof t, 7, 8, 0, 1};
    t.key = key;
    t.offset = static_cast<std::uint32_t>(off);
    t.bytes = static_cast<std::uint32_t>(std::min<std::size_t>(LT_NAME_TAIL_CHUNK, units.size() - off));
    std::memcpy(t.chunk, units.data() + off, t.bytes);
    s.tails.push_back(t);
  }
  s.begin.hdr = {LT_EV_ACTION_BEGIN, sizeof s.begin, 7, 8, 0, 2};
  s.begin.key = key;
  s.begin.name_len = len;
  if (units.size() > head) s.begin.flags |= LT_ACT_NAME_TRUNCATED;
  if (kind) s.begin.flags |= kind << LT_ACT_NAME_KIND_SHIFT;
  std::memcpy(s.begin.name, units.data(), std::min(units.size(), head));
  return s;
}

ActionNameAssembler::Name assemble(ActionNameAssembler& a, const Sent& s) {
  for (auto& t : s.tails) a.add_tail(t.hdr, t);
  return a.name(s.begin.hdr, s.begin);
}

std::string ucs2(const std::u16string& s) {
  return std::string(reinterpret_cast<const char*>(s.data()), s.size() * 2);
}

}  // namespace

TEST(ActionNames, DistinctLongAsciiNamesStayDistinct) {
  ActionNameAssembler a;
  std::string common(276, 'c');
  std::string x = common + std::string(24, 'x'), y = common + std::string(24, 'y');
  EXPECT_EQ(assemble(a, send(x, 0, 1, 300)).text, x);
  auto n = assemble(a, send(y, 0, 1, 300));
  EXPECT_EQ(n.text, y);
  EXPECT_TRUE(n.complete);
  std::string big(2000, 'b');
  big[1999] = 'E';
  EXPECT_EQ(assemble(a, send(big, 0, 2, 2000)).text, big);
}

TEST(ActionNames, PastTheBoundKeepsStartLengthAndEnd) {
  ActionNameAssembler a;
  std::string name;
  for (int i = 0; i < 6000; ++i) name.push_back(static_cast<char>('A' + (i * 11) % 26));
  auto n = assemble(a, send(name, 0, 3, 6000));
  const std::size_t prefix = LT_NAME_MAX - 1 + (LT_NAME_TAILS_MAX - 1) * LT_NAME_TAIL_CHUNK;
  EXPECT_FALSE(n.complete);
  EXPECT_EQ(n.text, name.substr(0, prefix) + cut_name_marker(6000) + name.substr(6000 - LT_NAME_TAIL_CHUNK));
}

TEST(ActionNames, NonAsciiKindsAndSurrogates) {
  ActionNameAssembler a;
  std::u16string omega(500, u'\u03A9');
  auto n = assemble(a, send(ucs2(omega), 2, 4, 500));
  std::string want;
  for (int i = 0; i < 500; ++i) want += "\xCE\xA9";
  EXPECT_EQ(n.text, want);
  // A lone surrogate (Python allows one in a str) is kept, in its 3-byte
  // form, for the writers to escape (user/text/utf8_text.h).
  std::u16string lone = u"a";
  lone.push_back(static_cast<char16_t>(0xD800));
  EXPECT_EQ(code_units_to_utf8(ucs2(lone).data(), 4, 2), "a\xED\xA0\x80");
  const unsigned char ucs4_lone[] = {0xFF, 0xDC, 0, 0};
  EXPECT_EQ(code_units_to_utf8(ucs4_lone, 4, 4), "\xED\xB3\xBF");
  const unsigned char past_unicode[] = {0, 0, 0x11, 0};
  EXPECT_EQ(code_units_to_utf8(past_unicode, 4, 4), "\xEF\xBF\xBD");  // garbage: U+FFFD
}

TEST(ActionNames, LostPieceOrOldTraceIsMarkedNotMerged) {
  ActionNameAssembler a;
  std::string name(700, 'n');
  Sent s = send(name, 0, 5, 700);
  s.tails.erase(s.tails.begin() + 1);  // a tail dropped
  auto n = assemble(a, s);
  EXPECT_FALSE(n.complete);
  EXPECT_EQ(n.text, std::string(LT_NAME_MAX - 1, 'n') + cut_name_marker(700));
  // A file from before tails: only the head and the flag.
  Sent old = send(name, 0, 6, 700);
  old.tails.clear();
  EXPECT_EQ(a.name(old.begin.hdr, old.begin).text, std::string(LT_NAME_MAX - 1, 'n') + cut_name_marker(700));
  // Tails whose BEGIN was lost do not leak into the next name of the thread.
  Sent orphan = send(std::string(600, 'o'), 0, 9, 600);
  for (auto& t : orphan.tails) a.add_tail(t.hdr, t);
  std::string next(500, 'z');
  EXPECT_EQ(assemble(a, send(next, 0, 9, 500)).text, next);
}

TEST(TerminalEscape, ControlsEscapedTextKept) {
  EXPECT_EQ(escape_terminal_controls("a\x1b[2Jb\x07\tc\n"), "a\\x1b[2Jb\\x07\tc\n");
  EXPECT_EQ(escape_terminal_controls("del\x7f"), "del\\x7f");
  EXPECT_EQ(escape_terminal_controls("c1\xC2\x9B"
                                     "x"),
            "c1\\u009bx");
  EXPECT_EQ(escape_terminal_controls("\xC3\xA9\xC2\xA0\xF0\x9F\x9A\x80"), "\xC3\xA9\xC2\xA0\xF0\x9F\x9A\x80");
}
