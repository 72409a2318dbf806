#include "user/python/offsets.h"

#include <array>

namespace lt::python {

namespace {
constexpr lt::u16 kAbsent = 0xffff;  // a field this version does not have
constexpr lt::u8 kNone8 = 0xff;      // owner_cstack: no frames to skip

// One CPython minor version: every offset we read, by name (bytes from the
// start of the object; python-unwinding.md §2).  The fields are declared in
// the order the rows below name them (designated initializers).
struct Row {
  int minor;
  // Generators: gi_frame pointer (<= 3.10) or the embedded gi_iframe (3.11+).
  lt::u16 gen_frame, gen_frame_embedded;
  // Frames (PyFrameObject <= 3.10, _PyInterpreterFrame 3.11+): f_code /
  // f_executable, f_lasti / instruction pointer, localsplus, f_back /
  // previous, owner (3.11+), the bytes the sampler copies at once, the
  // lowest owner value of frames that are not Python's (C-stack shims
  // 3.12/3.13, the interpreter's entry frames 3.14+), and the tag bits of
  // a _PyStackRef (3.14+).
  lt::u16 frame_code, frame_lasti, frame_localsplus, frame_previous, frame_owner, frame_block;
  lt::u8 owner_cstack, stackref_tag_mask;
  // Code objects; qualname 0 = absent (<= 3.10); co_varnames /
  // co_localsplusnames; co_lnotab (<= 3.9) / co_linetable;
  // _co_firsttraceable and the bytecode start (3.11+).
  lt::u16 code_argcount, code_flags, code_firstlineno, code_filename, code_name;
  lt::u16 code_qualname, code_varnames, code_linetable, code_firsttraceable, code_adaptive;
  // sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject); the argument of
  // _PyEval_EvalFrameDefault that holds the frame (0 in 3.8, else 1).
  lt::u16 str_ascii_data, str_compact_data, eval_frame_arg;
  // PyThreadState: frame / cframe / current_frame, _PyCFrame.current_frame
  // (3.11/3.12), thread_id (pthread_t), native_thread_id (3.11+, 0 = absent).
  lt::u16 tstate_frame, cframe_frame, tstate_thread_id, tstate_native_thread_id;
  // _PyRuntime: autoTSSkey (0 = none: 3.15 keeps it in a C11 thread-local),
  // interpreters.head; PyInterpreterState: threads.head.
  unsigned runtime_tss, runtime_interp_head, interp_threads_head;
  // The GIL holder: _PyRuntime.gilstate.tstate_current (<= 3.11), or
  // PyInterpreterState._gil.{last_holder, locked} (3.12+); 0 = absent.
  unsigned runtime_gil_tstate, interp_gil_holder, interp_gil_locked;
  // PyInterpreterState.modules (<= 3.11) / .imports.modules (3.12+):
  // sys.modules, for reading Dynamo's state (dynamo_state.cpp).  offsetof()
  // against each pyenv 3.8-3.13's headers; 3.14/3.15 take the value their
  // _Py_DebugOffsets publish (0 here).
  unsigned interp_modules;
  // The collector's `collecting` flag (sampled GC time, pystack.bpf.h's
  // in_gc): 3.8 in _PyRuntime.gc, 3.9+ in PyInterpreterState.gc (gdb's
  // offsetof() on each pyenv 3.8-3.13's libpython; 3.14/3.15: published).
  unsigned gc_collecting;
  // Instance attributes (Layout::InstDict), PyHeapTypeObject.ht_cached_keys,
  // the start of PyDictValues' array (3.14/3.15: offsetof() against sid's
  // libpython3.14-dev 3.14.10 and libpython3.15-dev 3.15.2 headers).
  Layout::InstDict inst_dict;
  unsigned heap_cached_keys, dict_values_start;
};

// clang-format off
constexpr std::array<Row, 8> kRows{{
  {.minor = 8,
   .gen_frame = 16, .gen_frame_embedded = 0,
   .frame_code = 32, .frame_lasti = 104, .frame_localsplus = 360, .frame_previous = 24, .frame_owner = kAbsent, .frame_block = 112, .owner_cstack = kNone8, .stackref_tag_mask = 0,
   .code_argcount = 16, .code_flags = 36, .code_firstlineno = 40, .code_filename = 104, .code_name = 112,
   .code_qualname = 0, .code_varnames = 72, .code_linetable = 120, .code_firsttraceable = kAbsent, .code_adaptive = kAbsent,
   .str_ascii_data = 48, .str_compact_data = 72, .eval_frame_arg = 0,
   .tstate_frame = 24, .cframe_frame = kAbsent, .tstate_thread_id = 176, .tstate_native_thread_id = 0,
   .runtime_tss = 1392, .runtime_interp_head = 32, .interp_threads_head = 8,
   .runtime_gil_tstate = 1368, .interp_gil_holder = 0, .interp_gil_locked = 0, .interp_modules = 56, .gc_collecting = 544,
   .inst_dict = Layout::InstDict::dictoffset, .heap_cached_keys = 872, .dict_values_start = 0},
  {.minor = 9,
   .gen_frame = 16, .gen_frame_embedded = 0,
   .frame_code = 32, .frame_lasti = 104, .frame_localsplus = 360, .frame_previous = 24, .frame_owner = kAbsent, .frame_block = 112, .owner_cstack = kNone8, .stackref_tag_mask = 0,
   .code_argcount = 16, .code_flags = 36, .code_firstlineno = 40, .code_filename = 104, .code_name = 112,
   .code_qualname = 0, .code_varnames = 72, .code_linetable = 120, .code_firsttraceable = kAbsent, .code_adaptive = kAbsent,
   .str_ascii_data = 48, .str_compact_data = 72, .eval_frame_arg = 1,
   .tstate_frame = 24, .cframe_frame = kAbsent, .tstate_thread_id = 176, .tstate_native_thread_id = 0,
   .runtime_tss = 584, .runtime_interp_head = 32, .interp_threads_head = 8,
   .runtime_gil_tstate = 568, .interp_gil_holder = 0, .interp_gil_locked = 0, .interp_modules = 856, .gc_collecting = 816,
   .inst_dict = Layout::InstDict::dictoffset, .heap_cached_keys = 864, .dict_values_start = 0},
  {.minor = 10,
   .gen_frame = 16, .gen_frame_embedded = 0,
   .frame_code = 32, .frame_lasti = 96, .frame_localsplus = 352, .frame_previous = 24, .frame_owner = kAbsent, .frame_block = 104, .owner_cstack = kNone8, .stackref_tag_mask = 0,
   .code_argcount = 16, .code_flags = 36, .code_firstlineno = 40, .code_filename = 104, .code_name = 112,
   .code_qualname = 0, .code_varnames = 72, .code_linetable = 120, .code_firsttraceable = kAbsent, .code_adaptive = kAbsent,
   .str_ascii_data = 48, .str_compact_data = 72, .eval_frame_arg = 1,
   .tstate_frame = 24, .cframe_frame = kAbsent, .tstate_thread_id = 176, .tstate_native_thread_id = 0,
   .runtime_tss = 584, .runtime_interp_head = 32, .interp_threads_head = 8,
   .runtime_gil_tstate = 568, .interp_gil_holder = 0, .interp_gil_locked = 0, .interp_modules = 856, .gc_collecting = 816,
   .inst_dict = Layout::InstDict::dictoffset, .heap_cached_keys = 872, .dict_values_start = 0},
  {.minor = 11,
   .gen_frame = 80, .gen_frame_embedded = 1,
   .frame_code = 32, .frame_lasti = 56, .frame_localsplus = 72, .frame_previous = 48, .frame_owner = 69, .frame_block = 72, .owner_cstack = kNone8, .stackref_tag_mask = 0,
   .code_argcount = 56, .code_flags = 48, .code_firstlineno = 72, .code_filename = 112, .code_name = 120,
   .code_qualname = 128, .code_varnames = 96, .code_linetable = 136, .code_firsttraceable = 168, .code_adaptive = 184,
   .str_ascii_data = 48, .str_compact_data = 72, .eval_frame_arg = 1,
   .tstate_frame = 56, .cframe_frame = 8, .tstate_thread_id = 152, .tstate_native_thread_id = 160,
   .runtime_tss = 592, .runtime_interp_head = 40, .interp_threads_head = 16,
   .runtime_gil_tstate = 576, .interp_gil_holder = 0, .interp_gil_locked = 0, .interp_modules = 888, .gc_collecting = 848,
   .inst_dict = Layout::InstDict::managed, .heap_cached_keys = 872, .dict_values_start = 0},
  {.minor = 12,
   .gen_frame = 72, .gen_frame_embedded = 1,
   .frame_code = 0, .frame_lasti = 56, .frame_localsplus = 72, .frame_previous = 8, .frame_owner = 70, .frame_block = 72, .owner_cstack = 3, .stackref_tag_mask = 0,
   .code_argcount = 52, .code_flags = 48, .code_firstlineno = 68, .code_filename = 112, .code_name = 120,
   .code_qualname = 128, .code_varnames = 96, .code_linetable = 136, .code_firsttraceable = 176, .code_adaptive = 192,
   .str_ascii_data = 40, .str_compact_data = 56, .eval_frame_arg = 1,
   .tstate_frame = 56, .cframe_frame = 0, .tstate_thread_id = 136, .tstate_native_thread_id = 144,
   .runtime_tss = 1544, .runtime_interp_head = 40, .interp_threads_head = 72,
   .runtime_gil_tstate = 0, .interp_gil_holder = 1048, .interp_gil_locked = 1056, .interp_modules = 944, .gc_collecting = 312,
   .inst_dict = Layout::InstDict::tagged, .heap_cached_keys = 880, .dict_values_start = 0},
  {.minor = 13,
   .gen_frame = 72, .gen_frame_embedded = 1,
   .frame_code = 0, .frame_lasti = 56, .frame_localsplus = 72, .frame_previous = 8, .frame_owner = 70, .frame_block = 72, .owner_cstack = 3, .stackref_tag_mask = 0,
   .code_argcount = 52, .code_flags = 48, .code_firstlineno = 68, .code_filename = 112, .code_name = 120,
   .code_qualname = 128, .code_varnames = 96, .code_linetable = 136, .code_firsttraceable = 184, .code_adaptive = 200,
   .str_ascii_data = 40, .str_compact_data = 56, .eval_frame_arg = 1,
   .tstate_frame = 72, .cframe_frame = kAbsent, .tstate_thread_id = 152, .tstate_native_thread_id = 160,
   .runtime_tss = 2160, .runtime_interp_head = 632, .interp_threads_head = 7344,
   .runtime_gil_tstate = 0, .interp_gil_holder = 7760, .interp_gil_locked = 7768, .interp_modules = 7656, .gc_collecting = 7600,
   .inst_dict = Layout::InstDict::inline_values, .heap_cached_keys = 880, .dict_values_start = 8},
  {.minor = 14,
   .gen_frame = 72, .gen_frame_embedded = 1,
   .frame_code = 0, .frame_lasti = 56, .frame_localsplus = 80, .frame_previous = 8, .frame_owner = 74, .frame_block = 80, .owner_cstack = 3, .stackref_tag_mask = 7,
   .code_argcount = 52, .code_flags = 48, .code_firstlineno = 68, .code_filename = 112, .code_name = 120,
   .code_qualname = 128, .code_varnames = 96, .code_linetable = 136, .code_firsttraceable = 192, .code_adaptive = 208,
   .str_ascii_data = 40, .str_compact_data = 56, .eval_frame_arg = 1,
   .tstate_frame = 72, .cframe_frame = kAbsent, .tstate_thread_id = 152, .tstate_native_thread_id = 160,
   .runtime_tss = 2336, .runtime_interp_head = 808, .interp_threads_head = 7344,
   .runtime_gil_tstate = 0, .interp_gil_holder = 7792, .interp_gil_locked = 7800, .interp_modules = 0, .gc_collecting = 0,
   .inst_dict = Layout::InstDict::inline_values, .heap_cached_keys = 880, .dict_values_start = 8},
  {.minor = 15,
   .gen_frame = 72, .gen_frame_embedded = 1,
   .frame_code = 0, .frame_lasti = 56, .frame_localsplus = 80, .frame_previous = 8, .frame_owner = 74, .frame_block = 80, .owner_cstack = 3, .stackref_tag_mask = 7,
   .code_argcount = 52, .code_flags = 48, .code_firstlineno = 68, .code_filename = 112, .code_name = 120,
   .code_qualname = 128, .code_varnames = 96, .code_linetable = 136, .code_firsttraceable = 192, .code_adaptive = 208,
   .str_ascii_data = 40, .str_compact_data = 56, .eval_frame_arg = 1,
   .tstate_frame = 72, .cframe_frame = kAbsent, .tstate_thread_id = 176, .tstate_native_thread_id = 184,
   .runtime_tss = 0, .runtime_interp_head = 936, .interp_threads_head = 7336,
   .runtime_gil_tstate = 0, .interp_gil_holder = 0, .interp_gil_locked = 0, .interp_modules = 0, .gc_collecting = 0,
   .inst_dict = Layout::InstDict::inline_values, .heap_cached_keys = 888, .dict_values_start = 8},
}};
// clang-format on

Layout layout_of(const Row& r) {
  Layout l{};
  lt_py_offsets& b = l.bpf;
  b.py_minor = static_cast<lt::u16>(r.minor);
  b.gen_frame = r.gen_frame;
  b.gen_frame_embedded = r.gen_frame_embedded;
  b.frame_code = r.frame_code;
  b.frame_lasti = r.frame_lasti;
  b.frame_localsplus = r.frame_localsplus;
  b.code_argcount = r.code_argcount;
  b.code_flags = r.code_flags;
  b.code_firstlineno = r.code_firstlineno;
  b.code_filename = r.code_filename;
  b.code_name = r.code_name;
  b.code_firsttraceable = r.code_firsttraceable;
  b.code_adaptive = r.code_adaptive;
  b.str_ascii_data = r.str_ascii_data;
  b.eval_frame_arg = r.eval_frame_arg;
  b.frame_owner = r.frame_owner;
  b.str_compact_data = r.str_compact_data;
  b.tstate_frame = r.tstate_frame;
  b.cframe_frame = r.cframe_frame;
  b.frame_previous = r.frame_previous;
  b.frame_block = r.frame_block;
  b.owner_cstack = r.owner_cstack;
  b.stackref_tag_mask = r.stackref_tag_mask;
  l.frame_previous = r.frame_previous;
  l.frame_owner = r.frame_owner == kAbsent ? 0u : r.frame_owner;
  l.tstate_frame = r.tstate_frame;
  l.code_qualname = r.code_qualname;
  l.code_varnames = r.code_varnames;
  l.runtime_tss = r.runtime_tss;
  l.runtime_interp_head = r.runtime_interp_head;
  l.interp_threads_head = r.interp_threads_head;
  l.tstate_thread_id = r.tstate_thread_id;
  l.tstate_native_thread_id = r.tstate_native_thread_id;
  l.code_linetable = r.code_linetable;
  l.runtime_gil_tstate = r.runtime_gil_tstate;
  l.interp_gil_holder = r.interp_gil_holder;
  l.interp_gil_locked = r.interp_gil_locked;
  l.interp_modules = r.interp_modules;
  (r.minor == 8 ? l.runtime_gc_collecting : l.interp_gc_collecting) = r.gc_collecting;
  l.inst_dict = r.inst_dict;
  l.heap_cached_keys = r.heap_cached_keys;
  l.dict_values_start = r.dict_values_start;
  l.dict_keys_log2 = r.minor >= 11;
  l.tuple_items = r.minor >= 14 ? 32 : 24;  // 3.14 caches a tuple's hash (ob_hash) before ob_item
  return l;
}
}  // namespace

std::optional<Layout> layout_for(int minor) {
  for (const auto& r : kRows)
    if (r.minor == minor) return layout_of(r);
  return std::nullopt;
}

}  // namespace lt::python
