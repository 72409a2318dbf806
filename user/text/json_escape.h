// JSON / HTML text escaping shared by the exporters.  Both give valid UTF-8
// whatever the bytes (the rule: utf8_text.h).
#pragma once
#include <string>
#include <string_view>

namespace lt {
// A JSON string, with the quotes: lone surrogates and stray bytes as \uXXXX
// escapes, so json.load gives back the target's str.
std::string json_string(std::string_view s);
// utf8_text(s) with the five markup characters as entities.
std::string html_escape(std::string_view s);
}  // namespace lt
