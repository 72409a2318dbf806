"""What a DataLoader worker's hand-over of a batch costs the training
process (issue 34: the input-bound finding's floor, kInputBoundMinMs in
reports/verdict/findings.h).

usage: .venv/bin/python bench/loader_handover.py

A TensorDataset of small rows in batches of 64, loaded with num_workers 0,
1 and 2 (persistent workers); between two next() calls the loop does a
256x256 matmul, a model step's worth of other work, so that workers can
run ahead. Prints the median time of next() in the loop, three runs of 300
batches each per setting: with workers, what is left in the loop is the
hand-over (a queue get, the batch's tensors taken from shared memory).
"""
import time, torch, statistics
from torch.utils.data import DataLoader, TensorDataset
ds = TensorDataset(torch.randn(64 * 400, 32), torch.randn(64 * 400, 1))
for nw in (0, 1, 2):
    dl = DataLoader(ds, batch_size=64, num_workers=nw, persistent_workers=nw > 0)
    res = []
    for rep in range(3):
        it = iter(dl)
        next(it)
        times = []
        for _ in range(300):
            t = time.perf_counter(); next(it); times.append(time.perf_counter() - t)
            # a model step's worth of other work, so workers can run ahead
            x = torch.randn(256, 256); x @ x
        res.append(statistics.median(times) * 1e3)
    print(nw, "median next() ms per batch:", [round(r, 3) for r in res])
