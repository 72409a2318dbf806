#include "user/text/json_escape.h"

#include "user/text/utf8_text.h"

namespace lt {

namespace {
void append_u(std::string& out, std::uint32_t unit) {
  static const char hex[] = "0123456789abcdef";
  out += "\\u";
  for (int d = 3; d >= 0; --d) out.push_back(hex[(unit >> (4 * d)) & 0xF]);
}
}  // namespace

std::string json_string(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned c = p[i];
    if (c >= 0x80) {
      const Utf8Char ch = next_utf8(p + i, n - i);
      if (ch.kind == Utf8Char::scalar)
        out.append(s.substr(i, ch.len));  // UTF-8 passes through
      else if (ch.kind == Utf8Char::surrogate)
        append_u(out, ch.cp);  // the target's lone surrogate, as json.dumps writes it
      else
        append_u(out, 0xDC00 | c);  // a stray byte: surrogateescape's code point for it
      i += ch.len;
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20)
          append_u(out, c);
        else
          out.push_back(static_cast<char>(c));
    }
    ++i;
  }
  out.push_back('"');
  return out;
}

std::string html_escape(std::string_view raw) {
  const std::string s = utf8_text(raw);  // valid UTF-8 first, escaped as text is
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

}  // namespace lt
