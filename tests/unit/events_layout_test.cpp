// bpf/events_layout.h asserts the size and field offsets of the records in
// bpf/events.h at compile time; this test makes sure it covers all of them,
// so a struct or field added without rewriting the layout header
// (tests/unit/gen_events_layout.py) is caught too.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

std::string read_source(const std::string& rel) {
  const char* root = std::getenv("LT_SRCDIR");
  std::string path = (root && *root ? std::string(root) + "/" : std::string()) + rel;
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// (struct, fields) of every top-level struct definition, comments removed.
// Scanned by hand: std::regex recurses per character on long matches.
std::vector<std::pair<std::string, std::vector<std::string>>> structs_of(const std::string& source) {
  std::string text;
  for (std::size_t i = 0; i < source.size();) {
    if (source.compare(i, 2, "/*") == 0) {
      const std::size_t end = source.find("*/", i + 2);
      i = end == std::string::npos ? source.size() : end + 2;
      text += ' ';
    } else {
      text += source[i++];
    }
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  const std::regex field(R"(^\s*(?:struct\s+)?\w+\s+(\w+))");
  for (std::size_t at = text.find("\nstruct "); at != std::string::npos; at = text.find("\nstruct ", at + 1)) {
    const std::size_t name_at = at + 8, brace = text.find(" {\n", name_at), close = text.find("\n};", name_at);
    const std::size_t line_end = text.find('\n', name_at);
    if (brace == std::string::npos || close == std::string::npos || brace > line_end) continue;  // not a definition
    std::vector<std::string> fields;
    std::stringstream body(text.substr(brace + 3, close - brace - 3));
    std::string decl;
    while (std::getline(body, decl, ';')) {
      std::smatch m;
      if (std::regex_search(decl, m, field)) fields.push_back(m[1]);
    }
    out.emplace_back(text.substr(name_at, brace - name_at), std::move(fields));
  }
  return out;
}

TEST(EventsLayout, EveryRecordAndFieldIsAsserted) {
  const std::string events = read_source("bpf/events.h");
  const std::string layout = read_source("bpf/events_layout.h");
  ASSERT_FALSE(events.empty());
  ASSERT_FALSE(layout.empty());
  const auto found = structs_of(events);
  // The parser itself: the header and the sample record are there, whole.
  ASSERT_GE(found.size(), 40u);
  EXPECT_EQ(found.front().first, "lt_event_header");
  EXPECT_EQ(found.front().second, (std::vector<std::string>{"kind", "size", "pid", "tid", "cpu", "ts_ns"}));
  for (const auto& [name, fields] : found) {
    EXPECT_NE(layout.find("LT_SIZE(" + name + ", "), std::string::npos) << name << ": no size assert";
    for (const auto& f : fields)
      EXPECT_NE(layout.find("LT_OFFSET(" + name + ", " + f + ", "), std::string::npos)
          << name << "." << f << ": no offset assert (run tests/unit/gen_events_layout.py)";
  }
}

}  // namespace
