"""What comm tracing (--report comm) costs per c10d call.

A 2-rank gloo job on this machine times CALLS all_reduce calls of a 1-element
float32 tensor (the smallest message: the per-call cost is the largest
share).  Run once plain and once attached with `ltrace-bpf --report comm`
(entry probes on ProcessGroupGloo's methods, and the timing points: enqueue,
finishWorkGloo, Work::wait: three more hits per all_reduce); with kernel.bpf_stats_enabled
the BPF program's own run time per call is read too (the uprobe trap itself
is not in it: the wall-clock difference includes it, and the noise of a
shared machine).  One run each: numbers are single measurements.

NCCL part: one process (torch's CUDA build loaded, no GPU needed) calls the
real libnccl's ncclAllReduce CALLS times with a NULL communicator, which
NCCL refuses before touching a device: plain, then attached; the cost of
the lt_nccl_enter probe per call (its BPF run time, and the wall-clock
difference, which includes the uprobe trap).

usage: .venv/bin/python bench/comm_cost.py [--calls 5000]
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LTRACE = os.path.join(ROOT, "build", "ltrace-bpf")
PY = os.path.join(ROOT, ".venv", "bin", "python")
TARGET = r"""
import os, sys, time
import torch, torch.distributed as dist
rank = int(os.environ["RANK"])
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + os.environ["MASTER_PORT"], rank=rank, world_size=2)
print("READY", rank, flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
t = torch.ones(1)
for _ in range(200):
    dist.all_reduce(t)
dist.barrier()
t0 = time.perf_counter()
for _ in range(int(sys.argv[2])):
    dist.all_reduce(t)
dt = time.perf_counter() - t0
if rank == 0:
    print("US_PER_CALL", dt / int(sys.argv[2]) * 1e6, flush=True)
dist.destroy_process_group()
"""


def launch(tmp, calls):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = os.path.join(tmp, "target.py")
    with open(script, "w") as f:
        f.write(TARGET)
    go = os.path.join(tmp, "go")
    if os.path.exists(go):
        os.unlink(go)
    log = open(os.path.join(tmp, "job.log"), "w")
    procs = [subprocess.Popen([PY, script, go, str(calls)], stdout=log, stderr=subprocess.STDOUT,
                              env=dict(os.environ, RANK=str(r), MASTER_PORT=str(port))) for r in range(2)]
    deadline = time.time() + 300
    while open(os.path.join(tmp, "job.log")).read().count("READY") < 2:
        assert time.time() < deadline and all(p.poll() is None for p in procs), open(os.path.join(tmp, "job.log")).read()
        time.sleep(0.05)
    return procs, go


def us_per_call(tmp):
    for line in open(os.path.join(tmp, "job.log")):
        if line.startswith("US_PER_CALL"):
            return float(line.split()[1])
    raise RuntimeError(open(os.path.join(tmp, "job.log")).read())


def bpf_stats(name="lt_comm_enter"):
    out = subprocess.run(["bpftool", "-j", "prog", "show", "name", name], capture_output=True, text=True).stdout
    try:
        d = json.loads(out)
    except ValueError:
        return 0, 0
    if isinstance(d, list):
        d = d[0] if d else {}
    return d.get("run_time_ns", 0), d.get("run_cnt", 0)


NCCL_TARGET = r"""
import ctypes, os, sys, time
import torch
path = next(l.split()[-1] for l in open("/proc/self/maps") if "/libnccl.so" in l)
lib = ctypes.CDLL(path)
f = lib.ncclAllReduce
P = ctypes.c_void_p
f.argtypes = [P, P, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, P, P]
print("READY", os.getpid(), flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
for _ in range(200):
    f(None, None, 1000, 7, 0, None, None)
n = int(sys.argv[2])
t0 = time.perf_counter()
for _ in range(n):
    f(None, None, 1000, 7, 0, None, None)
print("US_PER_CALL", (time.perf_counter() - t0) / n * 1e6, flush=True)
"""


def nccl_part(tmp, calls):
    script = os.path.join(tmp, "nccl_target.py")
    with open(script, "w") as f:
        f.write(NCCL_TARGET)

    def run(traced):
        go = os.path.join(tmp, "go")
        if os.path.exists(go):
            os.unlink(go)
        log = open(os.path.join(tmp, "job.log"), "w")
        p = subprocess.Popen([PY, script, go, str(calls)], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 300
        while "READY" not in open(os.path.join(tmp, "job.log")).read():
            assert time.time() < deadline and p.poll() is None, open(os.path.join(tmp, "job.log")).read()
            time.sleep(0.05)
        lt, stats = None, (0, 0)
        if traced:
            err = open(os.path.join(tmp, "lt.err"), "w")
            lt = subprocess.Popen([LTRACE, "-v", "--report", "comm", "--pid", str(p.pid)], stdout=subprocess.DEVNULL,
                                  stderr=err)
            while "NCCL API functions" not in open(os.path.join(tmp, "lt.err")).read():
                assert time.time() < deadline and lt.poll() is None, open(os.path.join(tmp, "lt.err")).read()
                time.sleep(0.05)
            subprocess.run(["sysctl", "-qw", "kernel.bpf_stats_enabled=1"], check=True)
        open(go, "w").close()
        p.wait()
        if traced:
            stats = bpf_stats("lt_nccl_enter")
            lt.wait(timeout=120)
        return us_per_call(tmp), stats

    plain, _ = run(False)
    traced, (run_ns, runs) = run(True)
    print(f"ncclAllReduce (NULL communicator: refused by NCCL before any device work), {calls} calls:")
    print(f"  plain      {plain:8.2f} us/call")
    print(f"  --report comm {traced:8.2f} us/call  (difference {traced - plain:+.2f} us/call, one run each)")
    if runs:
        print(f"  BPF program lt_nccl_enter: {runs} runs, {run_ns / runs:.0f} ns per run (kernel.bpf_stats_enabled)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=5000)
    args = ap.parse_args()
    stats_file = "/proc/sys/kernel/bpf_stats_enabled"
    stats_before = open(stats_file).read().strip()
    with tempfile.TemporaryDirectory() as tmp:
        procs, go = launch(tmp, args.calls)
        open(go, "w").close()
        for p in procs:
            p.wait()
        plain = us_per_call(tmp)

        procs, go = launch(tmp, args.calls)
        err = open(os.path.join(tmp, "lt.err"), "w")
        lt = subprocess.Popen([LTRACE, "-v", "--report", "comm"] + sum((["--pid", str(p.pid)] for p in procs), []),
                              stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.time() + 120
        while open(os.path.join(tmp, "lt.err")).read().count("c10d backend methods") < 2:
            assert time.time() < deadline and lt.poll() is None, open(os.path.join(tmp, "lt.err")).read()
            time.sleep(0.05)
        subprocess.run(["sysctl", "-qw", "kernel.bpf_stats_enabled=1"], check=True)
        try:
            open(go, "w").close()
            for p in procs:
                p.wait()
            run_ns, runs = bpf_stats()
            mark_ns, marks = bpf_stats("lt_comm_mark")
        finally:
            subprocess.run(["sysctl", "-qw", f"kernel.bpf_stats_enabled={stats_before}"])
        lt.wait(timeout=120)
        traced = us_per_call(tmp)
    print(f"all_reduce float32[1], 2 ranks gloo, {args.calls} calls (rank 0's loop):")
    print(f"  plain      {plain:8.2f} us/call")
    print(f"  --report comm {traced:8.2f} us/call  (difference {traced - plain:+.2f} us/call, one run each)")
    if runs:
        print(f"  BPF program lt_comm_enter: {runs} runs, {run_ns / runs:.0f} ns per run (kernel.bpf_stats_enabled)")
    if marks:
        print(f"  BPF program lt_comm_mark: {marks} runs ({marks / max(runs, 1):.1f} per call), "
              f"{mark_ns / marks:.0f} ns per run")
    stats_before = open(stats_file).read().strip()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            nccl_part(tmp, args.calls)
    finally:
        subprocess.run(["sysctl", "-qw", f"kernel.bpf_stats_enabled={stats_before}"])


if __name__ == "__main__":
    sys.exit(main())
