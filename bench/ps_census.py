"""How long `ltrace-bpf ps` takes on a busy host, and what --all's /proc
polling costs while it waits.

Starts N plain CPython processes (default 200, ~8 MB each) and a few with
torch imported (default 3; those are the rows), then:
  * runs `ltrace-bpf ps` R times and prints min / median / max wall time;
  * runs `ltrace-bpf --all` for 1 s and for 1 + D s and prints their CPU
    time (user+sys): the first is the attach to the torch processes, the
    first census and the detach; the difference is the /proc poll every
    500 ms while nothing new appears.

    sudo .venv/bin/python bench/ps_census.py [--plain 200] [--torch 3] [--runs 7] [--all-seconds 10]
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LTRACE = os.path.join(ROOT, "build", "ltrace-bpf")
VENV_PY = os.path.join(ROOT, ".venv", "bin", "python")
IDLE = os.path.join(ROOT, "tests", "workloads", "idle_import.py")


def wait_ready(procs, timeout):
    deadline = time.time() + timeout
    for p in procs:
        line = ""
        while not line.startswith("READY"):
            if time.time() > deadline or p.poll() is not None:
                raise SystemExit(f"process {p.pid} did not become ready")
            line = p.stdout.readline()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plain", type=int, default=200)
    ap.add_argument("--torch", type=int, default=3)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--all-seconds", type=float, default=10)
    args = ap.parse_args()
    procs = []
    try:
        for _ in range(args.plain):
            procs.append(subprocess.Popen(["/usr/bin/python3.11", IDLE, "--import", ""], stdout=subprocess.PIPE,
                                          text=True))
        for _ in range(args.torch):
            procs.append(subprocess.Popen([VENV_PY, IDLE], stdout=subprocess.PIPE, text=True))
        wait_ready(procs, 600)
        walls, rows = [], 0
        for _ in range(args.runs):
            t0 = time.perf_counter()
            r = subprocess.run([LTRACE, "ps"], capture_output=True, text=True, check=True)
            walls.append(time.perf_counter() - t0)
            rows = len(r.stdout.splitlines()) - 1
        print(f"ps: {len(procs)} started processes ({args.plain} plain, {args.torch} torch), {rows} row(s); "
              f"wall min {min(walls) * 1000:.0f} ms, median {statistics.median(walls) * 1000:.0f} ms, "
              f"max {max(walls) * 1000:.0f} ms over {args.runs} runs")
        def all_cpu(seconds):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run([LTRACE, "--all", "--duration", str(seconds)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

        short, long = all_cpu(1), all_cpu(1 + args.all_seconds)
        polls = args.all_seconds / 0.5
        print(f"--all: {short * 1000:.0f} ms CPU for 1 s (attach, first census, detach), "
              f"{long * 1000:.0f} ms for {1 + args.all_seconds:.0f} s: "
              f"{(long - short) / polls * 1000:.1f} ms per 500 ms poll")
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
