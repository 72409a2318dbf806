"""Offline reports from a large trace: time, peak RSS and bytes per event.

usage: .venv/bin/python bench/offline.py [--events 10000000] [--report LIST] [--against OLD_BINARY [--runs 5]]
       .venv/bin/python bench/offline.py --diff [--events 10000000] [--runs 3]
Builds bench/gen_trace (a synthetic Lightning-shaped trace), writes the
trace, then runs `ltrace-bpf report` on it (the Simple report of every
process, or --report LIST, e.g. simple,ops: the trace has op records too),
measuring wall time and the child's peak RSS.

--diff: `ltrace-bpf diff A B` of two such traces against one `report` of
A, alternating, --runs times each: medians of time and peak RSS, and the
ratio (issue 34's goal: diff <= 2x one report).

--against OLD_BINARY: the same trace reported by build/ltrace-bpf and by
OLD_BINARY (e.g. a clean clone's build of an earlier commit), alternating,
--runs times each: medians of time and peak RSS side by side, their ratio,
and whether both printed the same bytes.
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
    ap.add_argument("--against", help="an earlier ltrace-bpf binary to compare with, side by side")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--report", help="reports to print (report FILE --report LIST); default: what report FILE prints")
    ap.add_argument("--diff", action="store_true", help="time diff A B against report A")
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
        if args.against:
            return side_by_side(path, events, args.against, args.runs, args.report)
        if args.diff:
            other = os.path.join(tmp, "big2.ltrace")
            subprocess.run([gen, other, str(args.events)], check=True, capture_output=True)
            return diff_against_report(path, other, events, args.runs)
        t = time.perf_counter()
        r = subprocess.run([LTRACE, "report", path] + (["--report", args.report] if args.report else []),
                           capture_output=True, text=True)
        wall = time.perf_counter() - t
        rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        assert r.returncode == 0, r.stderr
        assert "run_training_batch" in r.stdout
    print(f"| events | file bytes | bytes/event | write s | report s | report peak RSS MB |")
    print(f"|---|---|---|---|---|---|")
    print(f"| {events} | {size} | {size / events:.2f} | {gen_s:.2f} | {wall:.2f} | {rss_mb:.0f} |")
    print("(peak RSS is the largest of the child processes: the generator and the report)")
    return 0


def one_report(binary, path, reports=None):
    """(wall s, peak RSS MB, stdout) of one `report` run, RSS from wait4."""
    t = time.perf_counter()
    p = subprocess.Popen([binary, "report", path] + (["--report", reports] if reports else []), stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    assert os.waitstatus_to_exitcode(status) == 0, binary
    return wall, usage.ru_maxrss / 1024, out


def timed(cmd):
    """(wall s, peak RSS MB) of one command, its output discarded."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, cmd
    return time.perf_counter() - t, usage.ru_maxrss / 1024


def diff_against_report(a, b, events, runs):
    rep, dif = [], []
    for _ in range(runs):
        rep.append(timed([LTRACE, "report", a]))
        dif.append(timed([LTRACE, "diff", a, b]))
    med = lambda v, i: sorted(x[i] for x in v)[len(v) // 2]
    print(f"{events} events a trace, {runs} runs each, alternating; medians")
    print("| command | s | peak RSS MB |")
    print("|---|---|---|")
    print(f"| report A | {med(rep, 0):.2f} | {med(rep, 1):.0f} |")
    print(f"| diff A B | {med(dif, 0):.2f} | {med(dif, 1):.0f} |")
    print(f"diff / report: time {med(dif, 0) / med(rep, 0):.2f}x (goal <= 2x), RSS {med(dif, 1) / med(rep, 1):.2f}x")
    return 0


def side_by_side(path, events, old, runs, reports=None):
    new_t, new_rss, old_t, old_rss = [], [], [], []
    same = True
    for _ in range(runs):
        w, r, out_new = one_report(LTRACE, path, reports)
        new_t.append(w), new_rss.append(r)
        w, r, out_old = one_report(old, path, reports)
        old_t.append(w), old_rss.append(r)
        same &= out_new == out_old
    med = lambda v: sorted(v)[len(v) // 2]
    print(f"{events} events, {runs} runs each, alternating; medians; reports: {reports or 'default'}")
    print("| binary | report s | peak RSS MB |")
    print("|---|---|---|")
    print(f"| {old} | {med(old_t):.2f} | {med(old_rss):.0f} |")
    print(f"| {LTRACE} | {med(new_t):.2f} | {med(new_rss):.0f} |")
    print(f"new / old: time {med(new_t) / med(old_t):.3f}, RSS {med(new_rss) / med(old_rss):.3f}; "
          f"same output: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
