"""What holding a CPython at its exec costs (issue 32, docs/design-exec-hold.md).

usage: .venv/bin/python bench/exec_hold.py [--rounds 5] [--execs 1000] [--pythons 50] [--ltrace BINARY]

Two shell loops, each timed by the shell itself (so ltrace-bpf's own start
is not counted), alternating with and without `ltrace-bpf run`:
  * storm:  --execs execs of /bin/true (not a CPython: never stopped, only
            looked at by the holder thread)
  * python: --pythons execs of `python3.11 -S -c pass` (each held until its
            probes are in)
and the storm again beside `ltrace-bpf --all` (which watches every exec on
the machine: each new executable is looked at once, then BPF remembers it
is no CPython). Prints medians side by side, the added time per exec, and
the holds' own durations from -v ("released after X ms held").
"""
import argparse
import os
import re
import statistics
import subprocess
import signal
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LTRACE = os.path.join(ROOT, "build", "ltrace-bpf")
PY = "/usr/bin/python3.11"


def loop(body, n):
    # The shell prints the loop's own duration in ns.
    return f"t0=$(date +%s%N); for i in $(seq {n}); do {body}; done; t1=$(date +%s%N); echo LOOP_NS $((t1 - t0))"


def timed(script, under):
    argv = ["bash", "-c", script]
    if under:
        argv = [under, "run", "-v", "--report", "simple", "--"] + argv
    r = subprocess.run(argv, capture_output=True, text=True)  # an older build may exit 16 on a job without Python
    ns = int(re.search(r"LOOP_NS (\d+)", r.stdout).group(1))
    held = [float(x) for x in re.findall(r"released after ([0-9.]+) ms held", r.stderr)]
    return ns / 1e9, held


def beside_all(script, ltrace):
    """The loop's time while `ltrace-bpf --all` runs."""
    with tempfile.TemporaryFile("w+") as err:
        lt = subprocess.Popen([ltrace, "--all", "-v", "--report", "simple"], stdout=subprocess.DEVNULL, stderr=err)
        try:
            for _ in range(600):
                err.seek(0)
                if "attached:" in err.read():
                    break
                time.sleep(0.1)
            return timed(script, None)[0]
        finally:
            lt.send_signal(signal.SIGINT)
            lt.wait(60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--execs", type=int, default=1000)
    ap.add_argument("--pythons", type=int, default=50)
    ap.add_argument("--ltrace", default=LTRACE, help="the ltrace-bpf to measure (an older build, to compare)")
    a = ap.parse_args()
    cases = {"storm": (loop("/bin/true", a.execs), a.execs), "python": (loop(f"{PY} -S -c pass", a.pythons), a.pythons)}
    for name, (script, n) in cases.items():
        plain, under, holds = [], [], []
        for _ in range(a.rounds):
            plain.append(timed(script, None)[0])
            s, h = timed(script, a.ltrace)
            under.append(s)
            holds += h
        p, u = statistics.median(plain), statistics.median(under)
        print(f"{name}: {n} execs, median of {a.rounds}: alone {p:.3f} s, under run {u:.3f} s, "
              f"ratio {u / p:.3f}, added per exec {(u - p) / n * 1e3:+.3f} ms")
        if holds:
            holds.sort()
            print(f"  holds: {len(holds)}, median {holds[len(holds) // 2]:.1f} ms, "
                  f"p90 {holds[int(0.9 * (len(holds) - 1))]:.1f} ms, max {holds[-1]:.1f} ms")
        else:
            print("  holds: none (nothing stopped)")
    script, n = cases["storm"]
    plain, beside = [], []
    for _ in range(a.rounds):
        plain.append(timed(script, None)[0])
        beside.append(beside_all(script, a.ltrace))
    p, b = statistics.median(plain), statistics.median(beside)
    print(f"storm beside --all: {n} execs, median of {a.rounds}: alone {p:.3f} s, beside {b:.3f} s, "
          f"ratio {b / p:.3f}, added per exec {(b - p) / n * 1e3:+.3f} ms")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
