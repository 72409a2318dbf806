"""A real pytorch_lightning Trainer.fit of a small MLP on torch_xla's CPU PJRT
device (synthetic data, fixed seed), for profiling XLA jobs without a TPU.

Needs the venv of .ci/requirements-xla.txt (torch, torch_xla, Lightning).
PJRT_DEVICE=CPU is set here when unset, before torch_xla is imported.

Lightning's XLAAccelerator ("tpu") refuses the CPU PJRT device: it counts TPU
chips on the PCI bus (and asks the GCE metadata server for the TPU version),
finds none and reports itself unavailable.  So there are two ways in:

  --path strategy (default)  Lightning's own XLA code: SingleDeviceXLAStrategy
      and XLAPrecision (whose optimizer_step calls xm.mark_step), with an
      XLAAccelerator subclass that only overrides device discovery (1 device).
  --path hooks               accelerator="cpu"; the module moves to xla in
      on_fit_start (the optimizer's params are swapped for the moved ones),
      transfer_batch_to_device moves batches, optimizer_step marks the step.

Either way: one mark_step per optimizer step (plus one per validation batch
with --val).  --recompile-at K: from training step K on the batch size is
another one, so step K traces a new graph and compiles it.  --wait-stdin:
print "READY <pid>" and wait for a line on stdin before the fit.  Prints one
JSON line at the end with torch_xla's metrics read in this process.  They
include Lightning's teardown (the model back to the CPU: one TransferFromDevice
per parameter and gradient) and, on --path strategy, the small graphs that
Lightning's has_len_all_ranks runs and reads back (2 of the uncached compiles).
"""
import argparse
import json
import os
import sys
import time

os.environ.setdefault("PJRT_DEVICE", "CPU")

_t0 = time.perf_counter()
import torch  # noqa: E402
_t1 = time.perf_counter()
import torch_xla  # noqa: E402
import torch_xla.core.xla_model as xm  # noqa: E402
import torch_xla.debug.metrics as met  # noqa: E402
import torch_xla.runtime as xr  # noqa: E402
_t2 = time.perf_counter()
import pytorch_lightning as pl  # noqa: E402
from pytorch_lightning.accelerators import XLAAccelerator  # noqa: E402
from pytorch_lightning.plugins.precision import XLAPrecision  # noqa: E402
from pytorch_lightning.strategies import SingleDeviceXLAStrategy  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402
_t3 = time.perf_counter()

IN, HIDDEN, OUT = 32, 64, 4
MARK_STEPS = 0


def mark_step():
    global MARK_STEPS
    MARK_STEPS += 1
    xm.mark_step()


class OneXLADevice(XLAAccelerator):
    """XLAAccelerator minus the TPU discovery: one device, whatever PJRT_DEVICE is."""

    @staticmethod
    def is_available():
        return True

    @staticmethod
    def auto_device_count():
        return 1

    @staticmethod
    def parse_devices(devices):
        return 1

    @staticmethod
    def get_parallel_devices(devices):
        return [torch.device("xla", 0)]


class CountingXLAPrecision(XLAPrecision):
    """Lightning's XLAPrecision (it calls xm.mark_step after optimizer.step); counts those."""

    def optimizer_step(self, *args, **kwargs):
        global MARK_STEPS
        MARK_STEPS += 1
        return super().optimizer_step(*args, **kwargs)


class MLP(pl.LightningModule):
    def __init__(self, path):
        super().__init__()
        self.path = path
        self.net = torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.ReLU(),
                                       torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.ReLU(),
                                       torch.nn.Linear(HIDDEN, OUT))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        self.seen_device = str(x.device)
        return torch.nn.functional.cross_entropy(self(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self(x), y)

    def on_validation_batch_end(self, outputs, batch, batch_idx, dataloader_idx=0):
        mark_step()  # nothing else cuts the validation graph

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)

    # --path hooks only: the module lives on xla though the accelerator is "cpu"
    def on_fit_start(self):
        if self.path != "hooks":
            return
        old = list(self.parameters())
        self.to(torch_xla.device())
        new = {id(o): n for o, n in zip(old, self.parameters())}
        for opt in self.trainer.optimizers:  # keep the optimizer on the moved params
            for group in opt.param_groups:
                group["params"] = [new[id(p)] for p in group["params"]]

    def transfer_batch_to_device(self, batch, device, dataloader_idx):
        if self.path == "hooks":
            device = torch_xla.device()
        return super().transfer_batch_to_device(batch, device, dataloader_idx)

    def optimizer_step(self, epoch, batch_idx, optimizer, optimizer_closure=None):
        super().optimizer_step(epoch, batch_idx, optimizer, optimizer_closure)
        if self.path == "hooks":
            mark_step()


