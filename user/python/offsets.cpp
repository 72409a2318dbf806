#include "user/python/offsets.h"

#include <array>

namespace lt::python {

namespace {
constexpr lt::u16 kAbsent = 0xffff;

struct Row {
  int minor;
  lt_py_offsets off;
  unsigned qualname;
};

// clang-format off
// Columns: minor, eval_frame_arg,
//   frame: code back lasti owner localsplus, tstate_frame, cframe_current,
//   code: argcount flags firstlineno varnames filename name firsttraceable adaptive,
//   str_ascii_data; then co_qualname.
constexpr std::array<Row, 6> kRows{{
  {8,  {8,  0, 32, 24, 104, kAbsent, 360, 24, kAbsent, 16, 36, 40, 72, 104, 112, kAbsent, kAbsent, 48, {0, 0}}, 0},
  {9,  {9,  1, 32, 24, 104, kAbsent, 360, 24, kAbsent, 16, 36, 40, 72, 104, 112, kAbsent, kAbsent, 48, {0, 0}}, 0},
  {10, {10, 1, 32, 24,  96, kAbsent, 352, 24, kAbsent, 16, 36, 40, 72, 104, 112, kAbsent, kAbsent, 48, {0, 0}}, 0},
  {11, {11, 1, 32, 48,  56, 69,      72,  56, 8,       56, 48, 72, 96, 112, 120, 168,     184,     48, {0, 0}}, 128},
  {12, {12, 1,  0,  8,  56, 70,      72,  56, 0,       52, 48, 68, 96, 112, 120, 176,     192,     40, {0, 0}}, 128},
  {13, {13, 1,  0,  8,  56, 70,      72,  72, kAbsent, 52, 48, 68, 96, 112, 120, 184,     200,     40, {0, 0}}, 128},
}};
// clang-format on
}  // namespace

std::optional<Layout> layout_for(int minor) {
  for (const auto& r : kRows)
    if (r.minor == minor) return Layout{r.off, r.qualname};
  return std::nullopt;
}

}  // namespace lt::python
