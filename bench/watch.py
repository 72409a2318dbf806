"""What `ltrace-bpf watch` costs a job and keeps on disk (issue 33,
docs/design-watch.md).

usage: .venv/bin/python bench/watch.py [--rounds 3] [--steps 600] [--step-s 0.1]

A Lightning fit of --steps steps of about --step-s seconds each
(tests/workloads/watch_job.py, steady: a sleep plus a small model), run
alternately alone and under `ltrace-bpf watch --pid` (the cheap tier:
actions, 19 Hz stacks, collectives, /proc samples). Per round: the median
step time in the job (start to next start, measured by the job itself),
the flight recorder's bytes (segments + names) for the time it covered,
and the watcher's resident memory sampled every second (first and last
thirds of the run compared: flat or growing). Prints medians over the
rounds; the bytes per 10 minutes are the measured bytes per second times
600 (an extrapolation, labelled so).
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LTRACE = os.path.join(ROOT, "build", "ltrace-bpf")
PY = os.path.join(ROOT, ".venv", "bin", "python")
JOB = os.path.join(ROOT, "tests", "workloads", "watch_job.py")


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def one(args, watched, tmp):
    go = os.path.join(tmp, "go")
    times = os.path.join(tmp, "times")
    wdir = os.path.join(tmp, "w")
    for p in (go, times):
        if os.path.exists(p):
            os.remove(p)
    shutil.rmtree(wdir, ignore_errors=True)
    job = subprocess.Popen([PY, JOB, "--wait-file", go, "--steps", str(args.steps), "--step-s", str(args.step_s),
                            "--times", times], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in job.stdout:  # Lightning's warnings may come first
        if line.strip() == "READY":
            break
    # The rest (its own output) is drained by a thread so the job never blocks on a full pipe.
    threading.Thread(target=job.stdout.read, daemon=True).start()
    lt, rss, err = None, [], ""
    if watched:
        lt = subprocess.Popen([LTRACE, "watch", "--pid", str(job.pid), "-v", "--dir", wdir, "--triggers", "none"],
                              stderr=subprocess.PIPE, text=True)
        while True:
            line = lt.stderr.readline()
            err += line
            if "attached" in line or not line:
                break
    open(go, "w").close()
    t0 = time.time()
    while job.poll() is None:
        if lt:
            r = rss_kib(lt.pid)
            if r:
                rss.append(r)
        time.sleep(1)
    wall = time.time() - t0
    if lt:
        err += lt.stderr.read()
        lt.wait()
    steps = [float(x) for x in open(times).read().split()]
    out = {"median_step_s": statistics.median(steps), "wall_s": wall}
    if watched:
        m = re.search(r"the ring holds (\d+) bytes", err)
        names = os.path.getsize(os.path.join(wdir, "ring", "names.ltrace"))
        out["ring_bytes"] = int(m.group(1)) if m else None
        out["names_bytes"] = names
        third = max(1, len(rss) // 3)
        out["rss_first_kib"] = statistics.median(rss[:third])
        out["rss_last_kib"] = statistics.median(rss[-third:])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--step-s", type=float, default=0.1)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-watch-")
    alone, under = [], []
    try:
        for r in range(args.rounds):
            alone.append(one(args, False, tmp))
            under.append(one(args, True, tmp))
            print(f"round {r}: alone {alone[-1]['median_step_s'] * 1e3:.2f} ms/step, watched "
                  f"{under[-1]['median_step_s'] * 1e3:.2f} ms/step, ring {under[-1]['ring_bytes']} B + names "
                  f"{under[-1]['names_bytes']} B over {under[-1]['wall_s']:.0f} s, watcher RSS "
                  f"{under[-1]['rss_first_kib']} -> {under[-1]['rss_last_kib']} KiB", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    a = statistics.median(x["median_step_s"] for x in alone)
    w = statistics.median(x["median_step_s"] for x in under)
    per_s = statistics.median((x["ring_bytes"] + x["names_bytes"]) / x["wall_s"] for x in under)
    print(f"median step: alone {a * 1e3:.2f} ms, watched {w * 1e3:.2f} ms ({w / a:.4f}x)")
    print(f"flight recorder: {per_s / 1024:.1f} KiB/s measured -> {per_s * 600 / 2**20:.1f} MiB per 10 minutes "
          f"(extrapolated from {statistics.median(x['wall_s'] for x in under):.0f} s)")
    print(f"watcher RSS (median of the first and last thirds): "
          f"{statistics.median(x['rss_first_kib'] for x in under)} -> "
          f"{statistics.median(x['rss_last_kib'] for x in under)} KiB")


if __name__ == "__main__":
    sys.exit(main())
