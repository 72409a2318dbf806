// Text into a record's fixed char field.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

namespace lt {

// Copies UTF-8 text into a fixed field (NUL-terminated), cut on a character
// boundary; true if it was cut.
inline bool copy_field(char* out, std::size_t cap, const std::string& s) {
  std::size_t n = std::min(s.size(), cap - 1);
  while (n < s.size() && n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  std::memcpy(out, s.data(), n);
  out[n] = 0;
  return n < s.size();
}

}  // namespace lt
