"""How often `ltrace-bpf diff` cries wolf, and how often it finds a real
2 % regression (issue 34's goals), on real recordings.

usage: .venv/bin/python bench/diff_aa.py [--runs 8] [--steps 40] [--step-s 0.02] [--per-side 4] [--draws 20]

Records --runs fits of tests/workloads/watch_job.py (steps of --step-s
seconds) and as many with every step 2 % longer, alternating, each under
`ltrace-bpf run -o`. Then:
  * A against A: every pair of the plain runs; how many pairs get any row
    flagged, and how many flag the train step (the false positives);
  * A against B: each plain run against each slower one; how many find the
    train step `slower` (the power), and the median share of the measured
    change the top five rows after the step explain;
  * over runs (`diff A1 .. Ak --vs B1 .. Bk`, k = --per-side): --draws
    random disjoint splits of the plain runs into two sides (A vs A), and
    --draws random k-subsets of the plain against k-subsets of the slower
    (A vs B); and each plain run left out against the other plain runs
    (one new run against a baseline of runs), and each slower run against
    every plain run. The draws share runs, so their counts are not
    independent repeats: a guide, not a rate's confidence interval.
"""
import random
import argparse
import itertools
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LTRACE = os.path.join(ROOT, "build", "ltrace-bpf")
PY = os.path.join(ROOT, ".venv", "bin", "python")
JOB = os.path.join(ROOT, "tests", "workloads", "watch_job.py")


def record(path, steps, step_s):
    r = subprocess.run([LTRACE, "run", "-o", path, "--", PY, JOB, "--wait-file", "/", "--steps", str(steps),
                        "--step-s", str(step_s)], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(r.stderr)


def rows(a, b):
    a, b = ([a], [b]) if isinstance(a, str) else (a, b)
    out = subprocess.run([LTRACE, "diff", *a, "--vs", *b], capture_output=True, text=True).stdout
    table = []
    for line in out.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) >= 8 and cells[0] in ("slower", "faster", "~"):
            table.append(cells)
    return table


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--step-s", type=float, default=0.02)
    ap.add_argument("--per-side", type=int, default=4)
    ap.add_argument("--draws", type=int, default=20)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-diff-")
    try:
        plain, slow = [], []
        for i in range(args.runs):
            plain.append(os.path.join(tmp, f"a{i}.ltrace"))
            record(plain[-1], args.steps, args.step_s)
            slow.append(os.path.join(tmp, f"b{i}.ltrace"))
            record(slow[-1], args.steps, args.step_s * 1.02)
        any_flag = step_flag = 0
        pairs = list(itertools.combinations(plain, 2))
        aa_shifts = []
        for a, b in pairs:
            t = rows(a, b)
            any_flag += any(c[0] != "~" for c in t)
            step_flag += t[0][0] != "~"
            aa_shifts.append(float(t[0][6].rstrip("%")))
        aa_shifts.sort(key=abs)
        print("A vs A: the train step's change per step, % of A's step, by size: "
              + " ".join(f"{x:+.2f}" for x in aa_shifts))
        found, explained = 0, []
        for a, b in itertools.product(plain, slow):
            t = rows(a, b)
            found += t[0][0] == "slower"
            step_change = float(t[0][4])
            top = sum(float(c[4]) for c in t[1:6] if c[1].startswith("part: "))
            if step_change > 0:
                explained.append(min(1.0, top / step_change))
        print(f"A vs A: {len(pairs)} pairs of {args.runs} runs ({args.steps} steps of {args.step_s * 1e3:.0f} ms): "
              f"train step flagged in {step_flag} ({100 * step_flag / len(pairs):.1f} %), any row in {any_flag}")
        n = args.runs * args.runs
        print(f"A vs B (every step +2 %): train step found slower in {found} of {n} pairs ({100 * found / n:.1f} %)")
        if explained:
            print(f"share of the step's change in the step parts among the top 5 rows: median "
                  f"{100 * statistics.median(explained):.0f} %")
        k, rng = args.per_side, random.Random(1)
        if 2 * k <= args.runs:
            aa = ab = 0
            for _ in range(args.draws):
                pick = rng.sample(plain, 2 * k)
                aa += rows(pick[:k], pick[k:])[0][0] != "~"
                ab += rows(rng.sample(plain, k), rng.sample(slow, k))[0][0] == "slower"
            print(f"over runs, {k} a side: A vs A train step flagged in {aa} of {args.draws} draws; "
                  f"A vs B found slower in {ab} of {args.draws}")
        loo = sum(rows(plain[:i] + plain[i + 1:], [plain[i]])[0][0] != "~" for i in range(args.runs))
        new = sum(rows(plain, [b])[0][0] == "slower" for b in slow)
        print(f"one run against the other {args.runs - 1} plain runs: flagged {loo} of {args.runs}; "
              f"each slower run against all {args.runs} plain: found slower in {new} of {args.runs}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
