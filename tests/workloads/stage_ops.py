"""A real Lightning fit with validation inside the epoch (val_check_interval),
gradient accumulation, and a test run after fit, under torch.profiler in the
same process, for the per-stage op tables (issue: no training backward in the
validation table).

The reference: a callback opens a record_function "ltb:<stage>" in
on_<stage>_batch_start (it is the only callback, so it runs first) and the
LightningModule closes it in on_<stage>_batch_end (module hooks run after the
callbacks'), so torch.profiler scopes each batch's hooks, step, backward and
optimizer update.  Fetching and the batch transfer hold no aten op here (the
batches are made up front and transfer_batch_to_device is the identity), so
the reference and ltrace-bpf's batch (which starts at the fetch) hold the
same ops.  Writes, per stage and for the ops outside every batch, the aten
op counts torch.profiler recorded (its events(), same-name parents merged as
in its tables, and the raw entries).

Prints RESULT with a checksum of the trained weights.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.autograd.profiler import record_function

try:
    import lightning.pytorch as pl
except ImportError:  # the standalone package
    import pytorch_lightning as pl

STAGES = {"train": "training_step", "validation": "validation_step", "test": "test_step"}


class Batches(torch.utils.data.Dataset):
    """Whole batches made up front: fetching one runs no aten op."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.items = [(torch.randn(16, 32, generator=g), torch.randint(0, 4, (16,), generator=g)) for _ in range(n)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


class Scopes(pl.Callback):
    """Opens the reference scope of each batch (closed by the module)."""

    def __init__(self, module):
        self.module = module

    def _open(self, stage):
        assert self.module.scope is None, "a batch scope is still open"
        self.module.scope = record_function("ltb:" + stage)
        self.module.scope.__enter__()

    def on_train_batch_start(self, *a, **k):
        self._open("train")

    def on_validation_batch_start(self, *a, **k):
        self._open("validation")

    def on_test_batch_start(self, *a, **k):
        self._open("test")


class Model(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(32, 64)
        self.norm = torch.nn.LayerNorm(64)
        self.l2 = torch.nn.Linear(64, 4)
        self.scope = None

    def forward(self, x):
        return self.l2(self.norm(F.relu(self.l1(x))))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x), y)

    def test_step(self, batch, batch_idx):
        x, y = batch
        return (self(x).argmax(dim=1) == y).float().mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)

    def transfer_batch_to_device(self, batch, device, dataloader_idx):
        return batch  # CPU already: no aten::to in the fetch

    def _close(self):
        if self.scope is not None:
            self.scope.__exit__(None, None, None)
            self.scope = None

    def on_train_batch_end(self, *a, **k):
        self._close()

    def on_validation_batch_end(self, *a, **k):
        self._close()

    def on_test_batch_end(self, *a, **k):
        self._close()


def loader(n, seed):
    return torch.utils.data.DataLoader(Batches(n, seed), batch_size=None, shuffle=False)


def stage_of(ev):
    e = ev
    while e is not None:
        if e.name.startswith("ltb:"):
            return e.name[4:]
        e = e.cpu_parent
    return "outside"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", help="write torch.profiler's counts here (JSON)")
    ap.add_argument("--batches", type=int, default=8)
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Model()

    def trainer():
        return pl.Trainer(max_epochs=2, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                          enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=2,
                          val_check_interval=0.5, accumulate_grad_batches=2, limit_val_batches=3,
                          callbacks=[Scopes(model)])

    prof = None
    if a.out:
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        prof.__enter__()
    trainer().fit(model, loader(a.batches, 1), loader(4, 2))
    trainer().test(model, loader(3, 3), verbose=False)
    if prof is not None:
        prof.__exit__(None, None, None)
        merged, raw = {}, {}
        for ev in prof.events():
            if ev.name.startswith("aten::"):
                d = merged.setdefault(stage_of(ev), {})
                d[ev.name] = d.get(ev.name, 0) + 1
        # Raw entries (before torch merges an op into a same-named parent),
        # by time: inside which scope on the same thread.
        scopes, ops = [], []
        for e in prof.profiler.kineto_results.events():
            start = e.start_ns() if hasattr(e, "start_ns") else e.start_us() * 1000
            dur = e.duration_ns() if hasattr(e, "duration_ns") else e.duration_us() * 1000
            item = (start, start + dur, e.start_thread_id(), e.name())
            (scopes if e.name().startswith("ltb:") else ops).append(item)
        for start, end, tid, name in ops:
            if not name.startswith("aten::"):
                continue
            stage = next((s[3][4:] for s in scopes if s[2] == tid and s[0] <= start and end <= s[1]), "outside")
            d = raw.setdefault(stage, {})
            d[name] = d.get(name, 0) + 1
        with open(a.out, "w") as f:
            json.dump({"merged": merged, "raw": raw, "step_functions": STAGES}, f)
    print("RESULT %.6f" % float(sum(p.detach().double().sum() for p in model.parameters())), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
