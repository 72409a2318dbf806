"""`ltrace-bpf cluster --slurm-job J dump`: time from the command's start to
its verdict, on a real Slurm with 2, 4 and 8 simulated nodes.

usage: .venv/bin/python bench/cluster_dump_time.py [--nodes 2,4,8] [--runs 3]

For each node count: starts Slurm (tests/integration/slurm_sim.py:
slurmctld, one slurmd per node in its own network + UTS namespace, munge),
runs tests/workloads/allreduce_hang.py with one rank per node (torch.distributed,
gloo, CPU: the ranks loop all_reduce), makes the last rank block in its own
code before an all_reduce (the others then wait in it), and times R runs of
`cluster --slurm-job J dump` (wall clock, from the command's start to its
exit).  Each run must exit 15 (hang) and name the last rank; the medians
are printed.  The time includes each agent's two reads 1 s apart (the
"blocked for at least" bound), srun's step start per node and the dumps.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from slurm_sim import SlurmSim, slurm_available  # noqa: E402

LTRACE = os.path.join(ROOT, "build", "ltrace-bpf")
PY = os.path.join(ROOT, ".venv", "bin", "python")
JOB_PY = os.path.join(ROOT, "tests", "workloads", "allreduce_hang.py")


def wait_text(path, text, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(path) and text in open(path).read():
            return
        time.sleep(0.1)
    sys.exit(f"cluster_dump_time: timed out waiting for {text!r} in {path}")


def one_size(n, runs, tmp):
    names = [f"node{i + 1}" for i in range(n)]
    ctl = os.path.join(tmp, f"ctl{n}")
    os.makedirs(ctl)
    os.mkfifo(os.path.join(ctl, "feed"))
    times = []
    with SlurmSim(os.path.join(tmp, f"slurm{n}"), nodes=names, cpus_per_node=1, subnet_index=24) as sim:
        script = (f"#!/bin/sh\nexport MASTER_ADDR={sim.node_ip(names[0])} MASTER_PORT=29581 GLOO_SOCKET_IFNAME=eth0\n"
                  f"exec srun --output={tmp}/n{n}-rank%t.out {PY} {JOB_PY} {ctl}\n")
        job = sim.sbatch(script, nodes=n, ntasks_per_node=1)
        try:
            sim.wait_state(job, "RUNNING", 60)
            for r in range(n):
                wait_text(f"{tmp}/n{n}-rank{r}.out", "READY", 600)
            open(os.path.join(ctl, "hang"), "w").write(str(n - 1))
            wait_text(f"{tmp}/n{n}-rank{n - 1}.out", "BLOCKING", 120)
            time.sleep(0.5)
            for run in range(runs):
                t0 = time.perf_counter()
                p = subprocess.run([LTRACE, "cluster", "--slurm-job", str(job), "dump"], env=sim.env,
                                   capture_output=True, text=True, timeout=300)
                took = time.perf_counter() - t0
                named = f"rank {n - 1} has not entered it" in p.stdout
                print(f"  {n} nodes, run {run + 1}: {took:.2f} s, exit {p.returncode}, last rank named: {named}")
                if p.returncode != 15 or not named:
                    print(p.stdout[-3000:], p.stderr)
                    sys.exit(f"cluster_dump_time: run failed for {n} nodes")
                times.append(took)
        finally:
            open(os.path.join(ctl, "stop"), "w").close()
            try:
                fd = os.open(os.path.join(ctl, "feed"), os.O_WRONLY | os.O_NONBLOCK)
                os.write(fd, b"x")
                os.close(fd)
            except OSError:
                pass
            sim.cancel(job)
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", default="2,4,8")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    ok, why = slurm_available()
    if not ok:
        sys.exit(f"cluster_dump_time: no simulated Slurm here: {why}")
    tmp = tempfile.mkdtemp(prefix="lt-cdump-bench-")
    results = {}
    try:
        for n in [int(x) for x in args.nodes.split(",")]:
            results[n] = one_size(n, args.runs, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"cluster_dump_time: `ltrace-bpf cluster --slurm-job J dump` on a hung job (one rank per node, "
          f"gloo; the last rank blocked), {args.runs} runs each; wall seconds from start to exit")
    print(f"{'nodes':>5}  {'median':>7}  {'min':>6}  {'max':>6}")
    for n, t in results.items():
        print(f"{n:>5}  {statistics.median(t):>7.2f}  {min(t):>6.2f}  {max(t):>6.2f}")


if __name__ == "__main__":
    main()
