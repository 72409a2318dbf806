"""Garbage collections with known results: automatic collection off, then
ROUNDS full collections, each over CYCLES fresh reference cycles.

usage: gc_cycles.py GO_FILE [ROUNDS] [CYCLES]
Prints READY, waits for GO_FILE, collects, prints one JSON line
{"collected": [what each gc.collect() returned], "seconds": [each one's time]}.
"""
import gc
import json
import os
import sys
import time

go = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 20
cycles = int(sys.argv[3]) if len(sys.argv) > 3 else 500
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
