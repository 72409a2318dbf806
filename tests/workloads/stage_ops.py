"""A real Lightning fit with validation inside the epoch (val_check_interval),
gradient accumulation, and a test run after fit, under torch.profiler in the
same process, for the per-stage op tables (issue: no training backward in the
validation table).

The reference: a batch begins with Lightning's fetch (next() on its
CombinedLoader), so the loaders here are plain iterables whose __next__
opens a record_function "ltb:<stage>" and then collates the batch (aten::stack
of its samples, as a DataLoader's default collate does), and the
LightningModule closes the scope in on_<stage>_batch_end (module hooks run
after the callbacks').  torch.profiler thus scopes each batch's collate,
transfer (Lightning's default: aten::to), hooks, step, backward and optimizer
update: what ltrace-bpf charges to a batch.  The scopes are made up front and
reused: in torch 1.13 constructing a record_function allocates a tensor
(aten::zeros), which would fall outside its own scope.  Writes, per stage and
for the ops outside every batch, the aten op counts torch.profiler recorded
(its events(), same-name parents merged as in its tables, and the raw
entries).

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


SCOPES = {}  # stage -> its reusable record_function (made before the profile starts)
OPEN = []  # the scope of the batch now running


class Batches:
    """A loader of n batches of 16 samples (made up front), collated as
    each is fetched, inside the reference scope of its batch."""

    def __init__(self, n, seed, stage):
        g = torch.Generator().manual_seed(seed)
        self.samples = [[(torch.randn(32, generator=g), torch.randint(0, 4, (), generator=g)) for _ in range(16)]
                        for _ in range(n)]
        self.stage = stage
        SCOPES.setdefault(stage, record_function("ltb:" + stage))

    def __len__(self):
        return len(self.samples)

    def __iter__(self):
        for samples in self.samples:
            assert not OPEN, "a batch scope is still open"
            OPEN.append(SCOPES[self.stage].__enter__())
            yield torch.stack([x for x, _ in samples]), torch.stack([y for _, y in samples])


class Model(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(32, 64)
        self.norm = torch.nn.LayerNorm(64)
        self.l2 = torch.nn.Linear(64, 4)

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

    def _close(self):
        if OPEN:
            OPEN.pop().__exit__(None, None, None)

    def on_train_batch_end(self, *a, **k):
        self._close()

    def on_validation_batch_end(self, *a, **k):
        self._close()

    def on_test_batch_end(self, *a, **k):
        self._close()


def loader(n, seed, stage):
    return Batches(n, seed, stage)


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
                          val_check_interval=0.5, accumulate_grad_batches=2, limit_val_batches=3)

    train, val, test = loader(a.batches, 1, "train"), loader(4, 2, "validation"), loader(3, 3, "test")
    prof = None
    if a.out:
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        prof.__enter__()
    trainer().fit(model, train, val)
    trainer().test(model, test, verbose=False)
    if prof is not None:
        prof.__exit__(None, None, None)
        merged, raw = {}, {}
        for ev in prof.events():
            if ev.name.startswith("aten::"):
                d = merged.setdefault(stage_of(ev), {})
                d[ev.name] = d.get(ev.name, 0) + 1
        # Raw entries (before torch merges an op into a same-named parent)
        # and torch's merge on the real nesting (what ltrace-bpf must
        # count), each in the batch scope that encloses it.
        from torch_merge import merged_nodes
        raw, exact, ties = {}, {}, {}
        for _, _, _, name, dropped, tie, scopes in merged_nodes(prof.profiler.kineto_results):
            if not name.startswith("aten::"):
                continue
            stage = next((s[4:] for s in reversed(scopes) if s.startswith("ltb:")), "outside")
            for table, counted in ((raw, True), (exact, not dropped), (ties, tie)):
                if counted:
                    d = table.setdefault(stage, {})
                    d[name] = d.get(name, 0) + 1
        with open(a.out, "w") as f:
            json.dump({"merged": merged, "raw": raw, "exact_merged": exact, "merge_ties": ties,
                       "step_functions": STAGES}, f)
    print("RESULT %.6f" % float(sum(p.detach().double().sum() for p in model.parameters())), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
