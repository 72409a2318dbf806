"""Garbage collections with known results: automatic collection off, then
ROUNDS full collections, each over CYCLES fresh reference cycles.

usage: gc_cycles.py --wait-file GO_FILE [--rounds 20] [--cycles 500]
Prints READY, waits for GO_FILE, collects, prints one JSON line
{"collected": [what each gc.collect() returned], "seconds": [each one's time]}.
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
a = ap.parse_args()
go, rounds, cycles = a.wait_file, a.rounds, a.cycles
gc.disable()  # only the collections asked for below
gc.collect()
print("READY", flush=True)
while not os.path.exists(go):
    time.sleep(0.01)
collected, seconds = [], []
for r in range(rounds):
    for i in range(cycles + r):  # a different count each round
        a = []
        a.append(a)
    del a
    t0 = time.perf_counter()
    collected.append(gc.collect())
    seconds.append(time.perf_counter() - t0)
print(json.dumps({"collected": collected, "seconds": seconds}), flush=True)
