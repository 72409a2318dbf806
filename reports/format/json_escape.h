// JSON / HTML text escaping shared by the exporters.
#pragma once
#include <string>

namespace lt {
std::string json_string(const std::string& s);  // with the quotes
std::string html_escape(const std::string& s);
}  // namespace lt
