"""A target that keeps a known list of tensors alive (the "leak"), makes and
frees temporaries, and catches an out-of-memory: the memory report's leak
view must show exactly the kept bytes at the allocating line.

python mem_leak.py [--wait-file PATH] [--keep N]

Prints READY once torch is imported; with --wait-file it then waits for
that file.  Prints one JSON line {"leak_bytes", "leak_line", "temp_line",
"oom_line", "oom"} and
leaves with os._exit(0): nothing is freed after the work (interpreter
finalization would free the kept tensors), so what is alive then is what
the report must list."""
import argparse
import json
import os
import sys
import time

import torch

KEEP_LINE = 27  # the line of torch.empty in make(): the allocating line
TEMP_LINE = 46  # the temporaries' line
OOM_LINE = 50  # the allocation that fails


def make(n):
    return torch.empty(n, dtype=torch.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wait-file")
    ap.add_argument("--keep", type=int, default=8)
    args = ap.parse_args()
    src = open(__file__).read().splitlines()
    assert "torch.empty(n" in src[KEEP_LINE - 1] and "torch.ones" in src[TEMP_LINE - 1], "line constants moved"
    assert "2**62" in src[OOM_LINE - 1], "line constants moved"
    print("READY", flush=True)
    if args.wait_file:
        while not os.path.exists(args.wait_file):
            time.sleep(0.01)
    keep = []
    for i in range(args.keep):
        keep.append(make(100_000 + 1000 * i))
    for _ in range(50):
        t = torch.ones(50_000)  # made and freed: never listed
        del t
    oom = False
    try:
        torch.empty(2**62, dtype=torch.uint8)
    except RuntimeError:
        oom = True
    leak_bytes = sum(t.numel() * t.element_size() for t in keep)
    print(json.dumps({"leak_bytes": leak_bytes, "leak_line": KEEP_LINE, "temp_line": TEMP_LINE, "oom_line": OOM_LINE,
                      "oom": oom}), flush=True)
    time.sleep(0.5)  # the last records reach the ring buffer before the exit
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
