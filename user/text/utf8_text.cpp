#include "user/text/utf8_text.h"

namespace lt {

Utf8Char next_utf8(const unsigned char* p, std::size_t n) {
  const unsigned c = p[0];
  if (c < 0x80) return {Utf8Char::scalar, 1, c};
  // The sequence length and the allowed range of the second byte (rejects
  // overlongs and code points past U+10FFFF; ED A0..BF is a surrogate).
  std::uint8_t len = 0;
  unsigned lo = 0x80, hi = 0xBF;
  std::uint32_t cp = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    cp = c & 0x0F;
    if (c == 0xE0) lo = 0xA0;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    cp = c & 0x07;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return {Utf8Char::invalid, 1, c};
  }
  for (std::size_t k = 1; k < len; ++k) {
    if (k >= n) return {Utf8Char::truncated, 1, c};
    const unsigned d = p[k];
    if (k == 1 ? (d < lo || d > hi) : (d < 0x80 || d > 0xBF)) return {Utf8Char::invalid, 1, c};
    cp = (cp << 6) | (d & 0x3F);
  }
  if (cp >= 0xD800 && cp < 0xE000) return {Utf8Char::surrogate, len, cp};
  return {Utf8Char::scalar, len, cp};
}

namespace {
void append_hex(std::string& out, const char* prefix, std::uint32_t v, int digits) {
  static const char hex[] = "0123456789abcdef";
  out += prefix;
  for (int d = digits - 1; d >= 0; --d) out.push_back(hex[(v >> (4 * d)) & 0xF]);
}
}  // namespace

std::size_t append_utf8_text(std::string& out, const unsigned char* p, std::size_t n, bool final) {
  std::size_t i = 0;
  while (i < n) {
    // Runs of ASCII, the common case, go in one piece.
    std::size_t j = i;
    while (j < n && p[j] < 0x80) ++j;
    out.append(reinterpret_cast<const char*>(p + i), j - i);
    if (j == n) break;
    i = j;
    const Utf8Char ch = next_utf8(p + i, n - i);
    switch (ch.kind) {
      case Utf8Char::scalar:
        out.append(reinterpret_cast<const char*>(p + i), ch.len);
        break;
      case Utf8Char::surrogate:
        append_hex(out, "\\u", ch.cp, 4);
        break;
      case Utf8Char::truncated:
        if (!final) return n - i;
        [[fallthrough]];
      case Utf8Char::invalid:
        append_hex(out, "\\x", p[i], 2);
        break;
    }
    i += ch.len;
  }
  return 0;
}

std::string utf8_text(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  append_utf8_text(out, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), true);
  return out;
}

void Utf8TextBuf::finish() {
  if (held_.empty()) return;
  std::string out;
  append_utf8_text(out, reinterpret_cast<const unsigned char*>(held_.data()), held_.size(), true);
  held_.clear();
  to_->sputn(out.data(), static_cast<std::streamsize>(out.size()));
}

Utf8TextBuf::int_type Utf8TextBuf::overflow(int_type c) {
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  const char ch = traits_type::to_char_type(c);
  return xsputn(&ch, 1) == 1 ? c : traits_type::eof();
}

std::streamsize Utf8TextBuf::xsputn(const char* s, std::streamsize n) {
  const auto* p = reinterpret_cast<const unsigned char*>(s);
  const auto count = static_cast<std::size_t>(n);
  std::string joined;  // only when a character was split across writes
  if (!held_.empty()) {
    joined = held_ + std::string(s, count);
    held_.clear();
    p = reinterpret_cast<const unsigned char*>(joined.data());
  }
  const std::size_t size = joined.empty() ? count : joined.size();
  std::size_t k = 0;
  while (k < size && p[k] < 0x80) ++k;
  if (k == size) {  // all ASCII: as it is
    const auto len = static_cast<std::streamsize>(size);
    return to_->sputn(reinterpret_cast<const char*>(p), len) == len ? n : 0;
  }
  std::string out;
  out.reserve(size + 16);
  const std::size_t left = append_utf8_text(out, p, size, false);
  held_.assign(reinterpret_cast<const char*>(p + size - left), left);
  const auto len = static_cast<std::streamsize>(out.size());
  return to_->sputn(out.data(), len) == len ? n : 0;
}

}  // namespace lt
