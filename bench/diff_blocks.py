"""Does a batch-means (block) test fix `ltrace-bpf diff A B`'s A-vs-A false
positives with one run a side, keeping the power for a 2 % regression?

usage: .venv/bin/python bench/diff_blocks.py --dir DIR [--no-tool]

Reads DIR/a*.ltrace (plain: 0.02 s steps) and DIR/b*.ltrace (0.0204 s:
every step 2 % longer), recorded one at a time, alternating, as
  build/ltrace-bpf run -o DIR/aI.ltrace -- .venv/bin/python tests/workloads/watch_job.py \
      --wait-file / --steps 60 --step-s 0.02        (0.0204 for DIR/bI.ltrace)
(docs/benchmarks.md: 16 of each, twice). Per-train-step durations come from the HTML
dashboard (`ltrace-bpf report FILE --html OUT`): each train step's bar,
<g id="p<pid>-parts-train-<i>" data-ns="...">, the step as
reports/aggregate/steps.h splits it (fetch start to last batch hook's end),
the same StepRecords that diff's "train step" row tests (collect_diff_samples
-> ps.train). Checked against diff's own train step row (median per step).

Rules, over every A-vs-A pair of plain runs and every plain-vs-slower pair:
  current: Mann-Whitney U (normal approx., tie + continuity corrections),
      the train step row's adjusted p = 2p < 0.05 (it gets alpha/2), and the
      Hodges-Lehmann shift's 95 % CI wholly past 1 % of A's median step
      (re-implemented from reports/diff/rank_test.cpp and step_diff.cpp), and
      the tool itself: `ltrace-bpf diff A B`, the train step row's verdict;
  block-k-{median,mean}: each run's train steps in k consecutive blocks
      (numpy.array_split), each block's median or mean; Welch's t on the two
      sides' k values, two-sided, alpha 0.05, and the shift's 95 % Welch CI
      wholly past 1 % of A's median step.
"""
import argparse
import glob
import itertools
import json
import math
import os
import re
import statistics
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LTRACE = os.path.join(ROOT, "build", "ltrace-bpf")


# ---------- distributions (no scipy here) ----------
def _betacf(a, b, x):
    # Lentz's continued fraction for the regularized incomplete beta (Numerical Recipes 6.4)
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1, a - 1
    c, d = 1.0, 1 - qab * x / qap
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1 + aa * d
        d = 1 / (d if abs(d) > tiny else tiny)
        c = 1 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1 + aa * d
        d = 1 / (d if abs(d) > tiny else tiny)
        c = 1 + aa / c
        c = c if abs(c) > tiny else tiny
        de = d * c
        h *= de
        if abs(de - 1) < 1e-15:
            break
    return h


def betainc(a, b, x):
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1 - x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1 - math.exp(lbt) * _betacf(b, a, 1 - x) / b


def t_two_sided_p(t, df):
    return betainc(df / 2, 0.5, df / (df + t * t))


def t_quantile(q, df):
    # P(T <= x) = q, q > 0.5: bisection on the two-sided p
    target = 2 * (1 - q)
    lo, hi = 0.0, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_two_sided_p(mid, df) > target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def norm_upper(z):
    return 0.5 * math.erfc(z / math.sqrt(2))


def norm_quantile(p):
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if 1 - norm_upper(mid) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


Z975 = norm_quantile(0.975)


