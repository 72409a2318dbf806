"""Offline reports from a large trace: time, peak RSS and bytes per event.

usage: .venv/bin/python bench/offline.py [--events 10000000]
Builds bench/gen_trace (a synthetic Lightning-shaped trace), writes the
trace, then runs `ltrace-bpf report` on it (all reports: the Simple report of
every process), measuring wall time and the child's peak RSS.
"""
import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LTRACE = os.path.join(ROOT, "build", "ltrace-bpf")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=10_000_000)
    args = ap.parse_args()
    gen = os.path.join(ROOT, "build", "gen_trace")
    subprocess.run(["g++", "-std=c++20", "-O2", "-I", ROOT, "-I", os.path.join(ROOT, "bpf"),
                    os.path.join(ROOT, "bench", "gen_trace.cpp"), os.path.join(ROOT, "user/tracefile/trace_writer.cpp"),
                    os.path.join(ROOT, "user/core/output_file.cpp"), "-o", gen, "-lz", "-lzstd"], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "big.ltrace")
        t = time.perf_counter()
        out = subprocess.run([gen, path, str(args.events)], check=True, capture_output=True, text=True).stdout
        gen_s = time.perf_counter() - t
        events = int(out.split()[0])
        size = os.path.getsize(path)
        t = time.perf_counter()
        r = subprocess.run([LTRACE, "report", path], capture_output=True, text=True)
        wall = time.perf_counter() - t
        rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        assert r.returncode == 0, r.stderr
        assert "run_training_batch" in r.stdout
    print(f"| events | file bytes | bytes/event | write s | report s | report peak RSS MB |")
    print(f"|---|---|---|---|---|---|")
    print(f"| {events} | {size} | {size / events:.2f} | {gen_s:.2f} | {wall:.2f} | {rss_mb:.0f} |")
    print("(peak RSS is the largest of the child processes: the generator and the report)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
