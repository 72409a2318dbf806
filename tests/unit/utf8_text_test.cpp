// Names of any bytes as valid output (user/text/utf8_text.h): text as
// Python's backslashreplace writes it, JSON that decodes to the target's str.
#include "user/text/utf8_text.h"

#include <gtest/gtest.h>

#include <sstream>

#include "user/text/json_escape.h"

using namespace lt;

TEST(Utf8Text, ValidUtf8IsUnchanged) {
  const std::string s = "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x9A\x80 plain\t\x1b[2J";
  EXPECT_EQ(utf8_text(s), s);
}

TEST(Utf8Text, LoneSurrogateAsBackslashreplace) {
  // "bad\udcff-name".encode("utf-8", "backslashreplace") == b"bad\\udcff-name"
  EXPECT_EQ(utf8_text("bad\xED\xB3\xBF-name"), "bad\\udcff-name");
  EXPECT_EQ(utf8_text("\xED\xA0\x80"), "\\ud800");
}

TEST(Utf8Text, StrayBytesAsHex) {
  // b"raw\xff\xc3(".decode("utf-8", "backslashreplace") == "raw\\xff\\xc3("
  EXPECT_EQ(utf8_text("raw\xFF\xC3("), "raw\\xff\\xc3(");
  EXPECT_EQ(utf8_text("\xC0\xAF"), "\\xc0\\xaf");                    // overlong
  EXPECT_EQ(utf8_text("\xF4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
  EXPECT_EQ(utf8_text("cut\xE2\x82"), "cut\\xe2\\x82");              // a character cut at the end
}

TEST(Utf8Text, StreamHoldsACharacterSplitAcrossWrites) {
  std::ostringstream sink;
  {
    Utf8TextBuf buf(sink.rdbuf());
    std::ostream out(&buf);
    out << "a\xE2"
        << "\x82"
        << "\xAC b\xED\xB3"
        << "\xBF c\xE2";  // the last one never ends
  }
  EXPECT_EQ(sink.str(), "a\xE2\x82\xAC b\\udcff c\\xe2");
}

TEST(JsonString, GivesBackTheTargetsString) {
  EXPECT_EQ(json_string("bad\xED\xB3\xBF-name"), "\"bad\\udcff-name\"");  // json.dumps("bad\udcff-name")
  EXPECT_EQ(json_string("raw\xFF"), "\"raw\\udcff\"");                    // surrogateescape's code point for the byte
  EXPECT_EQ(json_string("caf\xC3\xA9 \"q\" \\ \x01"), "\"caf\xC3\xA9 \\\"q\\\" \\\\ \\u0001\"");
}

TEST(HtmlEscape, ValidUtf8AndEntities) {
  EXPECT_EQ(html_escape("<a\xED\xB3\xBF&\xFF>"), "&lt;a\\udcff&amp;\\xff&gt;");
}