# ---------- the rules ----------
def current_rule(a, b, alpha=0.05, min_effect=0.01):
    """diff's train step row, one run a side (rank_test.cpp, step_diff.cpp)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    n, m = len(a), len(b)
    pooled = np.concatenate([a, b])
    order = np.argsort(pooled, kind="stable")
    s = pooled[order]
    ranks = np.empty(n + m)
    ties = 0.0
    i = 0
    while i < n + m:
        j = i
        while j < n + m and s[j] == s[i]:
            j += 1
        ranks[order[i:j]] = (i + 1 + j) / 2
        t = j - i
        ties += t ** 3 - t
        i = j
    N = n + m
    u = ranks[n:].sum() - m * (m + 1) / 2
    mean = n * m / 2
    var = n * m / 12 * ((N + 1) - ties / (N * (N - 1)))
    z = (abs(u - mean) - 0.5) / math.sqrt(var)
    p = min(1.0, 2 * norm_upper(max(0.0, z)))
    diffs = np.sort((b[None, :] - a[:, None]).ravel())
    k = n * m
    shift = diffs[k // 2] if k % 2 else (diffs[k // 2 - 1] + diffs[k // 2]) / 2
    c = math.floor(mean - Z975 * math.sqrt(n * m * (N + 1) / 12))
    lo_i = min(c - 1 if c >= 1 else 0, k - 1)
    hi_i = min(k - c if c >= 1 else k - 1, k - 1)
    lo, hi = diffs[lo_i], diffs[hi_i]
    floor = min_effect * float(np.median(a))
    padj = min(1.0, 2 * p)
    verdict = 0
    if padj < alpha:
        if lo >= floor:
            verdict = 1
        if hi <= -floor:
            verdict = -1
    return verdict, padj, shift, lo, hi


def blocks(x, k, how):
    f = np.median if how == "median" else np.mean
    return np.array([f(c) for c in np.array_split(np.asarray(x, float), k)])


def welch_rule(a, b, k, how, alpha=0.05, min_effect=0.01):
    ba, bb = blocks(a, k, how), blocks(b, k, how)
    va, vb = ba.var(ddof=1) / k, bb.var(ddof=1) / k
    se = math.sqrt(va + vb)
    shift = bb.mean() - ba.mean()
    df = (va + vb) ** 2 / (va ** 2 / (k - 1) + vb ** 2 / (k - 1))
    t = shift / se
    p = t_two_sided_p(t, df)
    half = t_quantile(1 - alpha / 2, df) * se
    floor = min_effect * float(np.median(a))
    verdict = 0
    if p < alpha:
        if shift - half >= floor:
            verdict = 1
        if shift + half <= -floor:
            verdict = -1
    return verdict, p


# ---------- data ----------
BAR = re.compile(r'<g class="bar" id="p(\d+)-parts-train-(\d+)" data-i="(\d+)" data-ns="(\d+)"')


def step_durations(path, cache_dir):
    cache = os.path.join(cache_dir, os.path.basename(path) + ".steps.json")
    if os.path.exists(cache) and os.path.getmtime(cache) > os.path.getmtime(path):
        return json.load(open(cache))
    html = os.path.join(cache_dir, os.path.basename(path) + ".html")
    subprocess.run(["nice", "-n", "10", LTRACE, "report", path, "--html", html], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    text = open(html).read()
    assert 'class="chart steptime"' in text and 'data-stage="train" data-steps="' in text
    m = re.search(r'class="chart steptime" [^>]*data-stage="train" data-steps="(\d+)" data-bucket="(\d+)"', text)
    assert m and m.group(2) == "1", f"{path}: train steps folded into buckets"
    bars = sorted((int(i), int(ns)) for pid, i, _, ns in BAR.findall(text))
    assert [i for i, _ in bars] == list(range(int(m.group(1)))), path
    d = [ns / 1e9 for _, ns in bars]
    json.dump(d, open(cache, "w"))
    return d


def tool_verdict(a, b):
    out = subprocess.run(["nice", "-n", "10", LTRACE, "diff", a, b], capture_output=True, text=True).stdout
    for line in out.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) >= 8 and cells[0] in ("slower", "faster", "~") and cells[1] == "train step":
            return {"slower": 1, "faster": -1, "~": 0}[cells[0]], cells, out
    raise RuntimeError(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--no-tool", action="store_true", help="skip the real `ltrace-bpf diff` runs")
    args = ap.parse_args()
    cache_dir = os.path.join(args.dir, "steps")
    os.makedirs(cache_dir, exist_ok=True)
    key = lambda p: int(re.search(r"(\d+)\.ltrace$", p).group(1))
    plain = sorted(glob.glob(os.path.join(args.dir, "a*.ltrace")), key=key)
    slow = sorted(glob.glob(os.path.join(args.dir, "b*.ltrace")), key=key)
    S = {p: step_durations(p, cache_dir) for p in plain + slow}
    print(f"{len(plain)} plain runs, {len(slow)} slower runs; steps per run: "
          f"{sorted(set(len(v) for v in S.values()))}")
    for p in plain + slow:
        v = np.array(S[p])
        print(f"  {os.path.basename(p):10s} median {1e3 * np.median(v):.3f} ms  mean {1e3 * v.mean():.3f} ms  "
              f"first {1e3 * v[0]:.2f} ms")

    # check against diff on one pair: the train step row's median per step
    if not args.no_tool:
        _, cells, out = tool_verdict(plain[0], plain[1])
        print("\nCheck on", os.path.basename(plain[0]), "vs", os.path.basename(plain[1]), "- diff's train step row:")
        hdr = [l for l in out.splitlines() if "verdict" in l.lower() or "median" in l.lower()][:2]
        for l in hdr:
            print("   ", l)
        print("   ", "  ".join(cells))
        print(f"    extracted: A median {1e3 * np.median(S[plain[0]]):.3f} ms, B median "
              f"{1e3 * np.median(S[plain[1]]):.3f} ms, A mean {1e3 * np.mean(S[plain[0]]):.3f} ms, B mean "
              f"{1e3 * np.mean(S[plain[1]]):.3f} ms, steps {len(S[plain[0]])}/{len(S[plain[1]])}; python "
              f"re-implementation: verdict/adj p/HL shift % = {current_rule(S[plain[0]], S[plain[1]])}")

    aa_pairs = list(itertools.combinations(plain, 2))
    ab_pairs = list(itertools.product(plain, slow))
    rules = [("current (Python re-impl.)", lambda a, b: current_rule(a, b)[0])]
    for how in ("median", "mean"):
        for k in (4, 5, 8):
            rules.append((f"block Welch k={k}, block {how}s", lambda a, b, k=k, how=how: welch_rule(a, b, k, how)[0]))
    results = []
    if not args.no_tool:
        tv = {}
        for a, b in aa_pairs + ab_pairs:
            tv[(a, b)] = tool_verdict(a, b)[0]
        agree = sum(tv[pr] == current_rule(S[pr[0]], S[pr[1]])[0] for pr in tv)
        print(f"\ntool verdict == Python re-implementation in {agree} of {len(tv)} pairs")
        results.append(("current: `ltrace-bpf diff A B` (tool)",
                        sum(tv[pr] != 0 for pr in aa_pairs), sum(tv[pr] == 1 for pr in ab_pairs)))
    for name, f in rules:
        results.append((name, sum(f(S[a], S[b]) != 0 for a, b in aa_pairs),
                        sum(f(S[a], S[b]) == 1 for a, b in ab_pairs)))
    print(f"\n{'rule':42s} {'A-vs-A flagged':>18s} {'A-vs-B found slower':>22s}")
    for name, x, y in results:
        print(f"{name:42s} {f'{x} of {len(aa_pairs)}':>12s} {100 * x / len(aa_pairs):4.0f}% "
              f"{f'{y} of {len(ab_pairs)}':>15s} {100 * y / len(ab_pairs):4.0f}%")

    # drift between runs
    med = {p: float(np.median(S[p])) for p in plain + slow}
    aa_change = sorted(100 * (med[b] / med[a] - 1) for a, b in aa_pairs)
    ab_change = sorted(100 * (med[b] / med[a] - 1) for a, b in ab_pairs)
    print(f"\nA-vs-A median step change %: range {aa_change[0]:+.2f} .. {aa_change[-1]:+.2f}, "
          f"|change| median {statistics.median(abs(x) for x in aa_change):.2f}")
    print(f"A-vs-B median step change %: range {ab_change[0]:+.2f} .. {ab_change[-1]:+.2f}, "
          f"median {statistics.median(ab_change):+.2f}")

    # within-run spread of blocks vs between-run spread
    print("\nWithin vs between (plain runs; % of the grand median step):")
    for side, runs in (("plain", plain), ("slower", slow)):
        g = np.median(np.concatenate([S[p] for p in runs]))
        run_meds = np.array([np.median(S[p]) for p in runs])
        run_means = np.array([np.mean(S[p]) for p in runs])
        print(f"  {side}: SD of run medians between runs {100 * run_meds.std(ddof=1) / g:.2f}%, "
              f"of run means {100 * run_means.std(ddof=1) / g:.2f}%")
        for how in ("median", "mean"):
            for k in (4, 5, 8):
                B = np.array([blocks(S[p], k, how) for p in runs])
                within = math.sqrt(np.mean(B.var(axis=1, ddof=1)))   # pooled SD of blocks within a run
                between = B.mean(axis=1).std(ddof=1)                 # SD between runs of the run's block average
                implied = within / math.sqrt(k)                      # what Welch assumes that SD is
                comp = max(0.0, between ** 2 - within ** 2 / k)      # one-way ANOVA: the run component
                print(f"    k={k} block {how}s: within-run SD of blocks {100 * within / g:.2f}%; "
                      f"SD of run's block average: between runs {100 * between / g:.2f}% vs within/sqrt(k) "
                      f"{100 * implied / g:.2f}% (ratio {between / implied:.2f}); run component SD "
                      f"{100 * math.sqrt(comp) / g:.2f}%")


if __name__ == "__main__":
    main()
