"""GPU-machine check for issue 33's GPU memory triggers (not part of CI: CI has no GPU).

Written 2026-12-06 without a GPU, never run yet. Run it through the device
tool when a task has one:
    here:   make static bridge     (build/ltrace-bpf-static)
    there:  python3 tests/gpu/watch_check.py     (LT=path, PY=python)

One real Lightning fit on CUDA under `watch` (its cheap tier: NVML device
samples, the allocator's out-of-memory hooks):
  grow   training steps 10-29 each keep GROW_MB MiB more of CUDA tensors
         (the classic leak: a list of tensors that is never emptied); the
         caching allocator reserves it from the driver, NVML counts it in
         the process's GPU memory.
         Expected: one memory capture whose summary says "GPU memory on
         CUDA:0 grew from".
  oom    training step 40 asks for a 1 PiB CUDA tensor and catches torch's
         OutOfMemoryError (reportOutOfMemoryToProfiler runs first).
         Expected: one memory capture whose summary says "out of memory: an
         allocation of 1048576.00 GiB on CUDA:0 failed".
The fit then ends with status 0 (the job is unharmed).
Prints one line per check and a verdict line: WATCH_CHECK ok=<n>/<n>.
"""
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LT = os.environ.get("LT", os.path.join(ROOT, "build", "ltrace-bpf-static"))
PY = os.environ.get("PY", sys.executable)
GROW_MB = int(os.environ.get("GROW_MB", "64"))

JOB = r"""
import os, sys, time, torch
try:
    import lightning.pytorch as pl
except ImportError:
    import pytorch_lightning as pl
from torch.utils.data import DataLoader, TensorDataset

from gpu_check_common import Checks, wait_for
go, grow_mb = sys.argv[1], int(sys.argv[2])
kept = []

class M(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(256, 256)
    def training_step(self, batch, i):
        x, = batch
        if 10 <= i < 30:
            kept.append(torch.ones(grow_mb << 18, device="cuda"))  # float32: grow_mb MiB
        if i == 40:
            try:
                torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
            except torch.cuda.OutOfMemoryError as e:
                print("OOM caught:", str(e).splitlines()[0][:120], flush=True)
        time.sleep(0.05)
        return self.lin(x).pow(2).mean()
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

data = DataLoader(TensorDataset(torch.randn(60 * 32, 256)), batch_size=32)
model = M()
torch.zeros(1, device="cuda")  # the CUDA context before the watcher's first sample
print("READY", os.getpid(), flush=True)
while not os.path.exists(go):
    time.sleep(0.01)
trainer = pl.Trainer(max_epochs=1, accelerator="gpu", devices=1, logger=False, enable_checkpointing=False,
                     enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)
trainer.fit(model, data)
print("FIT DONE", flush=True)
"""


def main():
    work = tempfile.mkdtemp(prefix="lt-gpu-watch-")
    checks = Checks()
    check = checks.check

    go, log, lt_err = (os.path.join(work, n) for n in ("go", "job.log", "lt.err"))
    with open(log, "w") as f:
        job = subprocess.Popen([PY, "-c", JOB, go, str(GROW_MB)], stdout=f, stderr=subprocess.STDOUT)
    if not wait_for(log, "READY", job, 600):
        print("job did not start:", open(log).read()[-3000:])
        return 1
    with open(lt_err, "w") as e:
        lt = subprocess.Popen([LT, "watch", "--pid", str(job.pid), "-v", "--dir", os.path.join(work, "w"),
                               "--capture-before", "5s", "--capture-after", "1s", "--memory-growth", "25",
                               "--memory-floor", "100M"], stdout=subprocess.DEVNULL, stderr=e)
    if not wait_for(lt_err, "attached", lt, 120):
        print("ltrace-bpf did not attach:", open(lt_err).read()[-2000:])
        job.kill()
        return 1
    open(go, "w").close()
    rc = job.wait(600)
    lt_rc = lt.wait(300)
    out, err = open(log).read(), open(lt_err).read()
    print(err[-4000:])
    check("the job is unharmed", rc == 0 and "FIT DONE" in out and "OOM caught" in out,
          f"rc {rc}, watcher rc {lt_rc}; {out[-400:]!r}")
    summaries = [x for x in err.splitlines() if "watch: summary: memory" in x]
    grew = [x for x in summaries if "GPU memory on CUDA:0 grew from" in x]
    check("grow: one GPU memory capture", len(grew) == 1, grew or summaries)
    oom = [x for x in summaries if "out of memory: an allocation of 1048576.00 GiB on CUDA:0 failed" in x]
    check("oom: one CUDA out-of-memory capture", len(oom) == 1, oom or summaries)
    print(f"WATCH_CHECK ok={checks.ok}/{checks.total} (work dir {work})")
    return 0 if checks.all_ok() else 1


if __name__ == "__main__":
    sys.exit(main())
