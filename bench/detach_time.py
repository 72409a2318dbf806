"""How long ltrace-bpf takes to finish once its target exits (the detach).

This time matters most for cluster agents. When a Slurm job ends, its steps
get SIGTERM and then, KillWait seconds later, SIGKILL. An agent whose
targets have exited must drain, write and send its trace within that time.
Releasing a perf-event uprobe waits for an RCU grace period, so the tool's
uprobes are uprobe_multi links (user/sources/uprobe_multi.h). This script
measures what is left.

A world-size-1 gloo process runs all_reduce calls in a Lightning-free loop and
exits on its own after --seconds. `ltrace-bpf record --pid` is attached to it
with each report set below. The time printed runs from the target's exit (its
pidfd turns readable) to the recorder's. Three runs each; median (min-max).

usage: .venv/bin/python bench/detach_time.py [--seconds 3] [--runs 3]
"""
import argparse
import os
import select
import socket
import statistics
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
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[1], rank=0, world_size=1)
t = torch.ones(1)
print("READY", flush=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.01)
end = time.time() + float(sys.argv[3])
while time.time() < end:
    dist.all_reduce(t)
    (torch.randn(64, 64) @ torch.randn(64, 64)).sum()
    time.sleep(0.001)
dist.destroy_process_group()
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one(reports, seconds, tmp):
    go = os.path.join(tmp, "go")
    if os.path.exists(go):
        os.unlink(go)
    prog = os.path.join(tmp, "target.py")
    with open(prog, "w") as f:
        f.write(TARGET)
    t = subprocess.Popen([PY, prog, str(free_port()), go, str(seconds)], stdout=subprocess.PIPE, text=True)
    assert t.stdout.readline().strip() == "READY"
    trace = os.path.join(tmp, "t.ltrace")
    if os.path.exists(trace):
        os.unlink(trace)
    err = open(os.path.join(tmp, "rec.err"), "w+")
    rec = subprocess.Popen([LTRACE, "record", "--pid", str(t.pid), "-o", trace, "-v", "--report", reports],
                           stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.time() + 120
    while "attached:" not in open(err.name).read():
        if rec.poll() is not None or time.time() > deadline:
            sys.exit(f"record did not attach: {open(err.name).read()}")
        time.sleep(0.05)
    probes = [l for l in open(err.name).read().splitlines() if "attached:" in l][0].split("attached: ", 1)[1]
    open(go, "w").close()
    pidfd = os.pidfd_open(t.pid)
    select.select([pidfd], [], [])
    exited = time.monotonic()
    t.wait()
    rec.wait(timeout=120)
    done = time.monotonic()
    os.close(pidfd)
    if rec.returncode != 0:
        sys.exit(f"record failed ({rec.returncode}): {open(err.name).read()}")
    return done - exited, probes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    print("| reports | probes attached | target exit -> recorder exit (s), median (min-max) |")
    print("|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for reports in ("simple", "simple,comm", "simple,comm,ops,memory"):
            times, probes = [], ""
            for _ in range(args.runs):
                dt, probes = one(reports, args.seconds, tmp)
                times.append(dt)
            print(f"| {reports} | {probes} | {statistics.median(times):.2f} ({min(times):.2f}-{max(times):.2f}) |",
                  flush=True)


if __name__ == "__main__":
    main()
