#!/usr/bin/env python3
"""Markdown tables from measure.sh's OUTDIR (for docs/cpython-layouts-3.14-3.15.md).

usage: render.py OUTDIR > tables.md
"""
import json
import os
import sys

out = sys.argv[1]
VERSIONS = ["3.14", "3.14t", "3.15"]

# label, offsetof key (layout-V.txt), _Py_DebugOffsets key (debug-V.txt)
ROWS = [
    ("PyObject: ob_type (= header size - 8)", "PyObject.ob_type", "pyobject.ob_type"),
    ("sizeof(PyObject)", "sizeof(PyObject)", "pyobject.size"),
    ("PyVarObject.ob_size", "PyVarObject.ob_size", "tuple_object.ob_size"),
    ("PyTypeObject.tp_name", "PyTypeObject.tp_name", "type_object.tp_name"),
    ("PyTypeObject.tp_flags", "PyTypeObject.tp_flags", "type_object.tp_flags"),
    ("PyTypeObject.tp_iternext", "PyTypeObject.tp_iternext", None),
    ("PyTypeObject.tp_methods", "PyTypeObject.tp_methods", None),
    ("frame f_executable (tagged _PyStackRef)", "_PyInterpreterFrame.f_executable", "interpreter_frame.executable"),
    ("frame previous", "_PyInterpreterFrame.previous", "interpreter_frame.previous"),
    ("frame instr_ptr", "_PyInterpreterFrame.instr_ptr", "interpreter_frame.instr_ptr"),
    ("frame stackpointer", "_PyInterpreterFrame.stackpointer", "interpreter_frame.stackpointer"),
    ("frame tlbc_index (int32, 3.14t)", "_PyInterpreterFrame.tlbc_index", "interpreter_frame.tlbc_index"),
    ("frame return_offset (u16)", "_PyInterpreterFrame.return_offset", None),
    ("frame owner (char)", "_PyInterpreterFrame.owner", "interpreter_frame.owner"),
    ("frame localsplus", "_PyInterpreterFrame.localsplus", "interpreter_frame.localsplus"),
    ("sizeof(_PyInterpreterFrame)", "sizeof(_PyInterpreterFrame)", "interpreter_frame.size"),
    ("_PyStackRef tag bits (mask off)", "stackref.Py_TAG_BITS", None),
    ("code co_flags", "PyCodeObject.co_flags", None),
    ("code co_argcount", "PyCodeObject.co_argcount", "code_object.argcount"),
    ("code co_kwonlyargcount", "PyCodeObject.co_kwonlyargcount", None),
    ("code co_firstlineno", "PyCodeObject.co_firstlineno", "code_object.firstlineno"),
    ("code co_localsplusnames (varnames)", "PyCodeObject.co_localsplusnames", "code_object.localsplusnames"),
    ("code co_filename", "PyCodeObject.co_filename", "code_object.filename"),
    ("code co_name", "PyCodeObject.co_name", "code_object.name"),
    ("code co_qualname", "PyCodeObject.co_qualname", "code_object.qualname"),
    ("code co_linetable", "PyCodeObject.co_linetable", "code_object.linetable"),
    ("code _co_firsttraceable", "PyCodeObject._co_firsttraceable", None),
    ("code co_tlbc (_PyCodeArray*, 3.14t)", "PyCodeObject.co_tlbc", "code_object.co_tlbc"),
    ("code co_code_adaptive (bytecode start)", "PyCodeObject.co_code_adaptive", "code_object.co_code_adaptive"),
    ("sizeof(PyCodeObject)", "sizeof(PyCodeObject)", "code_object.size"),
    ("_PyCodeArray.entries (3.14t)", "_PyCodeArray.entries", None),
    ("gen gi_name", "PyGenObject.gi_name", "gen_object.gi_name"),
    ("gen gi_frame_state (int8)", "PyGenObject.gi_frame_state", "gen_object.gi_frame_state"),
    ("gen gi_iframe", "PyGenObject.gi_iframe", "gen_object.gi_iframe"),
    ("sizeof(PyGenObject)", "sizeof(PyGenObject)", "gen_object.size"),
    ("str: sizeof(PyASCIIObject) (ASCII data)", "sizeof(PyASCIIObject)", "unicode_object.asciiobject_size"),
    ("str: sizeof(PyCompactUnicodeObject) (non-ASCII data)", "sizeof(PyCompactUnicodeObject)", "unicode_object.compactunicodeobject_size"),
    ("str length", "PyASCIIObject.length", "unicode_object.length"),
    ("str state", "PyASCIIObject.state", "unicode_object.state"),
    ("str state: kind bit (3 bits)", "unicode.state.kind.bit", None),
    ("str state: compact bit", "unicode.state.compact.bit", None),
    ("str state: ascii bit", "unicode.state.ascii.bit", None),
    ("tuple ob_item", "PyTupleObject.ob_item", "tuple_object.ob_item"),
    ("bytes ob_sval", "PyBytesObject.ob_sval", "bytes_object.ob_sval"),
    ("tstate prev", "PyThreadState.prev", "thread_state.prev"),
    ("tstate next", "PyThreadState.next", "thread_state.next"),
    ("tstate interp", "PyThreadState.interp", "thread_state.interp"),
    ("tstate current_frame", "PyThreadState.current_frame", "thread_state.current_frame"),
    ("tstate thread_id (pthread_t)", "PyThreadState.thread_id", "thread_state.thread_id"),
    ("tstate native_thread_id (tid)", "PyThreadState.native_thread_id", "thread_state.native_thread_id"),
    ("tstate datastack_chunk", "PyThreadState.datastack_chunk", "thread_state.datastack_chunk"),
    ("tstate base_frame (3.15)", "PyThreadState.base_frame", "thread_state.base_frame"),
    ("sizeof(PyThreadState)", "sizeof(PyThreadState)", "thread_state.size"),
    ("interp next", "PyInterpreterState.next", "interpreter_state.next"),
    ("interp threads.head", "PyInterpreterState.threads.head", "interpreter_state.threads_head"),
    ("interp threads.main", "PyInterpreterState.threads.main", "interpreter_state.threads_main"),
    ("interp _gil.last_holder", "PyInterpreterState._gil.last_holder", "interpreter_state.gil_runtime_state_holder"),
    ("interp _gil.locked", "PyInterpreterState._gil.locked", "interpreter_state.gil_runtime_state_locked"),
    ("_PyRuntime interpreters.head", "_PyRuntimeState.interpreters.head", "runtime_state.interpreters_head"),
    ("_PyRuntime interpreters.main", "_PyRuntimeState.interpreters.main", None),
    ("_PyRuntime autoTSSkey (Py_tss_t)", "_PyRuntimeState.autoTSSkey", None),
    ("Py_tss_t._key", "Py_tss_t._key", None),
    ("sizeof(_PyRuntimeState)", "sizeof(_PyRuntimeState)", "runtime_state.size"),
    ("sizeof(_Py_DebugOffsets)", "sizeof(_Py_DebugOffsets)", "sizeof(_Py_DebugOffsets)"),
]
ENUMS = ["FRAME_OWNED_BY_THREAD", "FRAME_OWNED_BY_GENERATOR", "FRAME_OWNED_BY_FRAME_OBJECT",
         "FRAME_OWNED_BY_INTERPRETER", "FRAME_OWNED_BY_CSTACK", "FRAME_CREATED", "FRAME_SUSPENDED",
         "FRAME_SUSPENDED_YIELD_FROM", "FRAME_SUSPENDED_YIELD_FROM_LOCKED", "FRAME_EXECUTING",
         "FRAME_COMPLETED", "FRAME_CLEARED"]


