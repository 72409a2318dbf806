"""A Lightning fit for watch mode's tests: steady steps, one slow step, one
stall, then a failed exit -- each a trigger, at a known step.

Usage: python watch_job.py --wait-file PATH [--steps N] [--slow-step I --slow-s S]
       [--stall-step J --stall-s T] [--exit-code C] [--step-s D] [--times FILE] [--leak-mb M]

Prints READY once imports are done, waits for PATH to exist, runs the fit
(each training step sleeps D seconds: a steady median), then exits with C.
--leak-mb M [--leak-torch]: each step keeps M MiB more (a leak; of CPU
tensors with --leak-torch, else of bytes).
--times FILE: each step's time, start to next start (bench/watch.py).
--progress FILE: each training step's index appended as it starts (a test
waits on it for steps to have run, not for a guessed time).
--op-ms M: each training step also runs one aten::cumsum sized (before
READY) to take about M ms here; prints a JSON line {"op_s": ..., "op_cpu_s": ...}:
the seconds those calls took, timed around them here, and their thread's
CPU seconds in them.
--ckpt-every N --ckpt-mb M: a checkpoint every N training steps, of a model
holding M MiB more; prints a JSON line {"ckpt_s": ..., "saves": ...}: the
seconds the checkpoint callback's on_train_batch_end took (the saves and the
removal of each one's predecessor), timed here.
--log-calls N: each training step calls self.log() for N values; prints a
JSON line {"log_s": ..., "log_cpu_s": ..., "log_steps": ...}: the seconds
those calls took, and their thread's CPU seconds in them.
--oom-step K: training step K asks torch for a 1 TiB tensor, catches the
allocator's out-of-memory error and goes on (as a job that retries with a
smaller batch does); prints "OOM caught: ...".
--raise-after: after the fit, a trainer.validate in dataloader_iter mode
whose validation_step takes two batches a call from three, so that its
second call's next() raises StopIteration, which the loop catches (the
data's end: no exception escaped; prints "VALIDATE DONE"); then a second
fit whose first training step raises (an exception that escapes
Lightning's loop); the script catches it, prints "FIT RAISED: ..." and goes
on to exit as asked.
--gc-collect [--gc-heap N] [--gc-every K]: each (K-th) training step calls
gc.collect() (with N live dicts for it to scan); prints a JSON line {"gc_s": ..., "gc_calls": ...}:
the seconds those calls took, timed around them here.
--val-every K --val-batches N --val-s S: a validation of N batches every K
training steps, each validation_step sleeping S seconds; --optimizer-ms M:
the optimizer's step() spends M ms more after its closure (a slow
optimizer: a sleep, as a parameter server's round trip); --hook-ms M: a
callback's on_train_batch_end spends M ms.  Each prints a JSON line of the
seconds it took, timed here ("val_s", "opt_s", "hook_s"), and "span_s":
the first training step's start to the last step's end (train or
validation), and "train_steps".
"""
import json
import argparse
import gc
import os
import shutil
import sys
import tempfile
import time
import traceback

try:
    import lightning.pytorch as pl
except ImportError:
    import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset


def stalled_here(seconds):
    # The stall's frame: the watcher's thread dump names this function.
    # A child waits as long beside it (as a DataLoader worker the loop
    # would wait for): the stall's dump reads the job's children too.
    child = os.fork()
    if child == 0:
        child_stalled_here(seconds)
        os._exit(0)
    time.sleep(seconds)
    os.waitpid(child, 0)


def child_stalled_here(seconds):
    time.sleep(seconds)


