"""A workload with known CPU shares, for checking sampled stacks against
ground truth: the main thread spends 60 / 30 / 10 % of its time in
hot_a / hot_b / hot_c (each a pure-Python loop, time-sliced by wall clock so
the shares hold on any machine).  A second thread waits in a GIL-releasing
call (off-CPU); with --hasher a third burns CPU in C with the GIL released.  Prints READY and a JSON line with the function names and the
line of each hot loop; runs until --seconds pass or the --stop-file appears.
"""
import argparse
import hashlib
import json
import os
import threading
import time


# The slices' clock: wall time by default; --cpu-clock slices by the
# thread's own CPU time, so the shares hold however busy the machine is.
clock = time.perf_counter


def hot_a(until):
    n = 0
    while clock() < until:  # HOT_A
        n += 1
    return n


def hot_b(until):
    n = 0
    while clock() < until:  # HOT_B
        n += 1
    return n


def hot_c(until):
    n = 0
    while clock() < until:  # HOT_C
        n += 1
    return n


def slice_loop(seconds, stop_file):
    # 10 ms rounds: 6 ms in hot_a, 3 ms in hot_b, 1 ms in hot_c.
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        if stop_file and os.path.exists(stop_file):
            break
        t = clock()
        hot_a(t + 0.006)
        hot_b(t + 0.009)
        hot_c(t + 0.010)


def waiter(stop):
    while not stop.is_set():
        stop.wait(0.05)  # blocks in a futex with the GIL released


def hasher(stop):
    data = b"x" * (16 << 20)
    while not stop.is_set():
        hashlib.sha256(data)  # releases the GIL for large buffers


def hot_lines():
    lines = {}
    with open(__file__) as f:
        for no, text in enumerate(f, 1):
            for tag in ("HOT_A", "HOT_B", "HOT_C"):
                if text.rstrip().endswith("# " + tag):
                    lines["hot_" + tag[-1].lower()] = no
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--stop-file")
    ap.add_argument("--wait-file", help="wait for this file before burning")
    ap.add_argument("--cpu-clock", action="store_true", help="slice by the thread's CPU time, not wall time")
    ap.add_argument("--in-action", metavar="NAME",
                    help="run the hot loop inside Lightning's Profiler.profile(NAME) (its profiler module on the path)")
    ap.add_argument("--hasher", action="store_true",
                    help="also run a thread hashing in C with the GIL released (on-CPU, no GIL)")
    args = ap.parse_args()
    if args.cpu_clock:
        global clock
        clock = time.thread_time
    if args.in_action:
        # the real generator, at its real path suffix (lightning_site.py)
        from pytorch_lightning.profilers.base import PassThroughProfiler

        profiler = PassThroughProfiler()
    stop = threading.Event()
    t = threading.Thread(target=waiter, args=(stop,), name="waiter")
    t.start()
    print("READY", flush=True)
    if args.hasher:
        threading.Thread(target=hasher, args=(stop,), name="hasher", daemon=True).start()
    if args.wait_file:
        while not os.path.exists(args.wait_file):
            time.sleep(0.01)
    if args.in_action:
        with profiler.profile(args.in_action):  # main() opens the action
            slice_loop(args.seconds, args.stop_file)
    else:
        slice_loop(args.seconds, args.stop_file)
    stop.set()
    t.join()
    print(json.dumps({"file": os.path.abspath(__file__), "lines": hot_lines()}), flush=True)


if __name__ == "__main__":
    main()
