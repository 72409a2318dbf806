"""A real Lightning fit of a model with nested submodules, for the op table's
[pl][profile] (and [pl][module]) rows: a Sequential inside a custom module,
a module called twice per forward, a module shared under two names (named
once, as named_modules() yields it), and a module never called.

--reference FILE runs the same fit under Lightning's PyTorchProfiler
(record_module_names=True; schedule=None, so torch records every step) and
writes its events whose names start with [pl] as JSON {name: calls}
(full names: the table cuts them at 55 characters).  --wait-file: print
READY and wait for the file before the fit (the tests attach meanwhile).  Prints RESULT with a checksum of the trained weights.
"""
import argparse
import json
import os
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

try:
    import lightning.pytorch as pl
    from lightning.pytorch.profilers import PyTorchProfiler
except ImportError:  # the standalone package
    import pytorch_lightning as pl
    from pytorch_lightning.profilers import PyTorchProfiler


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.seq = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))
        self.act = torch.nn.Tanh()

    def forward(self, x):
        return self.act(self.seq(self.act(x)))  # act: twice per forward


class Model(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = torch.nn.Linear(16, 2)
        self.unused = torch.nn.Dropout()
        self.alias = self.head  # the same module again: named once, as "head"

    def forward(self, x):
        return self.head(self.block(x))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.cross_entropy(self(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def loader(n, seed):
    g = torch.Generator().manual_seed(seed)
    return DataLoader(TensorDataset(torch.randn(n * 8, 16, generator=g), torch.randint(0, 2, (n * 8,), generator=g)),
                      batch_size=8)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reference", help="run under Lightning's PyTorchProfiler and write its [pl] rows here")
    ap.add_argument("--batches", type=int, default=6)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--wait-file")
    args = ap.parse_args()
    if args.wait_file:
        print("READY", flush=True)
        while not os.path.exists(args.wait_file):
            time.sleep(0.05)
    torch.manual_seed(0)
    profiler = None
    if args.reference:
        profiler = PyTorchProfiler(record_module_names=True, schedule=None, row_limit=-1, export_to_chrome=False,
                                   dirpath=None)
    trainer = pl.Trainer(max_epochs=args.epochs, limit_val_batches=2, num_sanity_val_steps=1, accelerator="cpu",
                         devices=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, profiler=profiler)
    model = Model()
    t0 = time.perf_counter()
    trainer.fit(model, loader(args.batches, 1), loader(2, 2))
    fit_seconds = time.perf_counter() - t0
    if args.reference:
        profiler.summary()
        rows = {}
        for e in profiler.function_events:
            if e.name.startswith("[pl]"):
                rows[e.name] = rows.get(e.name, 0) + 1
        with open(args.reference, "w") as f:
            json.dump(rows, f, indent=1)
    with torch.no_grad():
        print("RESULT", round(sum(float(p.sum()) for p in model.parameters()), 6), flush=True)
    print("SECONDS %.4f" % fit_seconds, flush=True)  # the fit alone (bench/module_names_cost.py)


if __name__ == "__main__":
    main()
