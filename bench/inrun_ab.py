"""In-run A/B: ltrace-bpf attached and detached in turn on ONE running job,
so that a 1 % difference is not lost in the spread between runs (separate
runs of the same fit vary from 13 to 18 steps/s on this machine).

usage: .venv/bin/python bench/inrun_ab.py [--interp debian-3.11-exe] [--size large]
           [--mode attach|watch] [--blocks 10] [--window-s 6] [--settle-s 0] [--bpf-stats] [--markdown FILE]
(also: bench/overhead.py --in-run ...)

One Lightning CPU fit (tests/workloads/train_lightning.py --step-times,
epochs until the bench says stop) runs for the whole bench. The bench alternates windows: detached for
--window-s, then `ltrace-bpf --pid` (or `watch --pid`) attached for
--window-s (counted from its "attached" line, or --settle-s later: what the
attach's first seconds cost then lies in neither window) and stopped with SIGINT
(counted until it exited), --blocks times, starting detached. The job
records each train batch's end; a step belongs to a window when it began
and ended inside it. Per window: the median step time. Each attached
window is paired with the mean of the detached windows either side (drift
cancels), and the paired relative differences give the overhead: their
mean with a 95 % confidence interval (Student's t over the pairs). The
tracer's own CPU while attached (every thread, /proc schedstat) is given
as a share of one core.

--bpf-stats: also where the attached windows' in-kernel time went, per BPF
program of ours (the kernel's counters, kernel.bpf_stats_enabled on for the
bench): its runs per train step and ns per run, so the probes' share of
the step can be told from the tracer's own wake-ups. A uprobe hit also
costs its trap, which the counters do not hold (machine-facts: ~0.8 us on
an emulated first instruction here); the table adds that as an estimate.
"""
import json
import argparse
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead import INTERPRETERS, ROOT, TRAIN  # noqa: E402  (the same interpreters as the separate runs)

LTRACE = os.environ.get("LTRACE_BPF_EXE", os.path.join(ROOT, "build", "ltrace-bpf"))
SIZES = {
    "small": ["--hidden", "32", "--depth", "1", "--batch-size", "8", "--batches", "600"],
    "large": ["--hidden", "1024", "--depth", "4", "--batch-size", "128", "--batches", "60"],
}
# Student's t, two-sided 95 %, by degrees of freedom (1..30).
T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
       2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def cpu_ns(pid):
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
    except OSError:
        pass
    return total


def bpf_counters():
    """{program name: (runs, ns)} of our programs (lt_*) now."""
    out = {}
    try:
        progs = json.loads(subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True,
                                          check=True).stdout)
    except (OSError, subprocess.CalledProcessError, ValueError):
        return out
    for p in progs:
        name = p.get("name", "")
        if not name.startswith("lt_"):
            continue
        runs, ns = out.get(name, (0, 0))
        out[name] = (runs + p.get("run_cnt", 0), ns + p.get("run_time_ns", 0))
    return out


def mean_ci(xs):
    m = statistics.mean(xs)
    if len(xs) < 2:
        return m, float("nan")
    half = T95[min(len(xs) - 1, 30) - 1] * statistics.stdev(xs) / math.sqrt(len(xs))
    return m, half


