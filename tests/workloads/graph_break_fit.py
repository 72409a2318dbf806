"""A real Lightning fit whose network is torch.compile'd with a graph break
in its forward: between its two graphs it calls a function Dynamo may not
trace (torch.compiler.disable'd), which runs HOST_MS of plain Python on the
host, as a print, a numpy call or a data-dependent branch would.  With
--no-break the same network has no such call (one graph, healthy).

The network is compiled and warmed (forward and backward: both graphs)
before READY, so the tracer attaches to a compiled job; --backend eager by
default (Dynamo's graphs run as they are: no inductor build to wait for).

After the fit it prints RESULT {"host_cpu_s": the thread CPU time the
breaking call took inside the train steps, "train_steps": how many,
"graph_breaks": Dynamo's own count}.
"""
import argparse
import json
import os
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

try:
    import lightning.pytorch as pl
except ImportError:  # the standalone package
    import pytorch_lightning as pl

BATCH = 32
BACKEND = ["eager"]
STATE = {"in_train": False, "host_cpu_s": 0.0, "host_ms": 5.0}


@torch.compiler.disable
def host_work(h):
    """Plain Python on the host between the two graphs: the break."""
    t0 = time.thread_time()
    while time.thread_time() - t0 < STATE["host_ms"] / 1e3:
        sum(range(200))
    if STATE["in_train"]:
        STATE["host_cpu_s"] += time.thread_time() - t0
    return h


class Net(torch.nn.Module):
    """fc1, the break, then LAYERS 512-wide layers in the second graph (about
    as long as the break on this machine: time in a graph is not the break's)."""

    def __init__(self, breaks, layers):
        super().__init__()
        self.fc1 = torch.nn.Linear(32, 512)
        self.body = torch.nn.Sequential(*[m for _ in range(layers) for m in (torch.nn.Linear(512, 512), torch.nn.ReLU())])
        self.fc2 = torch.nn.Linear(512, 4)
        self.breaks = breaks

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        if self.breaks:
            h = host_work(h)
        return torch.log_softmax(self.fc2(self.body(h)), dim=1)


class Model(pl.LightningModule):
    def __init__(self, breaks, layers):
        super().__init__()
        self.net = torch.compile(Net(breaks, layers), backend=BACKEND[0], dynamic=False)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.nll_loss(self.net(x), y)

    def on_train_batch_start(self, batch, batch_idx):
        STATE["in_train"] = True

    def on_train_batch_end(self, outputs, batch, batch_idx):
        STATE["in_train"] = False

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=60)
    ap.add_argument("--host-ms", type=float, default=5.0)
    ap.add_argument("--no-break", action="store_true")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--backend", default="eager", help="eager: no inductor build to wait for")
    ap.add_argument("--wait-file")
    args = ap.parse_args()
    STATE["host_ms"] = args.host_ms
    BACKEND[0] = args.backend
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = Model(not args.no_break, args.layers)
    x = torch.randn(BATCH, 32)
    model.net(x).sum().backward()  # both graphs compiled before the attach
    model.zero_grad(set_to_none=True)
    print("READY", os.getpid(), flush=True)
    if args.wait_file:
        while not os.path.exists(args.wait_file):
            time.sleep(0.01)
    g = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(args.batches * BATCH, 32, generator=g),
                         torch.randint(0, 4, (args.batches * BATCH,), generator=g))
    trainer = pl.Trainer(max_epochs=1, limit_val_batches=0, num_sanity_val_steps=0, accelerator="cpu", devices=1,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(model, DataLoader(data, batch_size=BATCH))
    from torch._dynamo.utils import counters

    print("RESULT", json.dumps({"host_cpu_s": STATE["host_cpu_s"], "train_steps": args.batches,
                                "graph_breaks": sum(counters["graph_break"].values())}), flush=True)


if __name__ == "__main__":
    main()
