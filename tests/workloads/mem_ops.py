"""Deterministic CPU allocations of known sizes, for the memory columns of
the op table (--profile-memory): every tensor's shape is fixed, so the
bytes each op allocates and frees are known here, and --truth writes them.

Per iteration (float32, 4 bytes an element):
  torch.empty(E)           aten::empty allocates 4E (kept)
  torch.zeros(Z)           aten::zeros -> aten::empty allocates 4Z (kept)
  torch.ones(O)            aten::ones  -> aten::empty allocates 4O (kept)
  torch.cat([x, y])        aten::cat allocates 4(X+Y) itself (kept)
  torch.mm(a, b) twice     aten::mm allocates 4*M*P each; one result kept,
                           the other dropped at once (a free outside any op)
  torch.median(v)          aten::median allocates its 0-dim result (4, in a
                           child aten::empty) and a copy of v (aten::clone),
                           which it frees itself before it returns: CPU Mem
                           4, Self CPU Mem minus the copy (a free inside an op)
  keep.clear()             every kept tensor freed outside any op
--huge: also asks for a tensor of 2**40 floats, 4 TiB (the allocator refuses:
RuntimeError, caught), and goes on.
"""
import argparse
import json
import os
import time

import torch

E, Z, O = 1000, 2000, 3000
X, Y = 1500, 2500
M, N, P = 64, 48, 32  # mm: (M x N) @ (N x P)
S = 5000  # median's input


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wait-file")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--truth", help="write the expected bytes per op here")
    ap.add_argument("--huge", action="store_true")
    ap.add_argument("--torch-profile", action="store_true", help="run the loop under torch.profiler(profile_memory=True)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    x, y = torch.ones(X), torch.ones(Y)
    ma, mb = torch.ones(M, N), torch.ones(N, P)
    v = torch.arange(S, dtype=torch.float32)
    print("READY", os.getpid(), flush=True)
    if a.wait_file:
        while not os.path.exists(a.wait_file):
            time.sleep(0.01)
    caught = 0
    checksum = 0.0
    prof = None
    if a.torch_profile:
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True)
        prof.__enter__()
    t0 = time.perf_counter()
    for _ in range(a.iters):
        keep = [torch.empty(E), torch.zeros(Z), torch.ones(O), torch.cat([x, y]), torch.mm(ma, mb)]
        torch.mm(ma, mb)  # dropped at once
        r = torch.median(v)
        checksum += float(keep[3][0]) + float(r)
        keep.append(r)
        if a.huge:
            try:
                torch.empty(2**40)
            except RuntimeError:
                caught += 1
        keep.clear()
        del r
    elapsed = time.perf_counter() - t0
    if prof is not None:
        prof.__exit__(None, None, None)
    n = a.iters
    f = 4
    mm_out = f * M * P
    copy = f * S
    med_out = f
    truth = {
        # name: [CPU Mem, Self CPU Mem] over the whole run
        "aten::empty": [n * (f * (E + Z + O) + med_out)] * 2,  # torch.empty, zeros', ones', median's result
        "aten::zeros": [n * f * Z, 0],
        "aten::ones": [n * f * O, 0],
        "aten::cat": [n * f * (X + Y), n * f * (X + Y)],
        "aten::mm": [n * 2 * mm_out, n * 2 * mm_out],
        "aten::median": [n * med_out, n * -copy],
        # frees outside ops: everything allocated, once (nothing outlives an iteration)
        "[memory]": [-n * (f * (E + Z + O + X + Y) + 2 * mm_out + med_out)] * 2,
    }
    if a.truth:
        with open(a.truth, "w") as fh:
            json.dump(truth, fh)
    print(f"RESULT iters={n} caught={caught} checksum={checksum}", flush=True)
    print(f"ELAPSED {elapsed:.6f}", flush=True)  # the loop alone (bench/mem_overhead.py)


if __name__ == "__main__":
    main()
