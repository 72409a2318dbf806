"""A real Lightning fit of a LightningModule whose network is torch.compile'd
(inductor on CPU, dynamic=False), for the compile section of the op report.

The network is compiled and warmed (forward and backward on a training
batch: graph 0/0) before READY, so a tracer attaches to an already-compiled
job.  The fit then recompiles twice, as real jobs do, while attached:
validation runs the network under no_grad (Dynamo's grad-mode guard fails:
a graph for inference), and each epoch's last training batch is smaller
(drop_last=False; the shape guard fails).

--profile FILE: run the fit under torch.profiler (CPU) and write its
"Torch-Compiled Region" and "## Call CompiledFxGraph" counts as JSON.
After the fit it prints one DYNAMO line per compile that Dynamo recorded
(torch._dynamo.utils._compilation_metrics: id, reason) and one DYNAMO_US
line (id, its duration_us) — the process's own account, which the tests
compare with what is read from outside — and
RESULT (a checksum of the trained weights, the same with and without a
tracer attached).  --linger SECS: stay that long after the fit.
"""
import argparse
import json
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

try:
    import lightning.pytorch as pl
except ImportError:  # the standalone package
    import pytorch_lightning as pl

BATCH = 32


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(32, 64)
        self.fc2 = torch.nn.Linear(64, 4)

    def forward(self, x):
        return torch.log_softmax(self.fc2(torch.relu(self.fc1(x)) * 0.5), dim=1)


class Model(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.compile(Net(), dynamic=False)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.nll_loss(self.net(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.nll_loss(self.net(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def loader(samples, seed):
    g = torch.Generator().manual_seed(seed)
    data = TensorDataset(torch.randn(samples, 32, generator=g), torch.randint(0, 4, (samples,), generator=g))
    return DataLoader(data, batch_size=BATCH)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=10, help="full training batches per epoch (plus a half one)")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--profile")
    ap.add_argument("--wait-file")
    ap.add_argument("--linger", type=float, default=0.0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = Model()
    # Graph 0/0 (training: grad on, full batch), compiled before anyone attaches.
    x = torch.randn(BATCH, 32)
    model.net(x).sum().backward()
    model.zero_grad(set_to_none=True)
    print("READY", os.getpid(), flush=True)
    if args.wait_file:
        while not os.path.exists(args.wait_file):
            time.sleep(0.01)
    trainer = pl.Trainer(max_epochs=args.epochs, limit_val_batches=1, num_sanity_val_steps=0, accelerator="cpu",
                         devices=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    train, val = loader(args.batches * BATCH + BATCH // 2, 1), loader(BATCH, 2)
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            trainer.fit(model, train, val)
        rows = {e.key: e.count for e in prof.key_averages()
                if e.key.startswith("Torch-Compiled Region") or e.key.startswith("## Call CompiledFxGraph")}
        with open(args.profile, "w") as f:
            json.dump(rows, f, indent=1)
    else:
        trainer.fit(model, train, val)
    import torch._dynamo.utils as dynamo_utils

    for m in dynamo_utils._compilation_metrics:
        reason = (m.recompile_reason or "").splitlines()
        print("DYNAMO\t%s\t%s" % (m.compile_id, reason[0] if reason else ""), flush=True)
        # Its duration as Dynamo recorded it (what the verdict reads from outside).
        print("DYNAMO_US\t%s\t%s" % (m.compile_id, getattr(m, "duration_us", None)), flush=True)
    with torch.no_grad():
        print("RESULT", round(sum(float(p.sum()) for p in model.parameters()), 6), flush=True)
    time.sleep(args.linger)
    sys.exit(0)


if __name__ == "__main__":
    main()
