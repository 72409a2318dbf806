"""Drives Lightning's real Profiler classes (copied from a Lightning wheel,
see tests/integration/lightning_site.py) without torch, so every CPython on
the machine can run it.  Prints READY, waits for --wait-file, runs actions on
two threads, with exceptions and a custom Profiler subclass, then prints a
JSON line with the expected counts and the body time the workload measured.
"""
import argparse
import json
import os
import sys
import threading
import time

if os.environ.get("LT_LIGHTNING_WHEEL") == "lightning":
    from lightning.pytorch.profilers.base import PassThroughProfiler
else:
    from pytorch_lightning.profilers.base import PassThroughProfiler


class CustomProfiler(PassThroughProfiler):
    """A user's own Profiler subclass: its actions come through the same generator."""


def burn(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wait-file")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--fork-children", type=int, default=0)
    ap.add_argument("--start-delay", type=float, default=0.0, help="sleep before the actions (a rank importing torch)")
    args = ap.parse_args()
    prof = PassThroughProfiler()
    body = {}
    span = {}  # wall time around each whole `with` statement: the upper bound of what can be reported

    def spanned(name, t):
        span[name] = span.get(name, 0.0) + time.perf_counter() - t

    def timed(name, seconds):
        t = time.perf_counter()
        burn(seconds * args.scale)
        body[name] = body.get(name, 0.0) + time.perf_counter() - t

    print("READY", os.getpid(), flush=True)
    if args.wait_file:
        while not os.path.exists(args.wait_file):
            time.sleep(0.01)
    time.sleep(args.start_delay)

    def worker():
        for _ in range(15):
            t = time.perf_counter()
            with prof.profile("thread_action"):
                timed("thread_action", 0.001)
            spanned("thread_action", t)

    th = threading.Thread(target=worker)
    th.start()
    for _ in range(20):
        t = time.perf_counter()
        with prof.profile("outer"):
            timed("outer", 0.002)
            ti = time.perf_counter()
            with prof.profile("inner"):
                timed("inner", 0.001)
            spanned("inner", ti)
        spanned("outer", t)
    for _ in range(5):
        t = time.perf_counter()
        try:
            with prof.profile("raises"):
                timed("raises", 0.0005)
                raise ValueError("boom")
        except ValueError:
            spanned("raises", t)
    # Non-ASCII names: CPython stores them as Latin-1, UCS-2 or UCS-4.
    for name in ("épreuve", "Ωmega_step", "🚀_launch"):
        for _ in range(2):
            t = time.perf_counter()
            with prof.profile(name):
                timed(name, 0.0005)
            spanned(name, t)
    custom = CustomProfiler()
    for _ in range(3):
        t = time.perf_counter()
        with custom.profile("custom"):
            timed("custom", 0.001)
        spanned("custom", t)
    for _ in range(4):
        prof.start("direct")
        timed("direct", 0.001)
        prof.stop("direct")
    th.join()
    children = []
    for i in range(args.fork_children):
        pid = os.fork()
        if pid == 0:
            for _ in range(3 + i):
                with prof.profile("child_action"):
                    burn(0.001)
            os._exit(0)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)
    # outer includes inner's time
    body["outer"] += body["inner"]
    counts = {"outer": 20, "inner": 20, "thread_action": 15, "raises": 5, "custom": 3, "direct": 4,
              "épreuve": 2, "Ωmega_step": 2, "🚀_launch": 2}
    print("RESULT " + json.dumps(ensure_ascii=False, obj={"counts": counts, "body": body, "span": span, "version": list(sys.version_info[:2])}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
