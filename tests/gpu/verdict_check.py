"""GPU-machine check for issue 34's GPU findings (not part of CI: CI has no GPU).

Written 2026-12-06 without a GPU, never run yet. Run it through the device
tool when a task has one:
    here:   make static bridge     (build/ltrace-bpf-static, build/libltrace-bridge.so)
    there:  python3 tests/gpu/verdict_check.py     (LT=path, PY=python)

Three real Lightning fits on CUDA, each attached from its start file with
`--report verdict` (CUPTI through the bridge) and left to end on its own:
  sync   every training step runs a large matmul, then `.item()` on its
         result: the host waits for the GPU in cudaStreamSynchronize (or
         cudaMemcpy) once a step. The job times each `.item()` itself.
         Expected: "host-device sync" ranked first, its ms per step within
         -50 %/+50 % of the job's own mean wait (the finding counts the
         wait inside the synchronising call; the job's timing adds the
         Python call around it).
  tiny   every training step runs TINY tiny elementwise kernels on a small
         tensor: the GPU idles between launches. Expected: "launch-bound"
         ranked first.
  busy   every training step runs a few large matmuls, no sync beyond
         Lightning's own loss: no "host-device sync", "launch-bound" or
         "gpu-idle" finding (the healthy case).
Prints one line per check and a verdict line: VERDICT_CHECK ok=<n>/<n>.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LT = os.environ.get("LT", os.path.join(ROOT, "build", "ltrace-bpf-static"))
PY = os.environ.get("PY", sys.executable)
STEPS = int(os.environ.get("STEPS", "60"))
TINY = int(os.environ.get("TINY", "300"))

JOB = r"""
import json, os, sys, time, torch
try:
    import lightning.pytorch as pl
except ImportError:
    import pytorch_lightning as pl
from torch.utils.data import DataLoader, TensorDataset

from gpu_check_common import Checks, wait_for
go, mode, steps, tiny, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
waits = []

class M(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(256, 256)
        self.big = torch.randn(4096, 4096, device="cuda")
        self.small = torch.randn(64, device="cuda")
    def training_step(self, batch, i):
        x, = batch
        loss = self.lin(x).pow(2).mean()
        if mode == "sync":
            y = self.big @ self.big                  # ~ms of GPU work
            t0 = time.perf_counter()
            float(y[0, 0].item())                    # the host waits for it
            waits.append(time.perf_counter() - t0)
        elif mode == "tiny":
            s = self.small
            for _ in range(tiny):                    # launch-bound: tiny kernels
                s = s * 1.0001
            loss = loss + s.sum() * 0
        else:
            y = self.big @ self.big
            y = y @ self.big
            loss = loss + y[0, 0] * 0
        return loss
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

data = DataLoader(TensorDataset(torch.randn(steps * 32, 256)), batch_size=32)
model = M()
print("READY", os.getpid(), flush=True)
while not os.path.exists(go):
    time.sleep(0.01)
trainer = pl.Trainer(max_epochs=1, accelerator="gpu", devices=1, logger=False, enable_checkpointing=False,
                     enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)
trainer.fit(model, data)
json.dump({"mean_wait_ms": 1e3 * sum(waits[1:]) / max(1, len(waits) - 1), "steps": steps}, open(out, "w"))
print("DONE", flush=True)
"""


def fit(work, mode):
    """Runs one fit under ltrace-bpf; returns (ranked findings, the job's numbers, the report)."""
    go, res, log = (os.path.join(work, f"{mode}.{n}") for n in ("go", "json", "log"))
    with open(log, "w") as f:
        job = subprocess.Popen([PY, "-c", JOB, go, mode, str(STEPS), str(TINY), res], stdout=f,
                               stderr=subprocess.STDOUT)
    if not wait_for(log, "READY", job, 600):
        print(mode, "job did not start:", open(log).read()[-3000:])
        return None, None, ""
    lt_out, lt_err = os.path.join(work, f"{mode}.lt.out"), os.path.join(work, f"{mode}.lt.err")
    with open(lt_out, "w") as o, open(lt_err, "w") as e:
        lt = subprocess.Popen([LT, "--pid", str(job.pid), "-v", "--report", "verdict", "-o",
                               os.path.join(work, f"{mode}.ltrace")], stdout=o, stderr=e)
    if not wait_for(lt_err, "attached", lt, 120):
        print(mode, "ltrace-bpf did not attach:", open(lt_err).read()[-2000:])
        job.kill()
        return None, None, ""
    open(go, "w").close()
    print(mode, "job rc", job.wait(900), "ltrace-bpf rc", lt.wait(300))
    text = open(lt_out).read()
    print(text[-4000:])
    print(open(lt_err).read()[-1500:])
    ranked = [(k, float(ms), ev) for _, k, ms, ev in re.findall(
        r"^  (\d+)\. ([\w -]+) \(pid \d+\): ([\d.]+) ms per train step at stake\n\s+(.*)$", text, re.M)]
    numbers = json.load(open(res)) if os.path.exists(res) else None
    return ranked, numbers, text


def main():
    work = tempfile.mkdtemp(prefix="lt-gpu-verdict-")
    checks = Checks()
    check = checks.check

    ranked, numbers, _ = fit(work, "sync")
    first = ranked[0] if ranked else None
    check("sync: host-device sync first", first and first[0] == "host-device sync", f"ranked {ranked}")
    if first and numbers:
        check("sync: its time per step", 0.5 * numbers["mean_wait_ms"] <= first[1] <= 1.5 * numbers["mean_wait_ms"],
              f"ours {first[1]:.3f} ms, the job's mean .item() {numbers['mean_wait_ms']:.3f} ms")
    ranked, _, _ = fit(work, "tiny")
    check("tiny: launch-bound first", ranked and ranked[0][0] == "launch-bound", f"ranked {ranked}")
    ranked, _, _ = fit(work, "busy")
    kinds = {k for k, _, _ in ranked or []}
    check("busy: no GPU finding", ranked is not None and not kinds & {"host-device sync", "launch-bound", "gpu-idle"},
          f"ranked {ranked}")
    print(f"VERDICT_CHECK ok={checks.ok}/{checks.total} (work dir {work})")
    return 0 if checks.all_ok() else 1


if __name__ == "__main__":
    sys.exit(main())
