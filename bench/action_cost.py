"""Cost per Lightning action, in one run: a tight loop of
`with profiler.profile(name): pass` on Lightning's real PassThroughProfiler
(nothing attached / ltrace-bpf attached) and on its real SimpleProfiler.
The per-action difference is what each profiler adds to every hook call.

usage: .venv/bin/python bench/action_cost.py [--n 200000]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import lightning_site  # noqa: E402

LTRACE = os.path.join(ROOT, "build", "ltrace-bpf")
LOOP = r"""
import os, sys, time
from pytorch_lightning.profilers.base import PassThroughProfiler
from pytorch_lightning.profilers.simple import SimpleProfiler
p = SimpleProfiler() if sys.argv[1] == "simple" else PassThroughProfiler()
n = int(sys.argv[2])
print("READY", flush=True)
while not os.path.exists(sys.argv[3]):
    time.sleep(0.01)
for _ in range(1000):
    with p.profile("warm"):
        pass
t = time.perf_counter()
for _ in range(n):
    with p.profile("[LightningModule]Model.on_train_batch_start"):
        pass
print("NS_PER_ACTION", (time.perf_counter() - t) / n * 1e9, flush=True)
"""

PYTHONS = {
    "pyenv-3.11-lib": "/root/.pyenv/versions/3.11.7/bin/python3.11",
    "debian-3.11-exe": "/usr/bin/python3.11",
    "pyenv-3.12-lib": "/root/.pyenv/versions/3.12.1/bin/python3.12",
}


def one(python, site, mode, n):
    with tempfile.TemporaryDirectory() as tmp:
        go = os.path.join(tmp, "go")
        p = subprocess.Popen([python, "-c", LOOP, "simple" if mode == "simple" else "pass", str(n), go],
                             stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=site))
        assert p.stdout.readline().startswith("READY")
        lt = None
        if mode == "ltrace":
            lt = subprocess.Popen([LTRACE, "--pid", str(p.pid), "-v"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
            while "attached" not in lt.stderr.readline():
                pass
        open(go, "w").close()
        out = p.stdout.read()
        p.wait()
        if lt:
            lt.wait()
        return float(out.split("NS_PER_ACTION")[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200000)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        site = lightning_site.build(tmp, "2.6.6")
        print("| interpreter | none ns/action | SimpleProfiler adds | ltrace-bpf adds | ltrace / Simple |")
        print("|---|---|---|---|---|")
        for name, py in PYTHONS.items():
            res = {m: [] for m in ("none", "simple", "ltrace")}
            for _ in range(args.reps):
                for m in res:
                    res[m].append(one(py, site, m, args.n))
            med = {m: statistics.median(v) for m, v in res.items()}
            s, l = med["simple"] - med["none"], med["ltrace"] - med["none"]
            print(f"| {name} | {med['none']:.0f} | {s:.0f} ns | {l:.0f} ns | {l / s:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
