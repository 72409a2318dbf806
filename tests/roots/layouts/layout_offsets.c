// Prints the CPython 3.14/3.15 layout facts the profiler uses, from the
// interpreter's own internal headers (offsetof/sizeof, enum values).
// Build: cc -DPy_BUILD_CORE -I<include/python3.X> [-DPy_GIL_DISABLED=1] ...
// Output: one "name value" per line ("-" where the build has no such field).
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "internal/pycore_code.h"
#include "internal/pycore_debug_offsets.h"
#include "internal/pycore_frame.h"
#include "internal/pycore_genobject.h"
#include "internal/pycore_interp.h"
#include "internal/pycore_interpframe.h"
#include "internal/pycore_runtime.h"
#include "internal/pycore_stackref.h"
#include "internal/pycore_tstate.h"

#define OFF(T, f) printf("%-44s %zu\n", #T "." #f, offsetof(T, f))
#define SZ(T) printf("%-44s %zu\n", "sizeof(" #T ")", sizeof(T))
#define VAL(name, v) printf("%-44s %lld\n", name, (long long)(v))
#define ABSENT(name) printf("%-44s -\n", name)

// Bit position of a bit-field (or byte field) of the unicode state word.
#define STATE_BIT(field)                                          \
  do {                                                            \
    PyASCIIObject o;                                              \
    memset(&o, 0, sizeof o);                                      \
    o.state.field = 1;                                            \
    unsigned char *p = (unsigned char *)&o.state;                 \
    int bit = -1;                                                 \
    for (int i = 0; i < 32 && bit < 0; i++)                       \
      if (p[i / 8] & (1u << (i % 8))) bit = i;                    \
    printf("%-44s %d\n", "unicode.state." #field ".bit", bit);    \
  } while (0)

int main(void) {
  VAL("PY_VERSION_HEX", PY_VERSION_HEX);
#ifdef Py_GIL_DISABLED
  VAL("Py_GIL_DISABLED", 1);
#else
  VAL("Py_GIL_DISABLED", 0);
#endif
  // PyObject header
  SZ(PyObject);
  OFF(PyObject, ob_type);
  SZ(PyVarObject);
  OFF(PyVarObject, ob_size);
#ifdef Py_GIL_DISABLED
  OFF(PyObject, ob_tid);
  OFF(PyObject, ob_ref_local);
  OFF(PyObject, ob_ref_shared);
#else
  OFF(PyObject, ob_refcnt);
#endif
  // Type object
  OFF(PyTypeObject, tp_name);
  OFF(PyTypeObject, tp_basicsize);
  OFF(PyTypeObject, tp_flags);
  OFF(PyTypeObject, tp_iternext);
  OFF(PyTypeObject, tp_methods);
  // _PyInterpreterFrame
  SZ(_PyInterpreterFrame);
  OFF(_PyInterpreterFrame, f_executable);
  OFF(_PyInterpreterFrame, previous);
  OFF(_PyInterpreterFrame, f_funcobj);
  OFF(_PyInterpreterFrame, f_globals);
  OFF(_PyInterpreterFrame, f_builtins);
  OFF(_PyInterpreterFrame, f_locals);
  OFF(_PyInterpreterFrame, frame_obj);
  OFF(_PyInterpreterFrame, instr_ptr);
  OFF(_PyInterpreterFrame, stackpointer);
#ifdef Py_GIL_DISABLED
  OFF(_PyInterpreterFrame, tlbc_index);
#else
  ABSENT("_PyInterpreterFrame.tlbc_index");
#endif
  OFF(_PyInterpreterFrame, return_offset);
  OFF(_PyInterpreterFrame, owner);
  OFF(_PyInterpreterFrame, visited);
  OFF(_PyInterpreterFrame, localsplus);
  VAL("stackref.Py_TAG_BITS", Py_TAG_BITS);
  // Frame owner / state enums
  VAL("FRAME_OWNED_BY_THREAD", FRAME_OWNED_BY_THREAD);
  VAL("FRAME_OWNED_BY_GENERATOR", FRAME_OWNED_BY_GENERATOR);
  VAL("FRAME_OWNED_BY_FRAME_OBJECT", FRAME_OWNED_BY_FRAME_OBJECT);
  VAL("FRAME_OWNED_BY_INTERPRETER", FRAME_OWNED_BY_INTERPRETER);
#if PY_VERSION_HEX < 0x030F0000
  VAL("FRAME_OWNED_BY_CSTACK", FRAME_OWNED_BY_CSTACK);
#else
  ABSENT("FRAME_OWNED_BY_CSTACK");
#endif
  VAL("FRAME_CREATED", FRAME_CREATED);
  VAL("FRAME_SUSPENDED", FRAME_SUSPENDED);
  VAL("FRAME_SUSPENDED_YIELD_FROM", FRAME_SUSPENDED_YIELD_FROM);
#if PY_VERSION_HEX >= 0x030F0000
  VAL("FRAME_SUSPENDED_YIELD_FROM_LOCKED", FRAME_SUSPENDED_YIELD_FROM_LOCKED);
#else
  ABSENT("FRAME_SUSPENDED_YIELD_FROM_LOCKED");
#endif
  VAL("FRAME_EXECUTING", FRAME_EXECUTING);
#if PY_VERSION_HEX < 0x030F0000
  VAL("FRAME_COMPLETED", FRAME_COMPLETED);
#else
  ABSENT("FRAME_COMPLETED");
#endif
  VAL("FRAME_CLEARED", FRAME_CLEARED);
  // Code object
  SZ(PyCodeObject);
  OFF(PyCodeObject, co_consts);
  OFF(PyCodeObject, co_flags);
  OFF(PyCodeObject, co_argcount);
  OFF(PyCodeObject, co_kwonlyargcount);
  OFF(PyCodeObject, co_firstlineno);
  OFF(PyCodeObject, co_localsplusnames);
  OFF(PyCodeObject, co_localspluskinds);
  OFF(PyCodeObject, co_filename);
  OFF(PyCodeObject, co_name);
  OFF(PyCodeObject, co_qualname);
  OFF(PyCodeObject, co_linetable);
  OFF(PyCodeObject, _co_firsttraceable);
#ifdef Py_GIL_DISABLED
  OFF(PyCodeObject, co_tlbc);
  OFF(_PyCodeArray, size);
  OFF(_PyCodeArray, entries);
#else
  ABSENT("PyCodeObject.co_tlbc");
#endif
  OFF(PyCodeObject, co_code_adaptive);
  // Generator
  SZ(PyGenObject);
  OFF(PyGenObject, gi_name);
  OFF(PyGenObject, gi_qualname);
  OFF(PyGenObject, gi_frame_state);
  OFF(PyGenObject, gi_iframe);
  // Strings
  SZ(PyASCIIObject);
  SZ(PyCompactUnicodeObject);
  OFF(PyASCIIObject, length);
  OFF(PyASCIIObject, hash);
  OFF(PyASCIIObject, state);
  STATE_BIT(interned);
  STATE_BIT(kind);
  STATE_BIT(compact);
  STATE_BIT(ascii);
  STATE_BIT(statically_allocated);
  OFF(PyTupleObject, ob_item);
  OFF(PyBytesObject, ob_sval);
  // Thread state
  SZ(PyThreadState);
  OFF(PyThreadState, prev);
  OFF(PyThreadState, next);
  OFF(PyThreadState, interp);
  OFF(PyThreadState, current_frame);
  OFF(PyThreadState, thread_id);
  OFF(PyThreadState, native_thread_id);
  OFF(PyThreadState, datastack_chunk);
#if PY_VERSION_HEX >= 0x030F0000
  OFF(PyThreadState, base_frame);
#endif
  SZ(_PyThreadStateImpl);
  // Interpreter / runtime
  OFF(PyInterpreterState, next);
  OFF(PyInterpreterState, threads.head);
  OFF(PyInterpreterState, threads.main);
  OFF(PyInterpreterState, _gil.locked);
  OFF(PyInterpreterState, _gil.last_holder);
  SZ(_PyRuntimeState);
  OFF(_PyRuntimeState, debug_offsets);
  SZ(_Py_DebugOffsets);
  OFF(_PyRuntimeState, interpreters.head);
  OFF(_PyRuntimeState, interpreters.main);
#if PY_VERSION_HEX < 0x030F0000
  OFF(_PyRuntimeState, autoTSSkey);
#else
  ABSENT("_PyRuntimeState.autoTSSkey");
#endif
  OFF(_PyRuntimeState, trashTSSkey);
  OFF(Py_tss_t, _key);
  return 0;
}
