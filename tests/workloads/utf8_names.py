"""Names that are not valid Unicode text, through Lightning's real
Profiler.profile (no torch, so any CPython runs it).  Prints READY, waits
for --wait-file, runs the actions, then a RESULT JSON line (ensure_ascii, so
lone surrogates travel as escapes): the exact strs the target held.

  action     "bad\\udcff-name": a lone surrogate, as surrogateescape makes
             from a file name's byte 0xFF
  function   co_name / co_qualname "bad\\udcfe-func" (a code object renamed)
  module     a file under a directory whose name holds the byte 0xFD, so
             co_filename holds "\\udcfd"
  argv       raw bytes in the command line (the test passes b"\\xfc"):
             /proc/PID/cmdline is bytes, not UTF-8
"""
import argparse
import importlib.util
import json
import os
import sys
import time

if os.environ.get("LT_LIGHTNING_WHEEL") == "lightning":
    from lightning.pytorch.profilers.base import PassThroughProfiler
else:
    from pytorch_lightning.profilers.base import PassThroughProfiler

ACTION = "bad\udcff-name"
FUNC = "bad\udcfe-func"
MODULE_SOURCE = """
import time


def spin(seconds):
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        n += 1
    return n
"""


def load_module(base):
    """A module at a path that is not UTF-8 (bytes 0xFD in a directory name)."""
    d = os.path.join(os.fsencode(base), b"mod\xfd")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, b"surr_mod.py")
    with open(path, "wb") as f:
        f.write(MODULE_SOURCE.encode())
    spec = importlib.util.spec_from_file_location("surr_mod", os.fsdecode(path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fn = mod.spin
    rename = {"co_name": FUNC}
    if sys.version_info >= (3, 11):
        rename["co_qualname"] = FUNC
    fn.__code__ = fn.__code__.replace(**rename)
    return fn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wait-file")
    ap.add_argument("--tag", default="")
    ap.add_argument("--seconds", type=float, default=0.25)
    ap.add_argument("--calls", type=int, default=6)
    args = ap.parse_args()
    spin = load_module(os.getcwd())
    prof = PassThroughProfiler()
    print("READY", os.getpid(), flush=True)
    if args.wait_file:
        while not os.path.exists(args.wait_file):
            time.sleep(0.01)
    for _ in range(args.calls):
        with prof.profile("".join(list(ACTION))):  # a fresh str each call, as Lightning's f-strings
            spin(args.seconds)
        with prof.profile("good-name"):
            time.sleep(0.001)
    print("RESULT " + json.dumps({"action": ACTION, "function": FUNC, "file": spin.__code__.co_filename,
                                  "argv": sys.argv, "calls": args.calls}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
