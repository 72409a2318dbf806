#include "reports/model/action_name.h"

#include <algorithm>
#include <cstring>

namespace lt {

namespace {
void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x110000) {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out += "\xEF\xBF\xBD";  // U+FFFD for garbage
  }
}
}  // namespace

std::string action_name(const lt_action_event& e) {
  unsigned kind = (e.flags & LT_ACT_NAME_KIND_MASK) >> LT_ACT_NAME_KIND_SHIFT;
  if (kind != 1 && kind != 2 && kind != 4) return std::string(e.name, strnlen(e.name, sizeof e.name));
  std::size_t bytes = std::min<std::size_t>(static_cast<std::size_t>(e.name_len) * kind, sizeof e.name);
  return code_units_to_utf8(e.name, bytes, kind);
}

std::string code_units_to_utf8(const void* data, std::size_t bytes, unsigned kind) {
  auto p = static_cast<const unsigned char*>(data);
  std::string out;
  if (kind != 1 && kind != 2 && kind != 4) return out;
  for (std::size_t i = 0; i + kind <= bytes; i += kind) {
    std::uint32_t cp = 0;
    for (unsigned b = 0; b < kind; ++b) cp |= static_cast<std::uint32_t>(p[i + b]) << (8 * b);
    append_utf8(out, cp);
  }
  return out;
}

}  // namespace lt
