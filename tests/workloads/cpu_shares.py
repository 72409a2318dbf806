"""A workload with known CPU shares, for checking sampled stacks against
ground truth: the main thread spends 60 / 30 / 10 % of its CPU time in
hot_a / hot_b / hot_c (each a pure-Python loop, sliced by the thread's own
CPU clock, so the shares hold on a busy machine too: slices by wall clock
gave hot_a 92-99 % there, as a preempted hot_a ran past the deadlines of
hot_b and hot_c).  The JSON line also gives the CPU seconds each function
really used, as measured by the thread itself.  A second thread waits in a GIL-releasing
call (off-CPU); with --hasher a third burns CPU in C with the GIL released.  Prints READY and a JSON line with the function names and the
line of each hot loop; runs until --seconds pass or the --stop-file appears.
"""
import argparse
import hashlib
import json
import os
import threading
import time


def hot_a(until):
    n = 0
    while time.thread_time() < until:  # HOT_A
        n += 1
    return n


def hot_b(until):
    n = 0
    while time.thread_time() < until:  # HOT_B
        n += 1
    return n


def hot_c(until):
    n = 0
    while time.thread_time() < until:  # HOT_C
        n += 1
    return n


def slice_loop(seconds, stop_file, min_cpu=0.0, max_seconds=120.0):
    """Rounds of 10 ms of this thread's CPU time: 6 in hot_a, 3 in hot_b,
    1 in hot_c, for `seconds` of wall time, and on past that (up to
    max_seconds) until the thread has used min_cpu CPU seconds, so that a
    busy machine still yields enough samples; returns the CPU seconds spent
    in each (the deadlines are overshot by one clock read, a few us)."""
    cpu = {"hot_a": 0.0, "hot_b": 0.0, "hot_c": 0.0}
    wall = dict(cpu)  # and the wall time each took (more than its CPU time when the thread waited for a CPU)
    start = time.perf_counter()
    end, cap = start + seconds, start + max(seconds, max_seconds)
    while True:
        now = time.perf_counter()
        if now >= cap or (now >= end and sum(cpu.values()) >= min_cpu):
            break
        if stop_file and os.path.exists(stop_file):
            break
        w0, t = time.perf_counter(), time.thread_time()
        hot_a(t + 0.006)
        w1, t1 = time.perf_counter(), time.thread_time()
        hot_b(t + 0.009)
        w2, t2 = time.perf_counter(), time.thread_time()
        hot_c(t + 0.010)
        w3, t3 = time.perf_counter(), time.thread_time()
        cpu["hot_a"] += t1 - t
        cpu["hot_b"] += t2 - t1
        cpu["hot_c"] += t3 - t2
        wall["hot_a"] += w1 - w0
        wall["hot_b"] += w2 - w1
        wall["hot_c"] += w3 - w2
    return cpu, wall


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
    ap.add_argument("--min-cpu-seconds", type=float, default=0.0,
                    help="after --seconds, go on until the main thread used this much CPU (at most 120 s in all)")
    ap.add_argument("--stop-file")
    ap.add_argument("--wait-file", help="wait for this file before burning")
    ap.add_argument("--cpu-clock", action="store_true", help="accepted for old callers: slices are always by CPU time")
    ap.add_argument("--in-action", metavar="NAME",
                    help="run the hot loop inside Lightning's Profiler.profile(NAME) (its profiler module on the path)")
    ap.add_argument("--hasher", action="store_true",
                    help="also run a thread hashing in C with the GIL released (on-CPU, no GIL)")
    args = ap.parse_args()
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
            cpu, wall = slice_loop(args.seconds, args.stop_file, args.min_cpu_seconds)
    else:
        cpu, wall = slice_loop(args.seconds, args.stop_file, args.min_cpu_seconds)
    stop.set()
    t.join()
    print(json.dumps({"file": os.path.abspath(__file__), "lines": hot_lines(), "cpu_s": cpu, "wall_s": wall}), flush=True)


if __name__ == "__main__":
    main()
