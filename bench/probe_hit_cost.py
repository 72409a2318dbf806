"""The action probe's own cost per hit in a hot loop, against its cost
inside a fit (bench/overhead.py --bpf-stats): a tight loop of
`with profiler.profile(NAME): pass` on Lightning's real PassThroughProfiler
with a callback hook's long name, nothing attached, under a plain attach
(`--pid`) and under `watch --pid` (the cheap tier: 19 Hz stacks, so each
action start also finds its opening frame). Prints the loop's ns per action
and each of our BPF programs' runs and ns per run over the loop
(`kernel.bpf_stats_enabled`, turned on here).

usage: .venv/bin/python bench/probe_hit_cost.py [--python /usr/bin/python3.11] [--n 100000] [--reps 2]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import lightning_site  # noqa: E402

LTRACE = os.path.join(ROOT, "build", "ltrace-bpf")
LOOP = r"""
import os, sys, time
from pytorch_lightning.profilers.base import PassThroughProfiler
p = PassThroughProfiler()
n = int(sys.argv[1])
print("READY", flush=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.01)
name = ("[Callback]ModelCheckpoint{'monitor': None, 'mode': 'min', 'every_n_train_steps': 0, "
        "'every_n_epochs': 1, 'train_time_interval': None}.on_train_batch_end")
t = time.perf_counter()
for _ in range(n):
    with p.profile(name):
        pass
print("NS_PER_ACTION", (time.perf_counter() - t) / n * 1e9, flush=True)
while not os.path.exists(sys.argv[2] + ".end"):
    time.sleep(0.01)
"""
MODES = {"none": None, "attach": ["--pid", "{pid}", "-v"], "watch": ["watch", "--pid", "{pid}", "-v", "--dir", "{tmp}/w"]}


def bpf_stats(owner):
    """Our programs' counters, of the tracer `owner` alone (another ltrace-bpf
    on the machine probes the same libpython: its programs run, and return
    at once, on this loop's calls too)."""
    if owner is None:
        return {}
    ids = set()
    for fd in os.listdir(f"/proc/{owner}/fdinfo"):
        try:
            for line in open(f"/proc/{owner}/fdinfo/{fd}"):
                if line.startswith("prog_id:"):
                    ids.add(int(line.split()[1]))
        except OSError:
            pass
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True, check=True).stdout
    d = {}
    for p in json.loads(out):
        if p.get("name", "").startswith("lt_") and p.get("id") in ids:
            t = d.setdefault(p["name"], [0, 0])
            t[0] += p.get("run_time_ns", 0)
            t[1] += p.get("run_cnt", 0)
    return d


def one(python, site, mode, n):
    with tempfile.TemporaryDirectory() as tmp:
        go = os.path.join(tmp, "go")
        job = subprocess.Popen([python, "-c", LOOP, str(n), go], stdout=subprocess.PIPE, text=True,
                               env=dict(os.environ, PYTHONPATH=site))
        assert job.stdout.readline().startswith("READY")
        lt = None
        if MODES[mode]:
            lt = subprocess.Popen([LTRACE] + [a.format(pid=job.pid, tmp=tmp) for a in MODES[mode]],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            while True:
                line = lt.stderr.readline()
                if "attached" in line or not line:
                    break
        before = bpf_stats(lt.pid if lt else None)
        open(go, "w").close()
        ns = float(job.stdout.readline().split()[1])
        after = bpf_stats(lt.pid if lt else None)
        open(go + ".end", "w").close()
        job.wait()
        if lt:
            lt.send_signal(2)
            lt.wait()
        runs = {k: (v[0] - before.get(k, [0, 0])[0], v[1] - before.get(k, [0, 0])[1]) for k, v in after.items()}
        return ns, {k: (t / c, c) for k, (t, c) in runs.items() if c}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default="/usr/bin/python3.11")
    ap.add_argument("--n", type=int, default=100000)
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args()
    subprocess.run(["sysctl", "-qw", "kernel.bpf_stats_enabled=1"], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        site = lightning_site.build(tmp, "2.6.6")
        print("| mode | ns per action | lt_next runs | lt_next ns per run | lt_sample runs | lt_sample ns per run |")
        print("|---|---|---|---|---|---|")
        for mode in MODES:
            for _ in range(args.reps):
                ns, st = one(args.python, site, mode, args.n)
                nx, sa = st.get("lt_next", (0, 0)), st.get("lt_sample", (0, 0))
                print(f"| {mode} | {ns:.0f} | {nx[1]} | {nx[0]:.0f} | {sa[1]} | {sa[0]:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