def loader(n_batches, batch, batch2=None, switch_at=None, seed=0):
    """n_batches batches of `batch` rows; from batch index switch_at on, of batch2 rows."""
    sizes = [batch2 if switch_at is not None and i >= switch_at else batch for i in range(n_batches)]
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(sum(sizes), IN, generator=g)
    y = torch.randint(0, OUT, (sum(sizes),), generator=g)
    batches, start = [], 0
    for s in sizes:
        batches.append(list(range(start, start + s)))
        start += s
    return DataLoader(TensorDataset(x, y), batch_sampler=batches)


def metric(name):
    data = met.metric_data(name)
    if data is None:
        return {"count": None, "total": None}
    return {"count": data[0], "total": data[1]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=20, help="optimizer steps (default 20)")
    ap.add_argument("--batch", type=int, default=16, help="batch size (default 16)")
    ap.add_argument("--recompile-at", type=int, metavar="K",
                    help="from training step K (0-based) on, use batch size 2*B: step K recompiles")
    ap.add_argument("--val", action="store_true", help="also run 2 validation batches after training")
    ap.add_argument("--path", choices=("strategy", "hooks"), default="strategy")
    ap.add_argument("--wait-stdin", action="store_true", help="print READY <pid>, wait for a stdin line")
    ap.add_argument("--wait-file", metavar="PATH",
                    help="print READY <pid>, wait until PATH exists (the tests' attach fixture)")
    args = ap.parse_args()

    torch.manual_seed(0)
    model = MLP(args.path)
    train = loader(args.steps, args.batch, 2 * args.batch, args.recompile_at, seed=1)
    val = loader(2, args.batch, seed=2) if args.val else None
    common = dict(max_steps=args.steps, max_epochs=1, devices=1, logger=False, enable_checkpointing=False,
                  enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                  limit_val_batches=2 if args.val else 0)
    if args.path == "strategy":
        # Lightning picks SingleDeviceXLAStrategy itself for an XLAAccelerator
        trainer = pl.Trainer(accelerator=OneXLADevice(), plugins=[CountingXLAPrecision()], **common)
        assert isinstance(trainer.strategy, SingleDeviceXLAStrategy), trainer.strategy
    else:
        trainer = pl.Trainer(accelerator="cpu", **common)

    if args.wait_stdin:
        print(f"READY {os.getpid()}", flush=True)
        sys.stdin.readline()
    elif args.wait_file:
        print(f"READY {os.getpid()}", flush=True)
        while not os.path.exists(args.wait_file):
            time.sleep(0.01)
    t = time.perf_counter()
    trainer.fit(model, train, val)
    fit_s = time.perf_counter() - t

    counters = {c: met.counter_value(c) for c in ("CachedCompile", "UncachedCompile", "MarkStep")}
    metrics = {m: metric(m) for m in ("CompileTime", "ExecuteTime", "TransferToDeviceTime",
                                      "TransferFromDeviceTime", "InboundData", "OutboundData")}
    # Lightning's teardown has moved the model back to the CPU: no transfer here
    checksum = sum(float(p.detach().cpu().double().abs().sum()) for p in model.parameters())
    print(json.dumps({
        "torch_xla": torch_xla.__version__, "torch": torch.__version__, "pl": pl.__version__,
        "device_type": xr.device_type(), "batch_device": model.seen_device, "path": args.path,
        "steps": trainer.global_step, "batch": args.batch, "recompile_at": args.recompile_at, "val": args.val,
        "mark_steps": MARK_STEPS, "counters": counters, "metrics": metrics,
        "import_s": {"torch": round(_t1 - _t0, 3), "torch_xla": round(_t2 - _t1, 3), "pl": round(_t3 - _t2, 3)},
        "fit_s": round(fit_s, 3), "weights_abs_sum": round(checksum, 6),
    }), flush=True)


if __name__ == "__main__":
    main()
