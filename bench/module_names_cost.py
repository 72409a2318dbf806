"""Cost of --module-names ([pl][module] rows), side by side in one run:
the same real Lightning fit (tests/workloads/module_fit.py, its own timing
of trainer.fit: SECONDS) with
  base           nothing attached
  ops            ltrace-bpf --report ops attached
  ops+modules    ltrace-bpf --report ops --module-names attached (adds the
                 entry probe on CPython's eval loop and MODULE_CALL records)
  lightning      Lightning's own PyTorchProfiler(record_module_names=True)
                 (module_fit.py --reference; no ltrace-bpf)
one run each per round, the order rotated every round. Prints each
configuration's median fit time, its ratio to base, and the per-module-call
cost of --module-names: (median ops+modules - median ops) / module calls,
module calls counted from the MODULE_CALL records of one --dump.

usage: .venv/bin/python bench/module_names_cost.py [--rounds 3] [--batches 60]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LTRACE = os.path.join(ROOT, "build", "ltrace-bpf")
FIT = os.path.join(ROOT, "tests", "workloads", "module_fit.py")
PY = os.path.join(ROOT, ".venv", "bin", "python")


def wait_line(path, text, proc, timeout=600):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path) and text in open(path, errors="replace").read():
            return
        if proc.poll() is not None:
            raise RuntimeError(f"exited before {text!r}: {open(path, errors='replace').read()[-2000:]}")
        time.sleep(0.05)
    raise RuntimeError(f"no {text!r} in {timeout} s")


def one(config, batches, tmp, dump=None):
    go, out, err = os.path.join(tmp, "go"), os.path.join(tmp, "fit.out"), os.path.join(tmp, "lt.err")
    for p in (go, out, err):
        if os.path.exists(p):
            os.unlink(p)
    cmd = [PY, FIT, "--wait-file", go, "--batches", str(batches)]
    if config == "lightning":
        cmd += ["--reference", os.path.join(tmp, "ref.json")]
    with open(out, "w") as o:
        target = subprocess.Popen(cmd, stdout=o, stderr=subprocess.STDOUT, cwd=tmp)
    lt = None
    try:
        wait_line(out, "READY", target)
        if config in ("ops", "ops+modules"):
            args = [LTRACE, "--pid", str(target.pid), "-v", "--report", "ops"]
            if config == "ops+modules":
                args.append("--module-names")
            if dump:
                args += ["--dump", dump]
            with open(err, "w") as e:
                lt = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=e, cwd=tmp)
            wait_line(err, "attached", lt, 120)
        open(go, "w").close()
        if target.wait(900) != 0:
            raise RuntimeError(open(out).read()[-2000:])
        if lt and lt.wait(300) != 0:
            raise RuntimeError(open(err).read()[-2000:])
    finally:
        for p in (target, lt):
            if p and p.poll() is None:
                p.kill()
    return float(next(l for l in open(out) if l.startswith("SECONDS")).split()[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batches", type=int, default=60)
    a = ap.parse_args()
    configs = ["base", "ops", "ops+modules", "lightning"]
    times = {c: [] for c in configs}
    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "dump.txt")
        one("ops+modules", a.batches, tmp, dump=dump)  # counts the module calls (not timed)
        calls = sum(1 for l in open(dump, errors="replace") if " module_call " in l)
        for r in range(a.rounds):
            for c in configs[r % len(configs):] + configs[:r % len(configs)]:
                times[c].append(one(c, a.batches, tmp))
    base = statistics.median(times["base"])
    print(f"module_fit.py --batches {a.batches} (2 epochs), {a.rounds} rounds, load {os.getloadavg()[0]:.1f}")
    print(f"{'config':<14}{'median fit s':>14}{'x base':>9}   runs")
    for c in configs:
        m = statistics.median(times[c])
        print(f"{c:<14}{m:>14.3f}{m / base:>9.3f}   " + " ".join(f"{t:.3f}" for t in times[c]))
    extra = statistics.median(times["ops+modules"]) - statistics.median(times["ops"])
    print(f"module calls per fit: {calls}; --module-names adds {extra * 1e3:.1f} ms per fit, "
          f"{extra / max(calls, 1) * 1e6:.2f} us per module call (medians; includes the eval-loop probe's "
          f"hits on every other C-to-Python call)")


if __name__ == "__main__":
    sys.exit(main())
