# A live CPython for the layout checks: prints its facts as one JSON line,
# then parks its main thread (and one worker) inside a running generator
# called from two plain functions, so that an outside reader finds
# THREAD, GENERATOR and entry frames on each stack.  Runs for $1 seconds.
import ctypes, json, os, sys, threading, time, types

def sleeper_gen(t):
    time.sleep(t)
    yield 1

def inner(t):
    return next(sleeper_gen(t))

def outer(t):
    return inner(t)

secs = float(sys.argv[1]) if len(sys.argv) > 1 else 60
latin1 = "".join([chr(0xe9), "abc"])
rt = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
print(json.dumps({
    "pid": os.getpid(),
    "runtime": hex(rt),
    "version": sys.version.split()[0],
    "hexversion": hex(sys.hexversion),
    "gil_enabled": getattr(sys, "_is_gil_enabled", lambda: True)(),
    "executable": sys.executable,
    "object.__basicsize__": object.__basicsize__,
    "CodeType.__basicsize__": types.CodeType.__basicsize__,
    "GeneratorType.__basicsize__": types.GeneratorType.__basicsize__,
    "tuple.__basicsize__": tuple.__basicsize__,
    "getsizeof('')-1": sys.getsizeof("") - 1,
    # a fresh latin-1 str (chr(0xe9) alone is a cached singleton with a utf8 copy)
    "getsizeof(latin1)-len-1": sys.getsizeof(latin1) - len(latin1) - 1,
    "outer.__code__": hex(id(outer.__code__)),
    "main_native_id": threading.get_native_id(),
}), flush=True)
w = threading.Thread(target=outer, args=(secs,), name="worker")
w.start()
outer(secs)
