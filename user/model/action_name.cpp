#include "user/model/action_name.h"

#include <algorithm>
#include <cstring>
#include <string_view>

namespace lt {

namespace {
void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    // A lone surrogate (Python allows them in a str: surrogateescape makes
    // them from file names) is kept, in its 3-byte form (ED A0..BF xx), so
    // the writers can give back the target's string (user/text/utf8_text.h).
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

std::string cut_name_marker(std::uint32_t code_points) {
  return "[...cut: " + std::to_string(code_points) + " characters in all...]";
}

namespace {
unsigned name_kind(const lt_action_event& e) {
  unsigned kind = (e.flags & LT_ACT_NAME_KIND_MASK) >> LT_ACT_NAME_KIND_SHIFT;
  return kind == 1 || kind == 2 || kind == 4 ? kind : 0;
}

constexpr std::size_t kMaxPendingThreads = 4096;

std::string units_to_utf8(const std::string& units, unsigned kind) {
  return kind ? code_units_to_utf8(units.data(), units.size(), kind) : units;
}
}  // namespace

void ActionNameAssembler::add_tail(const lt_event_header& h, const lt_action_name_tail_event& t) {
  const std::uint64_t thread = (static_cast<std::uint64_t>(h.pid) << 32) | h.tid;
  // Tails whose BEGIN never came stay until their thread's next name; a
  // crafted file with tails on endless threads must not grow us without bound.
  if (pending_.size() >= kMaxPendingThreads && !pending_.count(thread)) pending_.clear();
  auto& p = pending_[thread];
  // A new key, or a first piece again (the BEGIN of the last ones was lost):
  // start over.
  if (p.key != t.key || (p.pieces && t.offset <= p.first)) {
    p = Pending{};
    p.key = t.key;
  }
  if (p.pieces++ == 0) p.first = t.offset;
  const std::size_t bytes = std::min<std::size_t>(t.bytes, sizeof t.chunk);
  if (bytes == 0 || p.broken) {
    p.broken = true;  // unreadable in the target
  } else if (p.units.empty() && p.end_units.empty()) {
    p.start = t.offset;
    p.units.assign(t.chunk, bytes);
  } else if (p.end_units.empty() && t.offset == p.start + p.units.size()) {
    p.units.append(t.chunk, bytes);
  } else if (p.end_units.empty() && t.offset > p.start + p.units.size()) {
    p.end_offset = t.offset;  // the bounded tails jumped to the name's end
    p.end_units.assign(t.chunk, bytes);
  } else {
    p.broken = true;  // out of order: a lost record in between
  }
}

ActionNameAssembler::Name ActionNameAssembler::name(const lt_event_header& h, const lt_action_event& e) {
  const unsigned kind = name_kind(e);
  std::string head =
      kind ? std::string(e.name, std::min<std::size_t>(static_cast<std::size_t>(e.name_len) * kind, sizeof e.name))
           : std::string(e.name, strnlen(e.name, sizeof e.name));
  if (!(e.flags & LT_ACT_NAME_TRUNCATED)) return {units_to_utf8(head, kind), true};
  const std::size_t total = static_cast<std::size_t>(e.name_len) * (kind ? kind : 1);
  std::string end;
  const std::uint64_t thread = (static_cast<std::uint64_t>(h.pid) << 32) | h.tid;
  if (auto it = pending_.find(thread); it != pending_.end()) {
    Pending& p = it->second;
    // Tails continue exactly where the head stops (ASCII heads hold one
    // byte less: the NUL); anything else is a lost or foreign piece.
    if (p.key == e.key && !p.broken && !p.units.empty() && p.start == head.size()) {
      std::string joined = head + p.units;
      if (p.end_units.empty() && joined.size() == total) {
        pending_.erase(it);
        return {units_to_utf8(joined, kind), true};
      }
      if (!p.end_units.empty() && p.end_offset >= joined.size() && p.end_offset + p.end_units.size() == total) {
        head = std::move(joined);
        end = p.end_units;
      }
    }
    pending_.erase(it);
  }
  // Past the bound, or pieces lost: the name's start, its length and (when
  // known) its end, so only names equal in all three share a row.
  return {units_to_utf8(head, kind) + cut_name_marker(e.name_len) + units_to_utf8(end, kind), false};
}

}  // namespace lt
