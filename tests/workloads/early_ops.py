"""Ops right after `import torch`: what `run --report ops` must count from
the first one (the op probes go in while the import still runs).  Prints
OPS_DONE and the result.  With --then-wait-file F: then runs aten::neg
every 0.5 ms until F exists (the test makes it once the tracer's op
observer took over: calls run through the switch) and two more ops,
printing how many negs it ran (LOOP_NEGS) and MORE_DONE."""
import os
import sys
import time

import torch

x = torch.ones(3)
y = x + x
z = torch.mul(y, 2)
print("OPS_DONE", float(z.sum()), flush=True)

if "--then-wait-file" in sys.argv:
    go = sys.argv[sys.argv.index("--then-wait-file") + 1]
    deadline = time.time() + 300
    negs = 0
    while not os.path.exists(go) and time.time() < deadline:
        torch.neg(x)
        negs += 1
        time.sleep(0.0005)
    print("LOOP_NEGS", negs, flush=True)
    w = torch.sub(z, 1)
    print("MORE_DONE", float(torch.div(w, 2)[0]), flush=True)
