// CPython layouts, one table row per minor version (x86-64, GIL builds).
// 3.14/3.15 were measured with offsetof() against Debian's headers.
// Facts from ../shared/reference/python-unwinding.md §2; patch-stable for
// every field used here.  3.13+ is cross-checked against the live
// _Py_DebugOffsets at attach (debug_offsets.cpp).
#pragma once
#include <optional>

#include "bpf/events.h"

namespace lt::python {

struct Layout {
  lt_py_offsets bpf;  // what the BPF program needs
  // Not used by BPF; checked against _Py_DebugOffsets (3.13+).
  unsigned frame_previous;  // f_back / previous
  unsigned frame_owner;     // 0 = absent (<= 3.10)
  unsigned tstate_frame;    // frame / cframe / current_frame
  unsigned code_qualname;   // 0 = absent (<= 3.10)
  unsigned code_varnames;   // co_varnames / co_localsplusnames
  // Thread states (python-unwinding.md §2.1), for the stack sampler.
  unsigned runtime_tss = 0;              // _PyRuntime -> Py_tss_t autoTSSkey {int init; key}
  unsigned runtime_interp_head = 0;      // _PyRuntime.interpreters.head
  unsigned interp_threads_head = 0;      // PyInterpreterState -> first PyThreadState
  unsigned tstate_next = 8;              // PyThreadState.next
  unsigned tstate_thread_id = 0;         // PyThreadState.thread_id (pthread_t)
  unsigned tstate_native_thread_id = 0;  // PyThreadState.native_thread_id (gettid; 3.11+, 0 = absent)
  unsigned code_linetable = 0;           // co_lnotab (<= 3.9) / co_linetable
  unsigned type_tp_name = 24;
  unsigned type_tp_iternext = 224;
  unsigned type_tp_methods = 232;
  // Who holds the GIL (python-unwinding.md §2.1), for `dump`: <= 3.11
  // _PyRuntime.gilstate.tstate_current (the holder's PyThreadState, NULL
  // when released); 3.12+ PyInterpreterState._gil.last_holder, which is the
  // holder only while _gil.locked is set.  0 = not known for this version.
  unsigned runtime_gil_tstate = 0;
  unsigned interp_gil_holder = 0, interp_gil_locked = 0;
  // sys.modules: PyInterpreterState.modules / .imports.modules, for what
  // Dynamo keeps (dynamo_state.h).  0 = not known for this version.
  unsigned interp_modules = 0;
  // The cyclic collector's `collecting` flag (an int, set for the whole of a
  // collection): 3.8 _PyRuntime.gc.collecting, 3.9+
  // PyInterpreterState.gc.collecting; 0 = not known.  With the GIL holder
  // above and PyThreadState.interp, what BPF needs to tell a stack sample
  // taken inside a collection (LT_TARGET_GC_SAMPLED).
  unsigned runtime_gc_collecting = 0, interp_gc_collecting = 0;
  unsigned tstate_interp = 16;  // PyThreadState.interp (16 in every 3.8-3.13; published from 3.13)
  // Instance attributes and dicts, for the nn.Module tree read from outside
  // (module_tree.cpp; measured with offsetof() against each pyenv
  // 3.8-3.13's headers and sid's 3.14/3.15).  inst_dict: where an
  // object's attributes live.
  enum class InstDict : unsigned char {
    none,           // not known for this version: no module tree
    dictoffset,     // <= 3.10: the dict pointer at obj + type->tp_dictoffset
    managed,        // 3.11: dict pointer at obj - 24, else values at obj - 32
    tagged,         // 3.12: obj - 24 holds the dict, or the values' address - 1 (odd)
    inline_values,  // 3.13+: dict pointer at obj - 24, else values at obj + tp_basicsize
  };
  InstDict inst_dict = InstDict::none;
  unsigned heap_cached_keys = 0;   // PyHeapTypeObject.ht_cached_keys: keys of split values
  unsigned dict_values_start = 0;  // bytes before the value array of PyDictValues (3.13: 8)
  bool dict_keys_log2 = false;     // PyDictKeysObject: 3.11+ (log2 sizes, dk_kind) or <= 3.10 (dk_size)
  unsigned tuple_items = 24;       // PyTupleObject.ob_item (3.14+: 32, after ob_hash)
};

// Layout for CPython 3.<minor>, or nullopt if we have no table for it.
std::optional<Layout> layout_for(int minor);
constexpr int kMinMinor = 8;
constexpr int kMaxMinor = 15;

}  // namespace lt::python
