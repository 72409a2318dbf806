"""A real Lightning training run for tests, demo and benchmarks.

Usage: python train_lightning.py [--profiler none|simple|advanced|pytorch] [--dirpath D --filename F]
       [--torch-profile FILE (torch.profiler around the whole fit; key_averages as JSON)]
       [--epochs N] [--batches N] [--hidden H] [--wait-file PATH] [--manual] [--val]

Prints READY once imports are done; with --wait-file it then waits for that
file to exist before calling Trainer.fit, so a tracer can attach first.
Works with both the `lightning` and the `pytorch_lightning` wheels.
"""
import argparse
import os
import sys
import time

try:
    import lightning.pytorch as pl
    from lightning.pytorch.profilers import AdvancedProfiler, PyTorchProfiler, SimpleProfiler
except ImportError:  # the pytorch-lightning wheel
    import pytorch_lightning as pl
    from pytorch_lightning.profilers import AdvancedProfiler, PyTorchProfiler, SimpleProfiler
import torch
from torch.utils.data import DataLoader, Dataset


class RandomDataset(Dataset):
    def __init__(self, size, length, delay=0.0):
        g = torch.Generator().manual_seed(0)
        self.data = torch.randn(length, size, generator=g)
        self.delay = delay

    def __getitem__(self, i):
        if self.delay:
            time.sleep(self.delay)  # a slow source: the loader waits (off-CPU)
        return self.data[i]

    def __len__(self):
        return len(self.data)


class Model(pl.LightningModule):
    def __init__(self, hidden=32, depth=1, manual=False):
        super().__init__()
        layers = [torch.nn.Linear(32, hidden)]
        for _ in range(depth - 1):
            layers += [torch.nn.ReLU(), torch.nn.Linear(hidden, hidden)]
        layers += [torch.nn.Linear(hidden, 2)]
        self.net = torch.nn.Sequential(*layers)
        self.manual = manual
        if manual:
            self.automatic_optimization = False

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        loss = self(batch).pow(2).mean()
        if self.manual:
            opt = self.optimizers()
            opt.zero_grad()
            self.manual_backward(loss)
            opt.step()
        return loss

    def validation_step(self, batch, batch_idx):
        return self(batch).pow(2).mean()

    def test_step(self, batch, batch_idx):
        return self(batch).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


class SteadyStateTimer(pl.Callback):
    """Times training steps after a warm-up, so Trainer set-up and the first
    (slow) iterations do not dilute a steps/s comparison."""

    def __init__(self, warmup):
        self.warmup = warmup
        self.t0 = None
        self.t1 = None
        self.steps = 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == self.warmup:
            self.t0 = time.perf_counter()
            self.steps = 0
        elif self.t0 is not None:
            self.steps += 1
            self.t1 = time.perf_counter()


class StepEnds(pl.Callback):
    """Each train batch's end, appended to `path` at each epoch's end
    (bench/inrun_ab.py: step times by window); with `stop_file`, the fit
    stops at the first epoch end after it exists."""

    def __init__(self, path, stop_file):
        self.path, self.stop_file, self.ends = path, stop_file, []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.ends.append(time.perf_counter())

    def on_train_epoch_end(self, trainer, pl_module):
        with open(self.path, "a") as f:
            f.write("".join(f"{t:.9f}\n" for t in self.ends))
        self.ends = []
        if self.stop_file and os.path.exists(self.stop_file):
            trainer.should_stop = True


