"""`ltrace-bpf cluster`: time from start to every rank attached, and the
clock correction's error, on a real Slurm with simulated nodes.

usage: .venv/bin/python bench/cluster_attach.py [--nodes 4] [--runs 5] [--duration 3]

Starts Slurm (tests/integration/slurm_sim.py: slurmctld, one slurmd per
node in its own network + UTS namespace, munge) with N nodes, runs a real
Lightning DDP fit on CPU (gloo) with one rank per node that trains for the
whole benchmark, and runs `ltrace-bpf cluster --slurm-job J --duration D`
R times against it while it trains.  Node k's tasks see their wall clock
shifted by a known amount (TaskProlog + an LD_PRELOAD shim), so the
measured corrections can be checked against the truth: the error is
(correction_k - correction_1) + (shift_k - shift_1).

Prints per run: the coordinator's "last node attached at" time (from its
start: Slurm query, srun step start, agent start, discovery, BPF load and
attach), the wall time until that line, and per node the clock error and
the bound the tool states.  All measured; nothing estimated.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from clock_shift import build_shift_shim  # noqa: E402
from slurm_sim import SlurmSim, slurm_available  # noqa: E402

LTRACE = os.path.join(ROOT, "build", "ltrace-bpf")
PY = os.path.join(ROOT, ".venv", "bin", "python")

JOB = r'''
import os, sys, time
import torch
import pytorch_lightning as pl
from torch.utils.data import DataLoader, TensorDataset
nodes = int(sys.argv[1])
class Model(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(32, 2)
    def training_step(self, batch, batch_idx):
        time.sleep(0.01)
        return self.net(batch[0]).pow(2).mean()
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)
torch.set_num_threads(1)
data = DataLoader(TensorDataset(torch.randn(8 * 100000, 32)), batch_size=8)
print("READY", flush=True)
pl.Trainer(accelerator="cpu", devices=1, num_nodes=nodes, strategy="ddp", max_epochs=1, logger=False,
           enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
           use_distributed_sampler=False).fit(Model(), data)
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--duration", type=float, default=3)
    args = ap.parse_args()
    ok, why = slurm_available()
    if not ok:
        sys.exit(f"cluster_attach: no simulated Slurm here: {why}")
    names = [f"node{i + 1}" for i in range(args.nodes)]
    # Known wall-clock errors per node (node1: none).
    shifts = {n: [0, 3_700_000, -1_250_000, 250_000, 42_000_000][i % 5] for i, n in enumerate(names)}
    tmp = tempfile.mkdtemp(prefix="lt-cluster-bench-")
    try:
        shim = build_shift_shim(tmp)
        if not shim:
            sys.exit("cluster_attach: no C compiler for the clock-shift shim")
        prolog = os.path.join(tmp, "prolog.sh")
        with open(prolog, "w") as f:
            f.write("#!/bin/sh\ncase \"$SLURMD_NODENAME\" in\n")
            for n, s in shifts.items():
                if s:
                    f.write(f"  {n}) echo export LD_PRELOAD={shim}; echo export LT_TEST_REALTIME_SHIFT_NS={s};;\n")
            f.write("esac\n")
        os.chmod(prolog, 0o755)
        job_py = os.path.join(tmp, "job.py")
        open(job_py, "w").write(JOB)
        with SlurmSim(os.path.join(tmp, "slurm"), nodes=names, cpus_per_node=2, task_prolog=prolog,
                      subnet_index=9) as sim:
            script = (f"#!/bin/sh\nexport MASTER_ADDR={sim.node_ip(names[0])} MASTER_PORT=29611 GLOO_SOCKET_IFNAME=eth0\n"
                      f"exec srun --output={tmp}/rank%t.out {PY} {job_py} {args.nodes}\n")
            job = sim.sbatch(script, nodes=args.nodes, ntasks_per_node=1)
            sim.wait_state(job, "RUNNING", 60)
            deadline = time.time() + 180
            while time.time() < deadline and not all(
                    os.path.exists(f"{tmp}/rank{r}.out") and "READY" in open(f"{tmp}/rank{r}.out").read()
                    for r in range(args.nodes)):
                time.sleep(0.2)
            time.sleep(5)  # into the fit: every rank training
            print(f"cluster_attach: {args.nodes} simulated nodes x 1 rank, Lightning DDP (gloo) training; "
                  f"{args.runs} runs of `ltrace-bpf cluster --slurm-job {job} --duration {args.duration}`")
            print(f"injected wall-clock shifts (ns): {shifts}")
            attach, wall, errors, bounds = [], [], [], []
            for run in range(args.runs):
                out = os.path.join(tmp, f"traces{run}")
                t0 = time.perf_counter()
                p = subprocess.Popen([LTRACE, "cluster", "--slurm-job", str(job), "-o", out, "--duration",
                                      str(args.duration)], env=sim.env, stderr=subprocess.PIPE, text=True)
                seen = None
                err = ""
                for line in p.stderr:
                    err += line
                    if seen is None and "node(s) attached; the last at" in line:
                        seen = time.perf_counter() - t0
                rc = p.wait()
                m = re.search(r"(\d+) of (\d+) node\(s\) attached; the last at ([\d.]+) s", err)
                if rc != 0 or not m or m.group(1) != m.group(2):
                    print(err)
                    sys.exit(f"cluster_attach: run {run} failed (exit {rc})")
                attach.append(float(m.group(3)))
                wall.append(seen)
                merged = os.path.join(tmp, f"merged{run}.json")
                r = subprocess.run([LTRACE, "report", out, "--merge", "--chrome", merged], capture_output=True,
                                   text=True)
                if r.returncode != 0:
                    sys.exit(f"cluster_attach: merge failed: {r.stderr}")
                hosts = {h["host"]: h for h in json.load(open(merged))["ltrace_bpf"]["common_clock"]["hosts"]}
                ref = hosts[names[0]]
                line = []
                for n in names[1:]:
                    h = hosts[n]
                    e = (h["clock_offset_ns"] - ref["clock_offset_ns"]) + (shifts[n] - shifts[names[0]])
                    b = h["residual_ns"] + ref["residual_ns"]
                    errors.append(abs(e))
                    bounds.append(b)
                    line.append(f"{n} error {e:+d} ns (bound {b} ns)")
                print(f"run {run + 1}: all {args.nodes} nodes attached {attach[-1]:.3f} s after start "
                      f"(wall {wall[-1]:.3f} s); " + "; ".join(line))
            print(f"attach (last node), s: median {statistics.median(attach):.3f}, max {max(attach):.3f}  "
                  f"(goal <= 5 s for 4 nodes)")
            print(f"clock error vs the injected shift, ns: median {statistics.median(errors):.0f}, "
                  f"max {max(errors)}; stated bound: median {statistics.median(bounds):.0f}, max {max(bounds)}; "
                  f"every error within its bound: {all(e <= b for e, b in zip(errors, bounds))}")
            sim.cancel(job)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
