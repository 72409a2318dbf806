"""How long `ltrace-bpf dump` takes on a process with 50+ threads
(tests/workloads/dump_target.py --idle 46: 52 Python threads), per CPython:
the command's wall time (exec to exit, JSON out) and the time it reports for
reading the process (read_ms: discovery, every stack, /proc, native leaves).
Median and max of N runs.  Usage: bench/dump_time.py [N]"""
import glob
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LTRACE = os.path.join(ROOT, "build", "ltrace-bpf")
TARGET = os.path.join(ROOT, "tests", "workloads", "dump_target.py")


def pythons():
    for minor in (8, 11, 12, 13):
        found = sorted(glob.glob("/root/.pyenv/versions/3.%d.*/bin/python3.%d" % (minor, minor)))
        if found:
            yield found[-1]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    for py in pythons():
        p = subprocess.Popen([py, TARGET, "--idle", "46"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().startswith("ready")
        walls, reads = [], []
        try:
            for _ in range(n):
                t0 = time.monotonic()
                r = subprocess.run([LTRACE, "dump", "--json", "--pid", str(p.pid)], capture_output=True, check=True)
                walls.append((time.monotonic() - t0) * 1000)
                doc = json.loads(r.stdout)
                reads.append(doc["processes"][0]["read_ms"])
                nthreads = len(doc["processes"][0]["threads"])
        finally:
            p.communicate("quit\n", timeout=60)
        print("%-45s %d threads: command %.0f ms median (max %.0f), reading %.0f ms median (max %.0f), n=%d" %
              (py, nthreads, statistics.median(walls), max(walls), statistics.median(reads), max(reads), n))


main()