def run_delay_s():
    """Seconds this thread has waited for a CPU while runnable (the run
    queue; /proc schedstat): what a busy machine adds to timings."""
    with open("/proc/thread-self/schedstat") as f:
        return int(f.read().split()[1]) * 1e-9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profiler", default="none", choices=["none", "simple", "advanced", "pytorch"])
    ap.add_argument("--torch-profile", help="run fit under torch.profiler (CPU) and write key_averages JSON here")
    ap.add_argument("--dirpath")
    ap.add_argument("--filename")
    ap.add_argument("--dump-stats", action="store_true", help="AdvancedProfiler(dump_stats=True): a .prof per action")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batches", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--depth", type=int, default=1)
    ap.add_argument("--wait-file")
    ap.add_argument("--data-delay", type=float, default=0.0, help="seconds each training sample takes to load")
    ap.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    ap.add_argument("--accelerator", default="cpu", help="cpu (default) or gpu")
    ap.add_argument("--manual", action="store_true")
    ap.add_argument("--val", action="store_true")
    ap.add_argument("--test", action="store_true", help="trainer.test() after fit: 4 batches of 8")
    ap.add_argument("--predict", action="store_true", help="trainer.predict() after fit (and test): 3 batches of 8")
    ap.add_argument("--loops", type=int, default=1, help="repeat fit N times (long-running target)")
    ap.add_argument("--until-file", help="keep repeating fit until this file exists")
    ap.add_argument("--warmup", type=int, default=0, help="report steady-state steps/s after this many steps")
    ap.add_argument("--step-times", help="append each train batch's end (time.perf_counter, s) to this file")
    args = ap.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    profiler = None
    if args.profiler == "simple":
        profiler = SimpleProfiler(dirpath=args.dirpath, filename=args.filename)
    elif args.profiler == "advanced":
        extra = {"dump_stats": True} if args.dump_stats else {}  # Lightning 2.4+
        profiler = AdvancedProfiler(dirpath=args.dirpath, filename=args.filename, **extra)
    elif args.profiler == "pytorch":
        profiler = PyTorchProfiler(dirpath=args.dirpath, filename=args.filename)
    n = args.batches * args.batch_size
    train = DataLoader(RandomDataset(32, n, args.data_delay), batch_size=args.batch_size, num_workers=args.workers)
    val = DataLoader(RandomDataset(32, n // 2), batch_size=args.batch_size) if args.val else None
    print("READY", os.getpid(), flush=True)
    if args.wait_file:
        while not os.path.exists(args.wait_file):
            time.sleep(0.01)
    result = None
    loop = 0
    if args.torch_profile:
        # Everything after the release, as an attached ltrace-bpf sees it.
        from torch.profiler import ProfilerActivity, profile

        prof = profile(activities=[ProfilerActivity.CPU])
        prof.__enter__()
        # What neighbours took from the profiled run: wall less this thread's CPU.
        wall0, cpu0 = time.perf_counter(), time.thread_time()
    while loop < args.loops or (args.until_file and not os.path.exists(args.until_file)):
        loop += 1
        torch.manual_seed(0)  # every loop computes the same result
        model = Model(args.hidden, args.depth, args.manual)
        timer = SteadyStateTimer(args.warmup) if args.warmup else None
        ends = StepEnds(args.step_times, args.until_file) if args.step_times else None
        trainer = pl.Trainer(
            callbacks=[c for c in (timer, ends) if c] or None,
            max_epochs=args.epochs,
            accelerator=args.accelerator,
            devices=1,
            profiler=profiler,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=2 if args.val else 0,
            limit_val_batches=4 if args.val else 0,
        )
        t0, d0 = time.perf_counter(), run_delay_s()
        trainer.fit(model, train, val)
        dt = time.perf_counter() - t0
        print(f"RUN_DELAY fit={run_delay_s() - d0:.6f}", flush=True)
        if args.test:
            trainer.test(model, DataLoader(RandomDataset(32, 32), batch_size=8), verbose=False)
        if args.predict:
            trainer.predict(model, DataLoader(RandomDataset(32, 24), batch_size=8), return_predictions=False)
        w = model.net[0].weight.detach()
        result = float(w.sum())
        steps = trainer.global_step
        print(f"FIT_DONE steps={steps} seconds={dt:.6f} steps_per_s={steps / dt:.3f} weight_sum={result:.8f}",
              flush=True)
        if timer and timer.steps:
            print(f"STEADY steps={timer.steps} steps_per_s={timer.steps / (timer.t1 - timer.t0):.3f}", flush=True)
    if args.torch_profile:
        import json

        prof.__exit__(None, None, None)
        wall_s, cpu_s = time.perf_counter() - wall0, time.thread_time() - cpu0
        raw = {}
        for e in prof.profiler.kineto_results.events():
            raw[e.name()] = raw.get(e.name(), 0) + 1
        rows = {e.key: {"count": e.count, "cpu_time_total": e.cpu_time_total,
                        "self_cpu_time_total": e.self_cpu_time_total} for e in prof.key_averages()}
        with open(args.torch_profile, "w") as f:
            json.dump({"wall_s": wall_s, "cpu_s": cpu_s, "ops": rows, "raw_counts": raw}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
