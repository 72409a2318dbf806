"""A CPython that imports torch only when told: READY, then (once --wait-file
exists) `import torch` and IMPORTED, then (once --ops-file exists) --n
aten::neg calls, NEGS_DONE, and it exits.  The tracer attached before the
import; the test waits for its probes between the two files."""
import argparse
import os
import time

ap = argparse.ArgumentParser()
ap.add_argument("--wait-file", required=True)
ap.add_argument("--ops-file", required=True)
ap.add_argument("--n", type=int, default=7)
a = ap.parse_args()
print("READY", os.getpid(), flush=True)
while not os.path.exists(a.wait_file):
    time.sleep(0.02)
import torch  # noqa: E402

print("IMPORTED", flush=True)
while not os.path.exists(a.ops_file):
    time.sleep(0.02)
x = torch.ones(3)
for _ in range(a.n):
    torch.neg(x)
print("NEGS_DONE", flush=True)
