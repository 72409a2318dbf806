"""Does a tracer's own CPU time cost a multi-threaded job more than its share?

A question from watch's step-time cost (docs/benchmarks.md, "watch's
step-time cost, 150 in-run pairs"): ~0.3 % of the step was not accounted
for by the probes, and the watcher takes 0.27 % of a core.  If every
millisecond a tracer takes on a core stalled a whole parallel region of
the job (its other thread waiting at the barrier), a job using both cores
would lose up to twice the tracer's share of one core.

One run, in turns: a torch job on every core (2 threads: parallel matmuls
and a little Python per step, each step's time written down), alone, then
beside a "waker" that wakes HZ times a second and burns BURN_US of CPU
each time (a drain loop's pattern, made big enough to measure), under a
scheduling policy (nice -10 as ltrace-bpf's drain thread, nice 0,
SCHED_BATCH, SCHED_IDLE), and alone again.  Each waker window's mean
step (not the median: the bursts land in a minority of the steps) is paired with the mean of the alone windows either side; the
paired differences give the cost with a 95 % interval (2 standard
errors), and `ratio` = step-time cost / the waker's share of one core.
Ratio ~1 per core the job spans means amplification; ~0 means the job
absorbs the waker's CPU (its cores were not all on its critical path).

usage: .venv/bin/python bench/waker_cost.py [--hz 20] [--burn-us 1000] [--window-s 4] [--rounds 6]
"""
import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inrun_ab import cpu_ns  # noqa: E402  (every thread's CPU time, /proc schedstat)

POLICIES = ["nice-10", "nice0", "batch", "idle"]


def job(path):
    import torch
    torch.set_num_threads(os.cpu_count() or 2)
    a, b = torch.randn(384, 384), torch.randn(384, 384)
    with open(path, "w", buffering=1) as out:
        while True:
            t = time.perf_counter()
            for _ in range(20):
                a @ b
                sum(range(300))
            out.write(f"{time.monotonic():.6f} {time.perf_counter() - t:.6f}\n")


def waker(hz, burn_us, policy):
    if policy == "nice-10":
        os.setpriority(os.PRIO_PROCESS, 0, -10)
    elif policy == "batch":
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    elif policy == "idle":
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    period, burn = 1.0 / hz, burn_us / 1e6
    nxt = time.monotonic()
    while True:
        nxt += period
        time.sleep(max(0.0, nxt - time.monotonic()))
        end = time.monotonic() + burn
        while time.monotonic() < end:
            pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hz", type=int, default=20)
    ap.add_argument("--burn-us", type=int, default=1000)
    ap.add_argument("--window-s", type=float, default=4.0)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--role", help=argparse.SUPPRESS)
    ap.add_argument("--arg", action="append", default=[], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.role == "job":
        return job(a.arg[0])
    if a.role == "waker":
        return waker(a.hz, a.burn_us, a.arg[0])
    policies = a.policies.split(",")
    steps_path = os.path.join(tempfile.mkdtemp(prefix="waker-cost-"), "steps.txt")
    me = [sys.executable, os.path.abspath(__file__)]
    j = subprocess.Popen(me + ["--role", "job", "--arg", steps_path])
    while not os.path.exists(steps_path) or os.path.getsize(steps_path) < 1000:  # torch imported, steps running
        assert j.poll() is None, "the job ended"
        time.sleep(0.2)
    windows = []  # (policy, t0, t1, waker CPU s)

    def window(policy):
        w = None
        if policy != "off":
            w = subprocess.Popen(me + ["--role", "waker", "--hz", str(a.hz), "--burn-us", str(a.burn_us),
                                       "--arg", policy])
            time.sleep(0.3)  # its interpreter starts outside the window
        t0 = time.monotonic()
        c0 = cpu_ns(w.pid) / 1e9 if w else 0.0
        time.sleep(a.window_s)
        t1 = time.monotonic()
        cpu = cpu_ns(w.pid) / 1e9 - c0 if w else 0.0
        if w:
            w.kill()
            w.wait()
        windows.append((policy, t0, t1, cpu))

    try:
        window("off")
        for _ in range(a.rounds):
            for p in policies:
                window(p)
                window("off")
    finally:
        j.kill()
        j.wait()
    steps = []
    with open(steps_path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2:
                steps.append((float(parts[0]), float(parts[1])))
    meds = []
    for policy, t0, t1, cpu in windows:
        inside = [d for end, d in steps if end - d >= t0 and end <= t1]
        # the mean, not the median: a waker's bursts land in a minority of the
        # steps, which a median would hide
        meds.append((policy, statistics.mean(inside), len(inside), cpu / (t1 - t0)))
    print(f"{os.cpu_count()} CPUs; job: {os.cpu_count()} torch threads, step "
          f"{statistics.median(m[1] for m in meds if m[0] == 'off') * 1e3:.2f} ms (mean of a window, median of windows); waker {a.hz} Hz x {a.burn_us} us;"
          f" {a.rounds} rounds of {a.window_s:g} s windows")
    print("| waker policy | pairs | step-time cost (mean, 95 % CI) | waker CPU (one core) | ratio |")
    print("|---|---|---|---|---|")
    for p in policies:
        rel, share = [], []
        for i, (q, med, _, sh) in enumerate(meds):
            if q == p:
                base = (meds[i - 1][1] + meds[i + 1][1]) / 2
                rel.append((med - base) / base * 100)
                share.append(sh * 100)
        mean = statistics.mean(rel)
        ci = 2 * statistics.stdev(rel) / math.sqrt(len(rel)) if len(rel) > 1 else float("nan")
        s = statistics.mean(share)
        print(f"| {p} | {len(rel)} | {mean:+.2f} % ± {ci:.2f} % | {s:.2f} % | {mean / s:+.2f} |")


if __name__ == "__main__":
    main()
