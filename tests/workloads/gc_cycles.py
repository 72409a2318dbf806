"""Garbage collections with known results: automatic collection off, then
ROUNDS full collections, each over CYCLES fresh reference cycles.

usage: gc_cycles.py --wait-file GO_FILE [--rounds 20] [--cycles 500] [--live N] [--busy-s S]
--live N keeps N lists alive for every collection to scan (longer ones);
--busy-s S runs S seconds of plain Python (no collection) before each.
Prints READY, waits for GO_FILE, collects, prints one JSON line
{"collected": [what each gc.collect() returned], "seconds": [each one's time],
 "cpu_seconds": [each one's CPU time on its thread], "busy_cpu_s": the busy work's}.
"""
import argparse
import gc
import json
import os
import time

ap = argparse.ArgumentParser()
ap.add_argument("--wait-file", required=True)
ap.add_argument("--rounds", type=int, default=20)
ap.add_argument("--cycles", type=int, default=500)
ap.add_argument("--live", type=int, default=0)
ap.add_argument("--busy-s", type=float, default=0.0)
args = ap.parse_args()
live = [[i] for i in range(args.live)]  # lists: always tracked (a dict of ints is not)
go, rounds, cycles = args.wait_file, args.rounds, args.cycles
gc.disable()  # only the collections asked for below
gc.collect()
print("READY", flush=True)
while not os.path.exists(go):
    time.sleep(0.01)
collected, seconds, cpu_seconds, busy_cpu = [], [], [], 0.0
for r in range(rounds):
    b0, c0 = time.perf_counter(), time.thread_time()
    while time.perf_counter() - b0 < args.busy_s:
        sum(range(1000))
    busy_cpu += time.thread_time() - c0
    for i in range(cycles + r):  # a different count each round
        a = []
        a.append(a)
    del a
    t0, c0 = time.perf_counter(), time.thread_time()
    collected.append(gc.collect())
    seconds.append(time.perf_counter() - t0)
    cpu_seconds.append(time.thread_time() - c0)
print(json.dumps({"collected": collected, "seconds": seconds, "cpu_seconds": cpu_seconds, "busy_cpu_s": busy_cpu}),
      flush=True)
