"""A deterministic plain-torch workload for the op report (no Lightning).

Runs a fixed number of iterations of a small MLP-like step (forward with
F.linear, ReLU, softmax, a loss, backward, an SGD update) plus a few
stand-alone ops of very different cost, so the top ops are well separated.
With --raising, every iteration also runs ops that throw C++ exceptions
which the script catches: a bad matmul shape, a bad F.linear nested inside
aten ops, and an error raised during backward (a tensor hook).

--profile FILE: run the same work under torch.profiler (CPU activity) and
write its key_averages as JSON (name -> count, cpu_time_total,
self_cpu_time_total in us) plus its table.  Prints a result line
(checksums) that must be identical with and without ltrace-bpf attached.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F


def work(iters, raising):
    g = torch.Generator().manual_seed(1234)
    w1 = torch.randn(256, 256, generator=g, requires_grad=True)
    w2 = torch.randn(64, 256, generator=g, requires_grad=True)
    big = torch.randn(384, 384, generator=g)
    x = torch.randn(128, 256, generator=g)
    target = torch.randint(0, 64, (128,), generator=g)
    caught = 0
    acc = 0.0
    for i in range(iters):
        h = F.relu(F.linear(x, w1))
        logits = F.linear(h, w2)
        loss = F.cross_entropy(logits, target)
        loss.backward()
        with torch.no_grad():
            w1 -= 1e-4 * w1.grad
            w2 -= 1e-4 * w2.grad
            w1.grad.zero_()
            w2.grad.zero_()
        # stand-alone ops of different cost
        p = torch.mm(big, big)
        q = torch.sigmoid(p)
        acc += float(q.sum())
        if raising:
            try:
                torch.mm(big, x)  # 384x384 @ 128x256: shape error from inside aten::mm
            except RuntimeError:
                caught += 1
            try:
                F.linear(x, big)  # raises from ops nested inside aten::linear
            except RuntimeError:
                caught += 1
            y = (x @ w1).sum(dim=1)
            y.register_hook(lambda grad: (_ for _ in ()).throw(ValueError("hook says no")))
            try:
                y.sum().backward()  # the error crosses the autograd engine (C++)
            except ValueError:
                caught += 1
            w1.grad = None
    return acc, caught, float(w1.detach().sum()), float(w2.detach().sum())


def trimmed_factors(events):
    """Per op name: (sum of its calls' durations, each capped at the op's
    99th percentile) / (sum of its calls' durations)."""
    durations = {}
    for e in events:
        d = e.duration_ns() / 1000.0 if hasattr(e, "duration_ns") else float(e.duration_us())  # torch 2.x / 1.13
        durations.setdefault(e.name(), []).append(d)
    factors = {}
    for name, ds in durations.items():
        ds.sort()
        cap = ds[min(len(ds) - 1, int(0.99 * len(ds)))]
        whole = sum(ds)
        factors[name] = sum(min(d, cap) for d in ds) / whole if whole > 0 else 1.0
    return factors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wait-file")
    ap.add_argument("--iters", type=int, default=60)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--raising", action="store_true")
    ap.add_argument("--profile")
    ap.add_argument("--record-shapes", action="store_true", help="with --profile: also key_averages by input shapes")
    ap.add_argument("--repeat", type=int, default=1, help="run the work this many times (attach/detach tests)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    work(1, a.raising)  # warm up: lazy init, allocator
    if a.profile:
        # torch 2.8's profiler asks hasattr(torch, "_inductor") as it
        # starts, which imports torch._inductor and torch._dynamo: ~73 aten
        # ops before it records, which a tracer attached at GO would count
        # and torch.profiler would not. Imported here, before READY.
        hasattr(torch, "_inductor")
    print("READY", os.getpid(), flush=True)
    if a.wait_file:
        while not os.path.exists(a.wait_file):
            time.sleep(0.01)
    t0 = time.perf_counter()
    if a.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU], record_shapes=a.record_shapes) as prof:
            # Wall and CPU time of the profiled work: what neighbours took
            # from it (the profiler's times are wall times).
            wall0, cpu0 = time.perf_counter(), time.thread_time()
            result = work(a.iters, a.raising)
            wall_s, cpu_s = time.perf_counter() - wall0, time.thread_time() - cpu0
        rows = {
            e.key: {"count": e.count, "cpu_time_total": e.cpu_time_total, "self_cpu_time_total": e.self_cpu_time_total}
            for e in prof.key_averages()
        }
        # Every recorded op before torch builds its tree (which merges an op
        # into a same-named parent: see tests/integration/test_ops.py).
        raw = {}
        for e in prof.profiler.kineto_results.events():
            raw[e.name()] = raw.get(e.name(), 0) + 1
        # torch.profiler times are wall time: a call that lost the CPU to a
        # neighbour (a 12 us op preempted for 3-6 ms) inflates its op's
        # total, where CPU-time samples do not.  Preemption hits the rare
        # call, so each op's share without its 1% slowest calls (capped at
        # its 99th percentile) is the reference a ranking can use.
        for key, factor in trimmed_factors(prof.profiler.kineto_results.events()).items():
            if key in rows:
                rows[key]["cpu_time_total_trimmed"] = rows[key]["cpu_time_total"] * factor
        # The same merge on the real nesting (what ltrace-bpf must count).
        from torch_merge import merged_counts
        exact, ties = merged_counts(prof.profiler.kineto_results)
        shapes = {}
        if a.record_shapes:
            for e in prof.key_averages(group_by_input_shape=True):
                shapes[e.key + " " + str(e.input_shapes)] = e.count
        with open(a.profile, "w") as f:
            json.dump({"wall_s": wall_s, "cpu_s": cpu_s, "ops": rows, "raw_counts": raw, "exact_merged": exact, "merge_ties": ties, "shapes": shapes,
                       "table": prof.key_averages().table(sort_by="cpu_time_total", row_limit=-1)}, f)
    else:
        for _ in range(a.repeat):
            result = work(a.iters, a.raising)
    print("RESULT acc=%.6e caught=%d w1=%.6e w2=%.6e" % result, flush=True)
    print("SECONDS %.3f" % (time.perf_counter() - t0), flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
