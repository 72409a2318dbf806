"""Workload for bench/ops_overhead.py: the protocol of tests/workloads/torch_ops.py
(prints READY, waits for --wait-file, runs the work, prints RESULT and SECONDS,
exits), with the torch.profiler run split into phases.

--kind small (default): an op-dense loop of tiny ops on 8-element tensors, no
    autograd: each op costs a few microseconds, so per-op profiler overhead is
    most of the time here.
--kind mlp: tests/workloads/torch_ops.py's own work() (imported, unchanged).

Without --profile, SECONDS is the time of work(iters), as in torch_ops.py.
With --profile FILE, the same steps as torch_ops.py --profile (a
torch.profiler.profile(activities=[CPU]) around the work, then key_averages as
JSON plus its table into FILE), timed in phases:
    PHASES start=S work=W stop=P report=R
start: entering the profiler (its first start in a process pays kineto's
initialisation); work: work(iters) under the profiler, the region a profiled
step would be slowed by; stop: leaving it; report: key_averages, the table and
the JSON. SECONDS = S+W+P+R, torch_ops.py's definition (t0 before the profiler,
printed after the JSON). Before all that (and before t0), a --profile run also
times work(iters) once unprofiled in the same process: INPROC_BASE seconds, a
warm same-process baseline for the "work" phase.
"""
import argparse
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def small_work(iters, raising=False):
    """Ten tiny ops per iteration (each a dispatcher entry: add, mul, relu (+clamp_min
    inside), add_, sigmoid, sub, abs, maximum, ...), no autograd."""
    a = torch.linspace(0.0, 1.0, 8)
    b = torch.full((8,), 0.25)
    acc = torch.zeros(8)
    for i in range(iters):
        c = torch.add(a, b)
        c = torch.mul(c, 0.5)
        c = torch.relu(c)
        c.add_(b)
        c = torch.sigmoid(c)
        d = torch.sub(c, a)
        d = torch.abs(d)
        a = torch.maximum(c, d)
        acc.add_(a)
    return float(acc.sum()), 0, float(a.sum()), float(b.sum())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", choices=["small", "mlp"], default="small")
    ap.add_argument("--wait-file")
    ap.add_argument("--iters", type=int, default=6000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--profile")
    ap.add_argument("--record-shapes", action="store_true", help="torch.profiler's record_shapes=True")
    a = ap.parse_args()
    if a.kind == "mlp":
        sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "workloads"))
        from torch_ops import work
    else:
        work = small_work
    torch.set_num_threads(a.threads)
    work(1, False)  # warm up: lazy init, allocator
    print("READY", os.getpid(), flush=True)
    if a.wait_file:
        while not os.path.exists(a.wait_file):
            time.sleep(0.01)
    if a.profile:
        tb = time.perf_counter()
        work(a.iters, False)  # the same work unprofiled, in this process: a warm baseline for the region
        print("INPROC_BASE %.4f" % (time.perf_counter() - tb), flush=True)
    t0 = time.perf_counter()
    if a.profile:
        from torch.profiler import ProfilerActivity, profile

        prof = profile(activities=[ProfilerActivity.CPU], record_shapes=a.record_shapes)
        prof.__enter__()
        t1 = time.perf_counter()
        try:
            result = work(a.iters, False)
        finally:
            t2 = time.perf_counter()
            prof.__exit__(None, None, None)
        t3 = time.perf_counter()
        rows = {
            e.key: {"count": e.count, "cpu_time_total": e.cpu_time_total, "self_cpu_time_total": e.self_cpu_time_total}
            for e in prof.key_averages()
        }
        with open(a.profile, "w") as f:
            json.dump({"ops": rows, "table": prof.key_averages().table(sort_by="cpu_time_total", row_limit=-1)}, f)
        t4 = time.perf_counter()
        print("PHASES start=%.4f work=%.4f stop=%.4f report=%.4f" % (t1 - t0, t2 - t1, t3 - t2, t4 - t3), flush=True)
    else:
        result = work(a.iters, False)
    print("RESULT acc=%.6e caught=%d w1=%.6e w2=%.6e" % result, flush=True)
    print("SECONDS %.3f" % (time.perf_counter() - t0), flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
