"""Cost of memory tracking (--profile-memory, issue 15) on the allocation-heavy
CPU workload tests/workloads/mem_ops.py (per iteration 8 CPU allocations and
8 frees: 16 allocator hook hits, ~20 aten calls), side by side in one run:

  base             nothing attached
  torch.profiler   torch.profiler.profile(activities=[CPU], profile_memory=True)
                   around the loop (the workload's --torch-profile)
  ops              ltrace-bpf --report ops (op probes + 999 Hz sampling)
  ops+memory       ltrace-bpf --report ops --profile-memory

Each time is the loop alone (the workload's ELAPSED line).  Rounds rotate the
order; medians are reported.  Cost per allocator event = (ops+memory - ops) /
(16 * iterations).

  python3 bench/mem_overhead.py [--iters 3000] [--rounds 3]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = os.path.join(ROOT, ".venv", "bin", "python")
LT = os.path.join(ROOT, "build", "ltrace-bpf")
WL = os.path.join(ROOT, "tests", "workloads", "mem_ops.py")
EVENTS_PER_ITER = 16


def wait_for(path, text, timeout, proc=None):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path) and text in open(path).read():
            return
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{path}: process exited before '{text}'")
        time.sleep(0.05)
    raise RuntimeError(f"{path}: no '{text}' in {timeout}s")


def one(config, iters, tmp):
    go = os.path.join(tmp, "go")
    out = os.path.join(tmp, "wl.out")
    err = os.path.join(tmp, "lt.err")
    for p in (go, out, err):
        if os.path.exists(p):
            os.unlink(p)
    args = [PY, WL, "--wait-file", go, "--iters", str(iters)] + (["--torch-profile"] if config == "torch.profiler" else [])
    with open(out, "w") as fo:
        wl = subprocess.Popen(args, stdout=fo, stderr=subprocess.STDOUT)
    wait_for(out, "READY", 300, wl)
    lt = None
    if config.startswith("ops"):
        lt_args = [LT, "--pid", str(wl.pid), "-v", "--report", "ops"] + (["--profile-memory"] if config == "ops+memory" else [])
        with open(err, "w") as fe:
            lt = subprocess.Popen(lt_args, stdout=subprocess.DEVNULL, stderr=fe)
        wait_for(err, "attached", 120, lt)
    open(go, "w").close()
    wl.wait(timeout=600)
    if lt is not None:
        lt.wait(timeout=300)
    return float(next(l.split()[1] for l in open(out) if l.startswith("ELAPSED")))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    tmp = f"/tmp/mem_overhead.{os.getpid()}"
    os.makedirs(tmp, exist_ok=True)
    configs = ["base", "torch.profiler", "ops", "ops+memory"]
    times = {c: [] for c in configs}
    for r in range(a.rounds):
        for c in configs[r % len(configs):] + configs[:r % len(configs)]:
            times[c].append(one(c, a.iters, tmp))
    base = statistics.median(times["base"])
    print(f"iterations {a.iters}, rounds {a.rounds}, {EVENTS_PER_ITER} allocator events per iteration")
    for c in configs:
        m = statistics.median(times[c])
        print(f"{c:15s} median {m * 1e3:9.1f} ms  x{m / base:5.2f}  per iteration {m / a.iters * 1e6:7.1f} us")
    ops, mem = statistics.median(times["ops"]), statistics.median(times["ops+memory"])
    print(f"memory tracking: {(mem - ops) / (EVENTS_PER_ITER * a.iters) * 1e6:.2f} us per allocator event "
          f"(ops+memory - ops)")


if __name__ == "__main__":
    sys.exit(main())
