"""Pipeline throughput: events per second from BPF to disk, side by side
with bpftrace counting the same probe.

Drivers are Python processes running Lightning's real Profiler.profile in a
tight loop (each action = 2 events).  For 1 and 2 drivers, flat out, for a
few seconds: ltrace-bpf `record` (to a file, chunked zstd) and, separately,
bpftrace counting hits of the same uprobe (builtins.next).  Prints the
sustained rate and the ring-buffer drops.

usage: .venv/bin/python bench/pipeline.py [--seconds 3]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import lightning_site  # noqa: E402

LTRACE = os.path.join(ROOT, "build", "ltrace-bpf")
PY = "/root/.pyenv/versions/3.11.7/bin/python3.11"
LIB = "/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0"
DRIVER = r"""
import os, sys, time
from pytorch_lightning.profilers.base import PassThroughProfiler
p = PassThroughProfiler()
print("READY", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.001)
end = time.perf_counter() + float(sys.argv[2])
n = 0
while time.perf_counter() < end:
    for _ in range(1000):
        with p.profile("[LightningModule]Model.on_train_batch_start"):
            pass
    n += 1000
print("ACTIONS", n, flush=True)
"""


def start_drivers(k, site, go, seconds):
    procs = []
    for _ in range(k):
        p = subprocess.Popen([PY, "-c", DRIVER, go, str(seconds)], stdout=subprocess.PIPE, text=True,
                             env=dict(os.environ, PYTHONPATH=site))
        assert p.stdout.readline().startswith("READY")
        procs.append(p)
    return procs


def run_ltrace(k, site, seconds, tmp):
    go = os.path.join(tmp, f"go-lt{k}")
    procs = start_drivers(k, site, go, seconds)
    out = os.path.join(tmp, f"lt{k}.ltrace")
    args = [LTRACE, "record", "-v", "-o", out]
    for p in procs:
        args += ["--pid", str(p.pid)]
    rec = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    while "attached" not in rec.stderr.readline():
        pass
    open(go, "w").close()
    t0 = time.perf_counter()
    actions = sum(int(p.stdout.read().split()[1]) for p in procs)
    for p in procs:
        p.wait()
    elapsed = time.perf_counter() - t0
    err = rec.communicate()[1]
    events = int(re.search(r"recorded (\d+) events", err).group(1))
    rep = subprocess.run([LTRACE, "report", out], capture_output=True, text=True)
    drops = re.search(r"(\d+) ring-buffer drops", rep.stderr)
    return actions, events, elapsed, int(drops.group(1)) if drops else 0, os.path.getsize(out)


def run_bpftrace(k, site, seconds, tmp):
    go = os.path.join(tmp, f"go-bt{k}")
    procs = start_drivers(k, site, go, seconds)
    bt = subprocess.Popen(["bpftrace", "-e", f"uprobe:{LIB}:builtin_next {{ @hits = count(); }}"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    while "Attaching" not in bt.stdout.readline():
        pass
    time.sleep(0.5)
    open(go, "w").close()
    t0 = time.perf_counter()
    actions = sum(int(p.stdout.read().split()[1]) for p in procs)
    elapsed = time.perf_counter() - t0
    bt.send_signal(2)
    out = bt.communicate()[0]
    hits = int(re.search(r"@hits: (\d+)", out).group(1))
    return actions, hits, elapsed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        site = lightning_site.build(os.path.join(tmp, "site"), "2.6.6")
        print("| drivers | tool | actions/s driven | events/s recorded (or probe hits/s) | ring-buffer drops | bytes/event on disk |")
        print("|---|---|---|---|---|---|")
        for k in (1, 2):
            a, ev, el, drops, size = run_ltrace(k, site, args.seconds, tmp)
            print(f"| {k} | ltrace-bpf record | {a / el:,.0f} | {ev / el:,.0f} | {drops} | {size / ev:.2f} |", flush=True)
            a, hits, el = run_bpftrace(k, site, args.seconds, tmp)
            print(f"| {k} | bpftrace count() on builtin_next | {a / el:,.0f} | {hits / el:,.0f} | - | - |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
