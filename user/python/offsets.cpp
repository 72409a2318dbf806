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
constexpr std::array<Row, 8> kRows{{
  {8,  {8,  16, 0, 32, 104, 360, 16, 36, 40, 104, 112, kAbsent, kAbsent, 48, 0, kAbsent, 72, 0}, 24, 24, 0,   72},
  {9,  {9,  16, 0, 32, 104, 360, 16, 36, 40, 104, 112, kAbsent, kAbsent, 48, 1, kAbsent, 72, 0}, 24, 24, 0,   72},
  {10, {10, 16, 0, 32,  96, 352, 16, 36, 40, 104, 112, kAbsent, kAbsent, 48, 1, kAbsent, 72, 0}, 24, 24, 0,   72},
  {11, {11, 80, 1, 32,  56,  72, 56, 48, 72, 112, 120, 168,     184,     48, 1, 69, 72, 0}, 48, 56, 128, 96},
  {12, {12, 72, 1,  0,  56,  72, 52, 48, 68, 112, 120, 176,     192,     40, 1, 70, 56, 0},  8, 56, 128, 96},
  {13, {13, 72, 1,  0,  56,  72, 52, 48, 68, 112, 120, 184,     200,     40, 1, 70, 56, 0},  8, 72, 128, 96},
  {14, {14, 72, 1,  0,  56,  80, 52, 48, 68, 112, 120, 192,     208,     40, 1, 74, 56, 0},  8, 72, 128, 96},
  {15, {15, 72, 1,  0,  56,  80, 52, 48, 68, 112, 120, 192,     208,     40, 1, 74, 56, 0},  8, 72, 128, 96},
}};

// Stack sampling: tstate frame path, frame bytes to copy, the lowest owner
// value of frames that are not Python's (C-stack shims 3.12/3.13, the
// interpreter's entry frames 3.14+), then the thread-state lookup
// (autoTSSkey, 0 = none: 3.15 keeps it in a C11 thread-local;
// interpreters.head, threads.head, thread_id, native_thread_id) and
// co_lnotab/co_linetable.
struct SamplerRow {
  int minor;
  lt::u16 cframe_frame, frame_block;
  lt::u8 owner_cstack;
  unsigned tss, interp_head, threads_head, thread_id, native_thread_id, linetable;
};
constexpr std::array<SamplerRow, 8> kSamplerRows{{
  {8,  kAbsent, 112, 0xff, 1392,  32,    8, 176,   0, 120},
  {9,  kAbsent, 112, 0xff,  584,  32,    8, 176,   0, 120},
  {10, kAbsent, 104, 0xff,  584,  32,    8, 176,   0, 120},
  {11, 8,        72, 0xff,  592,  40,   16, 152, 160, 136},
  {12, 0,        72, 3,    1544,  40,   72, 136, 144, 136},
  {13, kAbsent,  72, 3,    2160, 632, 7344, 152, 160, 136},
  {14, kAbsent,  80, 3,    2336, 808, 7344, 152, 160, 136},
  {15, kAbsent,  80, 3,       0, 936, 7336, 176, 184, 136},
}};
// clang-format on
}  // namespace

std::optional<Layout> layout_for(int minor) {
  for (const auto& r : kRows) {
    if (r.minor != minor) continue;
    Layout l{r.off,          r.previous, r.off.frame_owner == kAbsent ? 0u : r.off.frame_owner,
             r.tstate_frame, r.qualname, r.varnames};
    for (const auto& s : kSamplerRows) {
      if (s.minor != minor) continue;
      l.bpf.tstate_frame = static_cast<lt::u16>(r.tstate_frame);
      l.bpf.cframe_frame = s.cframe_frame;
      l.bpf.frame_previous = static_cast<lt::u16>(r.previous);
      l.bpf.frame_block = s.frame_block;
      l.bpf.owner_cstack = s.owner_cstack;
      l.runtime_tss = s.tss;
      l.runtime_interp_head = s.interp_head;
      l.interp_threads_head = s.threads_head;
      l.tstate_thread_id = s.thread_id;
      l.tstate_native_thread_id = s.native_thread_id;
      l.code_linetable = s.linetable;
      // 3.14+: f_executable is a _PyStackRef whose low bits are tags.
      l.bpf.stackref_tag_mask = minor >= 14 ? 7 : 0;
    }
    return l;
  }
  return std::nullopt;
}

}  // namespace lt::python
