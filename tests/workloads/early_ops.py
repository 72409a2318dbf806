"""Ops right after `import torch`: what `run --report ops` must count from
the first one (the op probes go in while the import still runs).  Prints
OPS_DONE and the result."""
import torch

x = torch.ones(3)
y = x + x
z = torch.mul(y, 2)
print("OPS_DONE", float(z.sum()), flush=True)
