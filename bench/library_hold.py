"""What holding a CPython at its library loads costs (issue 32,
docs/design-exec-hold.md: the op, allocator and c10d probes go in at the
dlopen that maps libtorch, before any op can run).

usage: .venv/bin/python bench/library_hold.py [--rounds 5] [--jobs 5] [--report ops]

A shell loop of --jobs `python -c "import torch; torch.ones(3)"` (the
bundled venv's torch), timed by the shell itself, alternating:
  * alone;
  * under `ltrace-bpf run --report REPORT` (each CPython held at its exec,
    then at each library load until the probes are in);
  * the same with LTRACE_BPF_NO_LIBRARY_HOLD=1 (released at its exec; the
    probes go in when a 250 ms poll finds the library: the race the hold
    replaces, which costs the job less and misses its first ops).
Prints medians side by side, the added time per job, and the holds' own
numbers from -v ("stopped at N library loads, X ms in all").

Then what the loader probe costs processes that are not held: once a
CPython has been held, the probe stays on the loader for every process on
the machine (a trap at each of its debugger calls, two per exec).  A loop
of --execs `/bin/true`, alone and under `run --report REPORT` after one
CPython, alternating.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LTRACE = os.path.join(ROOT, "build", "ltrace-bpf")
PY = os.path.join(ROOT, ".venv", "bin", "python")


def timed(n, report, hold):
    body = f'{PY} -c "import torch; torch.ones(3)"'
    script = f"t0=$(date +%s%N); for i in $(seq {n}); do {body}; done; t1=$(date +%s%N); echo LOOP_NS $((t1 - t0))"
    argv = ["bash", "-c", script]
    env = dict(os.environ)
    if report:
        argv = [LTRACE, "run", "-v", "--report", report, "--"] + argv
        if not hold:
            env["LTRACE_BPF_NO_LIBRARY_HOLD"] = "1"
    r = subprocess.run(argv, capture_output=True, text=True, env=env)
    m = re.search(r"LOOP_NS (\d+)", r.stdout)
    if not m:
        sys.exit(f"no loop time: rc {r.returncode}\n{r.stderr[-2000:]}")
    stops = [(int(a), float(b)) for a, b in
             re.findall(r"stopped at (\d+) library loads, ([0-9.]+) ms in all", r.stderr)]
    return int(m.group(1)) / 1e9, stops


def storm(n, report):
    loop = f"t0=$(date +%s%N); for i in $(seq {n}); do /bin/true; done; t1=$(date +%s%N); echo LOOP_NS $((t1 - t0))"
    script = f"{PY} -S -c pass; " + loop  # held first: the loader probe is in
    argv = ["bash", "-c", script]
    if report:
        argv = [LTRACE, "run", "--report", report, "--"] + argv
    r = subprocess.run(argv, capture_output=True, text=True)
    return int(re.search(r"LOOP_NS (\d+)", r.stdout).group(1)) / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=5)
    ap.add_argument("--report", default="ops")
    ap.add_argument("--execs", type=int, default=1000)
    a = ap.parse_args()
    times = {"alone": [], "hold": [], "no hold": []}
    stops = []
    for _ in range(a.rounds):
        times["alone"].append(timed(a.jobs, None, False)[0])
        t, s = timed(a.jobs, a.report, True)
        times["hold"].append(t)
        stops += s
        times["no hold"].append(timed(a.jobs, a.report, False)[0])
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{a.rounds} rounds of {a.jobs} x `import torch; torch.ones(3)`, --report {a.report}; medians")
    print("| loop | s | x alone | added per job |")
    print("|---|---:|---:|---:|")
    for k in ("alone", "hold", "no hold"):
        print(f"| {k} | {med[k]:.3f} | {med[k] / med['alone']:.3f} | "
              f"{(med[k] - med['alone']) / a.jobs * 1000:+.1f} ms |")
    if stops:
        loads = statistics.median(s[0] for s in stops)
        ms = sorted(s[1] for s in stops)
        print(f"holds at library loads: {len(stops)} jobs, median {loads:.0f} loads stopped; paused in all: "
              f"median {statistics.median(ms):.1f} ms, max {ms[-1]:.1f} ms")
    print()
    storm_table(a)


def storm_table(a):
    alone, under = [], []
    for _ in range(a.rounds):
        alone.append(storm(a.execs, None))
        under.append(storm(a.execs, a.report))
    ma, mu = statistics.median(alone), statistics.median(under)
    print(f"{a.rounds} rounds of {a.execs} x /bin/true; medians")
    print("| loop | s | ratio | added per exec |")
    print("|---|---:|---:|---:|")
    print(f"| alone | {ma:.3f} | 1.000 | |")
    print(f"| under run --report {a.report}, loader probe in | {mu:.3f} | {mu / ma:.3f} | "
          f"{(mu - ma) / a.execs * 1e6:+.1f} us |")


if __name__ == "__main__":
    main()