def kv(path):
    d = {}
    if os.path.exists(path):
        for line in open(path):
            p = line.split()
            if len(p) >= 2:
                d[p[0]] = p[1]
    return d


def debug(path):
    """field -> (compiled, live or None); plus sub-struct starts."""
    d, starts = {}, []
    if not os.path.exists(path):
        return d, starts
    for line in open(path):
        p = line.split()
        if not p or p[0] in ("field", "cookie"):
            continue
        if p[0] == "start":
            starts.append((p[2], p[3]))
        elif p[0] == "sizeof(_Py_DebugOffsets)":
            d[p[0]] = (p[1], None)
        elif len(p) >= 2 and p[1].isdigit():
            d[p[0]] = (p[1], p[2] if len(p) >= 3 and p[2].isdigit() else None)
    return d, starts


lay = {v: kv(f"{out}/layout-{v}.txt") for v in VERSIONS}
dbg = {v: debug(f"{out}/debug-{v}.txt") for v in VERSIONS}
tgt = {}
for v in VERSIONS:
    p = f"{out}/target-{v}.json"
    if os.path.exists(p) and os.path.getsize(p):
        tgt[v] = json.loads(open(p).readline())

print("## Compact table (offsetof from each version's headers)\n")
print("| field | 3.14 | 3.14t | 3.15 |")
print("|---|---|---|---|")
for label, k, _ in ROWS:
    print(f"| {label} | " + " | ".join(lay[v].get(k, "—").replace("-", "—") for v in VERSIONS) + " |")
for e in ENUMS:
    print(f"| {e} | " + " | ".join(lay[v].get(e, "—") if lay[v].get(e) != "-" else "—" for v in VERSIONS) + " |")
print()

for v in VERSIONS:
    d, _ = dbg[v]
    live = any(x[1] is not None for x in d.values())
    src = "live `_PyRuntime` of a running process" if live else "compiled `_Py_DebugOffsets_INIT` (no live 3.14t process here)"
    print(f"## {v}: offsetof vs `_Py_DebugOffsets` ({src})\n")
    print("| field | offsetof | debug offsets | agree |")
    print("|---|---|---|---|")
    for label, k, dk in ROWS:
        a = lay[v].get(k)
        if a is None or a == "-":
            a = "—"
        b = "—"
        agree = "n/a (not in debug offsets)"
        if dk and dk in d:
            comp, lv = d[dk]
            b = lv if lv is not None else comp
            if dk in ("interpreter_frame.tlbc_index", "code_object.co_tlbc") and b == "0" and a == "—":
                b, agree = "0 (absent)", "yes (absent)"
            else:
                agree = "yes" if a == b else "**NO**"
        elif dk:
            agree = "n/a (not in this version's debug offsets)"
        print(f"| {label} | {a} | {b} | {agree} |")
    if v in tgt:
        t = tgt[v]
        checks = [("object.__basicsize__", "sizeof(PyObject)"),
                  ("CodeType.__basicsize__", "PyCodeObject.co_code_adaptive"),
                  ("tuple.__basicsize__", "PyTupleObject.ob_item"),
                  ("getsizeof('')-1", "sizeof(PyASCIIObject)"),
                  ("getsizeof(latin1)-len-1", "sizeof(PyCompactUnicodeObject)")]
        for pk, k in checks:
            if pk in t:
                a = lay[v].get(k)
                print(f"| live `{pk}` vs {k} | {a} | {t[pk]} (Python) | {'yes' if str(t[pk]) == a else '**NO**'} |")
    print()
