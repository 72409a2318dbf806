"""Functions first sampled in the last milliseconds of a process: after
--wait-file appears, burst_0 ... burst_7 each burn --ms of this thread's
CPU time, one after the other, and the interpreter exits at once.  Their
code objects are first seen in those final samples, so a tracer that names
code objects only after the process is gone shows them as <unknown>.
Prints READY, then a JSON line with the CPU seconds the bursts used."""
import argparse
import json
import os
import time


def spin(until):
    n = 0
    while time.thread_time() < until:
        n += 1
    return n


def burst_0(s): return spin(time.thread_time() + s)
def burst_1(s): return spin(time.thread_time() + s)
def burst_2(s): return spin(time.thread_time() + s)
def burst_3(s): return spin(time.thread_time() + s)
def burst_4(s): return spin(time.thread_time() + s)
def burst_5(s): return spin(time.thread_time() + s)
def burst_6(s): return spin(time.thread_time() + s)
def burst_7(s): return spin(time.thread_time() + s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wait-file")
    ap.add_argument("--ms", type=float, default=2.0)
    a = ap.parse_args()
    print("READY", os.getpid(), flush=True)
    while a.wait_file and not os.path.exists(a.wait_file):
        time.sleep(0.01)
    t0 = time.thread_time()
    for f in (burst_0, burst_1, burst_2, burst_3, burst_4, burst_5, burst_6, burst_7):
        f(a.ms / 1000.0)
    print(json.dumps({"cpu_s": time.thread_time() - t0}), flush=True)


if __name__ == "__main__":
    main()
