"""Module bodies that live a few milliseconds: --modules small modules are
written to a temporary directory; after --wait-file appears, each is
imported in turn, and its body burns --ms of this thread's CPU time in its
own top-level loop.  A module's <module> code object is freed as soon as
its body has run, so a tracer that reads code objects more than a few
milliseconds after sampling them names those frames <unknown>.
Prints READY, then a JSON line with the modules imported and their CPU
seconds."""
import argparse
import importlib
import json
import os
import shutil
import sys
import tempfile
import time

BODY = """import time
_until = time.thread_time() + {s!r}
while time.thread_time() < _until:  # every sample of this module lands here
    pass
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wait-file", required=True)
    ap.add_argument("--modules", type=int, default=60)
    ap.add_argument("--ms", type=float, default=5.0)
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="short-modules-")
    try:
        for i in range(args.modules):
            with open(os.path.join(d, f"ltmod_{i}.py"), "w") as f:
                f.write(BODY.format(s=args.ms / 1000.0))
        sys.path.insert(0, d)
        print("READY", flush=True)
        while not os.path.exists(args.wait_file):
            time.sleep(0.01)
        t0 = time.thread_time()
        for i in range(args.modules):
            importlib.import_module(f"ltmod_{i}")
        cpu_s = time.thread_time() - t0
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print(json.dumps({"modules": args.modules, "cpu_s": cpu_s}), flush=True)


if __name__ == "__main__":
    main()