class Model(pl.LightningModule):
    def __init__(self, args):
        super().__init__()
        self.net = torch.nn.Linear(8, 2)
        self.args = args
        if args.ckpt_mb:  # saved with the model, never trained
            self.register_buffer("ballast", torch.ones(args.ckpt_mb << 18))

    starts = []
    kept = []  # --leak-mb: what each step keeps (resident: filled, not zero pages)
    heap = []  # --gc-heap: live objects every full collection scans
    gc_s = []  # --gc-collect: each step's gc.collect(), timed
    log_s = []  # --log-calls: each step's self.log calls, timed
    log_cpu_s = []  # ...and their thread's CPU time (what stack samples estimate)
    op_input = None  # --op-ms: the cumsum's input
    op_s = []
    op_cpu_s = []  # ...their thread's CPU time (what on-CPU stack samples estimate)
    ends = []  # each training and validation step's end (span_s)
    val_s = []  # --val-s: each validation_step's sleep, timed

    def training_step(self, batch, batch_idx):
        a = self.args
        Model.starts.append(time.perf_counter())
        if a.leak_mb and a.leak_torch:
            Model.kept.append(torch.ones(a.leak_mb << 18))  # float32: resident, through torch's allocator
        elif a.leak_mb:
            Model.kept.append(b"\x01" * (a.leak_mb << 20))
        if a.gc_collect and batch_idx % a.gc_every == 0:
            # A full collection each step, as some training loops call: its
            # time grows with the live objects it scans (--gc-heap).
            t0 = time.perf_counter()
            gc.collect()
            Model.gc_s.append(time.perf_counter() - t0)
        if a.log_calls:
            # Metric logging, as a training_step that logs many values does.
            t0, c0 = time.perf_counter(), time.thread_time()
            for i in range(a.log_calls):
                self.log(f"metric_{i}", float(batch_idx + i), on_step=True, on_epoch=True)
            Model.log_s.append(time.perf_counter() - t0)
            Model.log_cpu_s.append(time.thread_time() - c0)
        time.sleep(a.step_s)
        if a.progress:
            with open(a.progress, "a") as f:
                f.write(f"{batch_idx}\n")
        if Model.op_input is not None:
            t0, c0 = time.perf_counter(), time.thread_time()
            torch.cumsum(Model.op_input, 0)
            Model.op_s.append(time.perf_counter() - t0)
            Model.op_cpu_s.append(time.thread_time() - c0)
        if batch_idx == a.slow_step:
            time.sleep(a.slow_s)
        if batch_idx == a.stall_step:
            stalled_here(a.stall_s)
        if batch_idx == a.oom_step:
            try:
                torch.empty(1 << 40, dtype=torch.uint8)
            except RuntimeError as e:
                print("OOM caught:", str(e).splitlines()[0][:120], flush=True)
        return self.net(batch[0]).pow(2).mean()

    def on_train_batch_end(self, outputs, batch, batch_idx):
        Model.ends.append(time.perf_counter())

    def configure_optimizers(self):
        if self.args.optimizer_ms:
            return SlowSGD(self.parameters(), lr=0.01, extra_s=self.args.optimizer_ms / 1e3)
        return torch.optim.SGD(self.parameters(), lr=0.01)


class Validated(Model):
    """--val-every: a validation_step (defined only then: the other runs
    have no validation loop to be told of)."""
    def validation_step(self, batch, batch_idx):
        t0 = time.perf_counter()
        time.sleep(self.args.val_s)
        Model.val_s.append(time.perf_counter() - t0)
        Model.ends.append(time.perf_counter())


class SlowSGD(torch.optim.SGD):
    """SGD whose step() waits extra_s more after its closure: the optimizer
    part of each training step grows by that."""
    spent = []

    def __init__(self, params, lr, extra_s):
        super().__init__(params, lr=lr)
        self.extra_s = extra_s

    def step(self, closure=None):
        loss = super().step(closure)
        t0 = time.perf_counter()
        time.sleep(self.extra_s)
        SlowSGD.spent.append(time.perf_counter() - t0)
        return loss


