#include "user/text/code_points.h"

#include "user/text/utf8_text.h"

namespace lt {

std::size_t cp_len(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t n = 0;
  for (std::size_t i = 0; i < s.size();) {
    if (p[i] < 0x80) {  // the common case
      ++n;
      ++i;
      continue;
    }
    const Utf8Char ch = next_utf8(p + i, s.size() - i);
    n += ch.kind == Utf8Char::scalar ? 1 : ch.kind == Utf8Char::surrogate ? 6 : 4;
    i += ch.len;
  }
  return n;
}

std::string cp_prefix(const std::string& s, std::size_t n) {
  std::size_t seen = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && seen++ == n) return s.substr(0, i);
  }
  return s;
}

std::string pad_left(const std::string& s, std::size_t width) {
  const std::size_t len = cp_len(s);
  return len >= width ? s : std::string(width - len, ' ') + s;
}

std::string pad_right(const std::string& s, std::size_t width) {
  const std::size_t len = cp_len(s);
  return len >= width ? s : s + std::string(width - len, ' ');
}

}  // namespace lt
