#include "user/python/offsets.h"

#include <array>

namespace lt::python {

namespace {
constexpr lt::u16 kAbsent = 0xffff;

struct Row {
  int minor;
  lt_py_offsets off;
  unsigned previous, tstate_frame, qualname, varnames;
};

// clang-format off
// lt_py_offsets columns: minor,
//   gen_frame gen_frame_embedded,   (gi_frame pointer <= 3.10; gi_iframe 3.11+)
//   frame: code lasti localsplus,
//   code: argcount flags firstlineno filename name firsttraceable adaptive,
//   str_ascii_data, eval_frame_arg, frame owner, str_compact_data
// then: frame previous, tstate frame, co_qualname, co_varnames.
constexpr std::array<Row, 6> kRows{{
  {8,  {8,  16, 0, 32, 104, 360, 16, 36, 40, 104, 112, kAbsent, kAbsent, 48, 0, kAbsent, 72, 0}, 24, 24, 0,   72},
  {9,  {9,  16, 0, 32, 104, 360, 16, 36, 40, 104, 112, kAbsent, kAbsent, 48, 1, kAbsent, 72, 0}, 24, 24, 0,   72},
  {10, {10, 16, 0, 32,  96, 352, 16, 36, 40, 104, 112, kAbsent, kAbsent, 48, 1, kAbsent, 72, 0}, 24, 24, 0,   72},
  {11, {11, 80, 1, 32,  56,  72, 56, 48, 72, 112, 120, 168,     184,     48, 1, 69, 72, 0}, 48, 56, 128, 96},
  {12, {12, 72, 1,  0,  56,  72, 52, 48, 68, 112, 120, 176,     192,     40, 1, 70, 56, 0},  8, 56, 128, 96},
  {13, {13, 72, 1,  0,  56,  72, 52, 48, 68, 112, 120, 184,     200,     40, 1, 70, 56, 0},  8, 72, 128, 96},
}};
// clang-format on
}  // namespace

std::optional<Layout> layout_for(int minor) {
  for (const auto& r : kRows)
    if (r.minor == minor)
      return Layout{r.off,          r.previous, r.off.frame_owner == kAbsent ? 0u : r.off.frame_owner,
                    r.tstate_frame, r.qualname, r.varnames};
  return std::nullopt;
}

}  // namespace lt::python