class SlowHook(pl.Callback):
    """A callback whose on_train_batch_end takes ms milliseconds."""
    spent = []

    def __init__(self, ms):
        self.s = ms / 1e3

    def on_train_batch_end(self, *args, **kwargs):
        t0 = time.perf_counter()
        time.sleep(self.s)
        SlowHook.spent.append(time.perf_counter() - t0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--wait-file", required=True)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--step-s", type=float, default=0.02)
    p.add_argument("--slow-step", type=int, default=-1)
    p.add_argument("--slow-s", type=float, default=1.0)
    p.add_argument("--stall-step", type=int, default=-1)
    p.add_argument("--stall-s", type=float, default=4.0)
    p.add_argument("--exit-code", type=int, default=0)
    p.add_argument("--oom-step", type=int, default=-1)
    p.add_argument("--raise-after", action="store_true")
    p.add_argument("--times")
    p.add_argument("--progress")
    p.add_argument("--leak-mb", type=int, default=0)
    p.add_argument("--leak-torch", action="store_true", help="--leak-mb as CPU tensors (torch's allocator)")
    p.add_argument("--ckpt-every", type=int, default=0)
    p.add_argument("--ckpt-mb", type=int, default=0)
    p.add_argument("--op-ms", type=float, default=0)
    p.add_argument("--gc-collect", action="store_true", help="gc.collect() in each training_step, timed")
    p.add_argument("--gc-heap", type=int, default=0, help="this many live container objects for it to scan")
    p.add_argument("--gc-every", type=int, default=1, help="--gc-collect in every Nth training_step only")
    p.add_argument("--log-calls", type=int, default=0, help="self.log() this many values in each training_step, timed")
    p.add_argument("--val-every", type=int, default=0, help="a validation every this many training steps")
    p.add_argument("--val-batches", type=int, default=5)
    p.add_argument("--val-s", type=float, default=0.01)
    p.add_argument("--optimizer-ms", type=float, default=0)
    p.add_argument("--hook-ms", type=float, default=0)
    a = p.parse_args()
    if a.op_ms:
        # Sized by the median of a few timed calls, doubling until one takes
        # the time asked (the machine's own speed, load included).
        n = 1 << 16
        while True:
            x = torch.ones(n)
            times = []
            for _ in range(5):
                t0 = time.perf_counter()
                torch.cumsum(x, 0)
                times.append(time.perf_counter() - t0)
            if sorted(times)[2] * 1e3 >= a.op_ms or n >= 1 << 28:
                break
            n *= 2
        Model.op_input = x
    if a.gc_heap:
        Model.heap = [{"i": i} for i in range(a.gc_heap)]
    data = TensorDataset(torch.randn(a.steps, 8))
    callbacks, saves, hook_s = [], [], []
    if a.ckpt_every:
        class TimedCheckpoint(pl.callbacks.ModelCheckpoint):
            def on_train_batch_end(self, *args, **kwargs):
                t0 = time.perf_counter()
                super().on_train_batch_end(*args, **kwargs)
                hook_s.append(time.perf_counter() - t0)

            def _save_checkpoint(self, trainer, filepath):
                super()._save_checkpoint(trainer, filepath)
                saves.append(filepath)

        callbacks.append(TimedCheckpoint(dirpath=tempfile.mkdtemp(prefix="ckpt-"), every_n_train_steps=a.ckpt_every,
                                         save_top_k=1))
    checkpointing = bool(callbacks)
    if a.hook_ms:
        callbacks.append(SlowHook(a.hook_ms))
    val = {}
    if a.val_every:
        val = {"val_check_interval": a.val_every, "limit_val_batches": a.val_batches}
    trainer = pl.Trainer(max_epochs=1, logger=False, enable_checkpointing=checkpointing, callbacks=callbacks,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                         accelerator="cpu", devices=1, **val)
    print("READY", flush=True)
    while not os.path.exists(a.wait_file):
        time.sleep(0.01)
    val_data = [DataLoader(TensorDataset(torch.randn(a.val_batches, 8)), batch_size=1)] if a.val_every else []
    trainer.fit((Validated if a.val_every else Model)(a), DataLoader(data, batch_size=1), *val_data)
    print("FIT DONE", flush=True)
    if a.raise_after:
        class IterValidated(Model):
            def validation_step(self, dataloader_iter):
                for _ in range(2):
                    next(dataloader_iter)

        checker = pl.Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
                             devices=1)
        checker.validate(IterValidated(a), DataLoader(TensorDataset(torch.randn(3, 8)), batch_size=1), verbose=False)
        print("VALIDATE DONE", flush=True)

        class Raising(Model):
            def training_step(self, batch, batch_idx):
                raise RuntimeError("raised in training_step")

        again = pl.Trainer(max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                           enable_model_summary=False, num_sanity_val_steps=0, accelerator="cpu", devices=1)
        try:
            again.fit(Raising(a), DataLoader(data, batch_size=1))
        except RuntimeError as e:
            traceback.print_exc()  # as scripts log what they caught: watch's exit capture reads it
            print("FIT RAISED:", e, flush=True)
    if a.ckpt_every:
        for cb in callbacks:
            shutil.rmtree(cb.dirpath, ignore_errors=True)
        print(json.dumps({"ckpt_s": sum(hook_s), "saves": len(saves)}), flush=True)
    if a.op_ms:
        print(json.dumps({"op_s": sum(Model.op_s), "op_cpu_s": sum(Model.op_cpu_s), "op_calls": len(Model.op_s)}),
              flush=True)
    if a.log_calls:
        print(json.dumps({"log_s": sum(Model.log_s), "log_cpu_s": sum(Model.log_cpu_s), "log_steps": len(Model.log_s)}),
              flush=True)
    if a.gc_collect:
        print(json.dumps({"gc_s": sum(Model.gc_s), "gc_calls": len(Model.gc_s)}), flush=True)
    spent = {}
    if a.val_every:
        spent["val_s"], spent["val_steps"] = sum(Model.val_s), len(Model.val_s)
    if a.optimizer_ms:
        spent["opt_s"] = sum(SlowSGD.spent)
    if a.hook_ms:
        spent["hook_s"] = sum(SlowHook.spent)
    if spent:
        spent["span_s"], spent["train_steps"] = max(Model.ends) - Model.starts[0], len(Model.starts)
        print(json.dumps(spent), flush=True)
    if a.times:
        s = Model.starts
        with open(a.times, "w") as f:
            f.write("\n".join(f"{b - e:.6f}" for e, b in zip(s, s[1:])) + "\n")
    sys.exit(a.exit_code)


if __name__ == "__main__":
    main()
