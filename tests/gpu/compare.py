"""Compares ltrace-bpf's GPU kernels (its Chrome trace) with torch.profiler's
(gpu_compare.py's torch.json) for the same fit: per kernel name, the count
and the total device time.  Prints a table and a verdict line:
  COMPARE kernels=<ours>/<torch> names=<matched>/<torch names> count_exact=<n> time_ratio=<ours/torch>
"""
import json
import sys


def main():
    ours_path, torch_path = sys.argv[1], sys.argv[2]
    with open(ours_path) as f:
        trace = json.load(f)
    with open(torch_path) as f:
        ref = json.load(f)["kernels"]
    ours = {}
    for e in trace["traceEvents"]:
        if e.get("cat") == "kernel" and e.get("ph") == "X":
            k = ours.setdefault(e["name"], {"count": 0, "us": 0.0})
            k["count"] += 1
            k["us"] += float(e["dur"])
    # copies are compared in the GPU report, not here; GPU-side user
    # annotations (older torch lists them among device events: e.g.
    # "Optimizer.step#SGD.step") are spans.  A kernel name may hold '#' too
    # (a lambda: "{lambda(float, float)#1}"), but always a parameter list.
    ref = {n: v for n, v in ref.items()
           if not n.startswith(("Memcpy", "Memset")) and ("#" not in n or "(" in n)}
    names = sorted(set(ours) | set(ref), key=lambda n: -ref.get(n, {"us": 0})["us"])
    exact = 0
    print(f"{'ours':>7} {'torch':>7} {'ours us':>11} {'torch us':>11}  kernel")
    for n in names:
        o, r = ours.get(n, {"count": 0, "us": 0.0}), ref.get(n, {"count": 0, "us": 0.0})
        exact += o["count"] == r["count"]
        print(f"{o['count']:>7} {r['count']:>7} {o['us']:>11.1f} {r['us']:>11.1f}  {n[:110]}")
    so, sr = sum(v["count"] for v in ours.values()), sum(v["count"] for v in ref.values())
    to, tr = sum(v["us"] for v in ours.values()), sum(v["us"] for v in ref.values())
    matched = len(set(ours) & set(ref))
    print(f"COMPARE kernels={so}/{sr} names={matched}/{len(ref)} count_exact={exact}/{len(names)} "
          f"time_ratio={to / tr if tr else 0:.3f}")


if __name__ == "__main__":
    main()