def wait_line(path, text, proc, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if text in open(path, errors="replace").read():
            return
        if proc.poll() is not None:
            raise RuntimeError(f"exited before {text!r}: " + open(path, errors="replace").read()[-2000:])
        time.sleep(0.005)
    raise RuntimeError(f"no {text!r} in {timeout} s")


def run(args):
    cmd, env = INTERPRETERS[args.interp]
    env = dict(os.environ, **env)
    tmp = tempfile.mkdtemp(prefix="bench-ab-")
    go, stop, times, log = (os.path.join(tmp, n) for n in ("go", "stop", "times", "job.log"))
    job = subprocess.Popen(cmd + [TRAIN, "--epochs", "100000", "--loops", "1", "--until-file", stop, "--wait-file", go,
                                  "--step-times", times] + SIZES[args.size],
                           stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env)
    wait_line(log, "READY", job)
    open(go, "w").close()
    time.sleep(args.window_s)  # the first fit's warm-up, not measured
    windows = []  # (attached?, start, end)
    tracer_cpu, tracer_wall = 0, 0.0
    bpf = {}  # --bpf-stats: program -> (runs, ns) over the attached windows
    if args.bpf_stats:
        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    try:
        for b in range(args.blocks):
            t0 = time.perf_counter()
            time.sleep(args.window_s)
            windows.append((False, t0, time.perf_counter()))
            err = os.path.join(tmp, f"lt{b}.err")
            lt_cmd = [LTRACE] + (["watch", "--dir", os.path.join(tmp, f"w{b}"), "--triggers", "none"]
                                 if args.mode == "watch" else []) + ["--pid", str(job.pid), "-v"]
            lt = subprocess.Popen(lt_cmd, stdout=subprocess.DEVNULL, stderr=open(err, "w"))
            wait_line(err, "attached", lt)
            time.sleep(args.settle_s)  # --settle-s: the attach's first seconds in neither window
            t0, c0 = time.perf_counter(), cpu_ns(lt.pid)
            b0 = bpf_counters() if args.bpf_stats else {}
            time.sleep(args.window_s)
            c1 = cpu_ns(lt.pid)
            if args.bpf_stats:
                for name, (runs, ns) in bpf_counters().items():
                    r0, n0 = b0.get(name, (0, 0))
                    r, n = bpf.get(name, (0, 0))
                    bpf[name] = (r + max(0, runs - r0), n + max(0, ns - n0))
            lt.send_signal(signal.SIGINT)
            lt.wait()
            t1 = time.perf_counter()
            windows.append((True, t0, t1))
            tracer_cpu += c1 - c0
            tracer_wall += t1 - t0
        t0 = time.perf_counter()
        time.sleep(args.window_s)
        windows.append((False, t0, time.perf_counter()))
    finally:
        if args.bpf_stats:
            subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=0"], check=False)
        open(stop, "w").close()
        try:
            job.wait(timeout=600)
        except subprocess.TimeoutExpired:
            job.kill()
    ends = sorted(float(x) for x in open(times).read().split())
    steps = [(a, b) for a, b in zip(ends, ends[1:])]
    medians = []
    for attached, w0, w1 in windows:
        inside = [b - a for a, b in steps if a >= w0 and b <= w1]
        medians.append((attached, statistics.median(inside) if inside else None, len(inside)))
    pairs = []
    for i, (attached, med, n) in enumerate(medians):
        if not attached or med is None:
            continue
        around = [medians[j][1] for j in (i - 1, i + 1) if 0 <= j < len(medians) and medians[j][1] is not None]
        if around:
            pairs.append(med / statistics.mean(around) - 1)
    m, half = mean_ci(pairs)
    n_on = sum(n for a, _, n in medians if a)
    n_off = sum(n for a, _, n in medians if not a)
    med_on = statistics.median([x for a, x, _ in medians if a and x])
    med_off = statistics.median([x for a, x, _ in medians if not a and x])
    line = (f"| {args.interp} | {args.size} | {args.mode} | {len(pairs)} | {n_off} / {n_on} | "
            f"{med_off * 1e3:.2f} / {med_on * 1e3:.2f} | {100 * m:+.2f} % ± {100 * half:.2f} % | "
            f"{100 * tracer_cpu / 1e9 / tracer_wall:.2f} % |")
    if bpf and n_on:
        rows = ["", "| BPF program | runs per step | ns per run | us per step (in BPF) | + traps, est. "
                "(0.8 us a uprobe hit) | of the median step |", "|---|---|---|---|---|---|"]
        for name, (runs, ns) in sorted(bpf.items(), key=lambda kv: -kv[1][1]):
            if not runs:
                continue
            per_step = runs / n_on
            us = ns / 1e3 / n_on
            # Perf events and tracepoints take no uprobe trap.
            trap = 0.0 if name in ("lt_sample", "lt_switch", "lt_on_fork", "lt_on_exec", "lt_on_exit") else 0.8 * per_step
            rows.append(f"| {name} | {per_step:.1f} | {ns / runs:.0f} | {us:.1f} | {us + trap:.1f} | "
                        f"{100 * (us + trap) / 1e3 / (med_on * 1e3):.2f} % |")
        line += "\n".join(rows)
    return line, medians


HEADER = ["| interpreter | model | ltrace-bpf | pairs | steps detached / attached | median step ms "
          "(detached / attached) | step-time overhead (mean of pairs, 95 % CI) | tracer CPU (one core) |",
          "|---|---|---|---|---|---|---|---|"]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--interp", default="debian-3.11-exe", choices=list(INTERPRETERS))
    ap.add_argument("--size", default="large", choices=list(SIZES))
    ap.add_argument("--mode", default="attach", choices=["attach", "watch"])
    ap.add_argument("--blocks", type=int, default=10)
    ap.add_argument("--window-s", type=float, default=6)
    ap.add_argument("--settle-s", type=float, default=0,
                    help="attached windows (and the tracer's CPU) start this long after the attached line")
    ap.add_argument("--bpf-stats", action="store_true",
                    help="per BPF program of ours: runs per step and ns per run over the attached windows")
    ap.add_argument("--markdown")
    args = ap.parse_args(argv)
    line, medians = run(args)
    for attached, med, n in medians:
        print(f"  {'attached' if attached else 'detached'}: {n} steps, median "
              f"{med * 1e3 if med else float('nan'):.2f} ms")
    print("\n".join(HEADER + [line]))
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
