// The three line-table formats CPython 3.8..3.13 store in code objects, each
// decoded the way that version's PyCode_Addr2Line does it (Objects/codeobject.c)
// but bounded: a table read from a live process may be torn or garbage.
// tests/unit/line_table_test.cpp checks every decoder against vectors that
// tests/unit/gen_line_tables.py produced with the real interpreters.
#include "user/python/line_table.h"

#include <climits>
#include <cstddef>

namespace lt::python {
namespace {

// Lines are accumulated in 64 bits and saturated to int after every step, so
// no table, however long or hostile, can overflow.  Real tables never get near.
std::int64_t add_line(std::int64_t line, std::int64_t delta) {
  std::int64_t sum = line + delta;
  if (sum < INT_MIN) return INT_MIN;
  if (sum > INT_MAX) return INT_MAX;
  return sum;
}

// 3.8/3.9 co_lnotab: (unsigned address delta, signed line delta) byte pairs.
// The line delta applies from the address reached after adding the pair's
// address delta, so walk until that address passes the target.  Positions past
// the end keep the last line (CPython does the same).  An odd trailing byte is
// a torn read: ignored.
int lnotab_line(int first_line, std::span<const std::uint8_t> table, std::int64_t byte_addr) {
  std::int64_t line = first_line;
  std::int64_t addr = 0;
  for (std::size_t i = 0; i + 1 < table.size(); i += 2) {
    addr += table[i];
    if (addr > byte_addr) break;
    line = add_line(line, static_cast<std::int8_t>(table[i + 1]));
  }
  return static_cast<int>(line);
}

// 3.10 co_linetable: (unsigned byte length, signed line delta) pairs.  Unlike
// lnotab, each pair describes the range that starts where the previous one
// ended, and its line delta applies to that range itself.  A delta of -128
// means "no line" and leaves the running line alone.  Zero-length ranges only
// carry line deltas (CPython's advance() skips over them the same way).
int linetable310_line(int first_line, std::span<const std::uint8_t> table, std::int64_t byte_addr) {
  std::int64_t line = first_line;
  std::int64_t end = 0;
  for (std::size_t i = 0; i + 1 < table.size(); i += 2) {
    const std::int64_t start = end;
    end += table[i];
    const auto delta = static_cast<std::int8_t>(table[i + 1]);
    const bool no_line = delta == -128;
    if (!no_line) line = add_line(line, delta);
    if (start <= byte_addr && byte_addr < end) return no_line ? kNoLine : static_cast<int>(line);
  }
  return first_line;
}

// 3.11+ location table (PEP 657).  An entry starts with a byte that has bit 7
// set; bits 3-6 are its kind, bits 0-2 its length - 1 in code units.  Varint
// payload bytes never have bit 7 set, which is how CPython finds the next
// entry, and how we stop a varint that a torn table cut short.
constexpr std::uint8_t kEntryStart = 0x80;
constexpr int kKindNoColumns = 13;  // signed varint line delta
constexpr int kKindLong = 14;       // signed varint line delta, then end line and columns
constexpr int kKindNone = 15;       // no location at all
constexpr int kKindOneLine0 = 10;   // 10..12: line delta 0..2, two column bytes

// Unsigned varint: 6-bit chunks, least significant first, 0x40 = more follow.
// Chunks past 36 bits are consumed but dropped: only garbage is that long, and
// dropping them keeps the shift defined.
std::uint64_t read_varint(std::span<const std::uint8_t> table, std::size_t& pos) {
  std::uint64_t value = 0;
  unsigned shift = 0;
  while (pos < table.size() && !(table[pos] & kEntryStart)) {
    const std::uint8_t b = table[pos++];
    if (shift <= 30) value |= static_cast<std::uint64_t>(b & 0x3f) << shift;
    shift += 6;
    if (!(b & 0x40)) break;
  }
  return value;
}

// Signed varint: the unsigned value's low bit is the sign, the rest the magnitude.
std::int64_t read_signed_varint(std::span<const std::uint8_t> table, std::size_t& pos) {
  const std::uint64_t v = read_varint(table, pos);
  const auto magnitude = static_cast<std::int64_t>(v >> 1);
  return (v & 1) ? -magnitude : magnitude;
}

int loctable_line(int first_line, std::span<const std::uint8_t> table, std::int64_t byte_addr) {
  std::int64_t line = first_line;
  std::int64_t end = 0;
  std::size_t pos = 0;
  while (pos < table.size()) {
    const std::uint8_t head = table[pos++];
    // A well-formed table is a sequence of entries; anything else means we are
    // not looking at a location table, so no line from it is trustworthy.
    if (!(head & kEntryStart)) return first_line;
    const int kind = (head >> 3) & 0x0f;
    const std::int64_t start = end;
    end += 2 * ((head & 7) + 1);
    if (kind == kKindNoColumns || kind == kKindLong) {
      line = add_line(line, read_signed_varint(table, pos));
    } else if (kind >= kKindOneLine0 && kind < kKindNoColumns) {
      line = add_line(line, kind - kKindOneLine0);
    }
    // Columns (and the long form's end line) do not matter here; skip to the
    // next entry start as CPython's advance() does.
    while (pos < table.size() && !(table[pos] & kEntryStart)) ++pos;
    if (start <= byte_addr && byte_addr < end) return kind == kKindNone ? kNoLine : static_cast<int>(line);
  }
  return first_line;
}

}  // namespace

int line_for(int minor, int first_line, std::span<const std::uint8_t> table, int index) {
  // Not started yet (f_lasti / prev_instr of -1): CPython reports co_firstlineno.
  if (index < 0) return first_line;
  switch (minor) {
    case 8:
    case 9:
      return lnotab_line(first_line, table, index);
    case 10:
      // f_lasti counts code units but the table counts bytes (CPython 3.10's
      // PyFrame_GetLineNumber passes f_lasti * sizeof(_Py_CODEUNIT)).
      return linetable310_line(first_line, table, 2 * static_cast<std::int64_t>(index));
    case 11:
    case 12:
    case 13:
    case 14:
    case 15:
      return loctable_line(first_line, table, 2 * static_cast<std::int64_t>(index));
    default:
      return first_line;
  }
}

}  // namespace lt::python
