"""Cost of the bridge's dormant path on this machine (no GPU needed): NVTX
calls through torch.cuda.nvtx (a real NVTX3 client: torch's own copy) with
and without the bridge injected as the NVTX tool, no tracer attached, and the
same with `ltrace-bpf run` attached (the bridge's nvtx probe live).  Side by
side in one run; prints ns per push+pop pair and the ratio to no tool.

    sudo .venv/bin/python bench/bridge_dormant.py [--pairs 200000] [--repeat 3]
"""
import argparse
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BRIDGE = os.path.join(ROOT, "build", "libltrace-bridge.so")
LTRACE = os.path.join(ROOT, "build", "ltrace-bpf")

PROG = r"""
import sys, time, torch
n = int(sys.argv[1])
push, pop = torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop
for _ in range(1000):
    push("warm"); pop()
t0 = time.perf_counter()
for _ in range(n):
    push("step"); pop()
dt = time.perf_counter() - t0
print("NS_PER_PAIR %.1f" % (dt / n * 1e9))
"""


def run(cmd, env=None):
    out = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **(env or {})), timeout=600).stdout
    for line in out.splitlines():
        if line.startswith("NS_PER_PAIR"):
            return float(line.split()[1])
    raise SystemExit("no result from: " + " ".join(cmd))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=200000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    py = sys.executable
    base = [py, "-c", PROG, str(a.pairs)]
    rows = {"no NVTX tool": [], "bridge as NVTX tool, no tracer (dormant)": [],
            "bridge, ltrace-bpf run attached (probe live)": []}
    for _ in range(a.repeat):  # interleaved, so drift hits every configuration alike
        rows["no NVTX tool"].append(run(base))
        rows["bridge as NVTX tool, no tracer (dormant)"].append(run(base, {"NVTX_INJECTION64_PATH": BRIDGE}))
        rows["bridge, ltrace-bpf run attached (probe live)"].append(
            run([LTRACE, "run", "--report", "gpu", "--"] + base))
    ref = statistics.median(rows["no NVTX tool"])
    print(f"{'configuration':48} {'ns/pair (median)':>17} {'x no tool':>10}")
    for name, v in rows.items():
        m = statistics.median(v)
        print(f"{name:48} {m:17.1f} {m / ref:10.2f}")


if __name__ == "__main__":
    main()
