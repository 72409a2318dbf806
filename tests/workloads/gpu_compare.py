"""A Lightning GPU fit in two identical phases, for comparing ltrace-bpf with
torch.profiler on the same run (tests/gpu/run.sh).

Usage: python gpu_compare.py --dir D [--steps N] [--nvtx] [--only-a] [--hidden H]

  READY <pid>        imports done, CUDA initialised, warm-up fit done
  waits for D/go     (the tracer attaches meanwhile)
  phase A            fit of N steps on a fresh model (seed 0); with --nvtx
                     under torch.autograd.profiler.emit_nvtx() plus one
                     torch.cuda.nvtx range "phase_a"
  A_DONE             then waits for D/detached (the tracer has let go of CUPTI)
  phase B            the same fit under torch.profiler (CPU + CUDA); writes
                     D/torch.json: kernel names -> count and device time
  B_DONE
With --only-a the process exits after phase A (a tracer that launched it
with `ltrace-bpf run` keeps CUPTI until then).
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
from train_lightning import Model, RandomDataset, pl  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402


class Wide(Model):
    def __init__(self, hidden):
        super().__init__(hidden=hidden, depth=3)


def fit(steps, hidden):
    torch.manual_seed(0)
    model = Wide(hidden)
    data = DataLoader(RandomDataset(32, steps * 64), batch_size=64)
    trainer = pl.Trainer(max_steps=steps, max_epochs=1, accelerator="gpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         num_sanity_val_steps=0)
    t0 = time.perf_counter()
    trainer.fit(model, data)
    torch.cuda.synchronize()
    return time.perf_counter() - t0, float(model.net[0].weight.detach().sum())


def wait_for(path):
    while not os.path.exists(path):
        time.sleep(0.01)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--nvtx", action="store_true")
    ap.add_argument("--only-a", action="store_true")
    ap.add_argument("--no-wait", action="store_true", help="do not wait for D/go (timing runs)")
    ap.add_argument("--profile-a", action="store_true", help="phase A under torch.profiler (timing runs)")
    args = ap.parse_args()
    fit(5, args.hidden)  # warm-up: CUDA context, cuBLAS handles, allocator
    print("READY", os.getpid(), flush=True)
    if not args.no_wait:
        wait_for(os.path.join(args.dir, "go"))
    if args.nvtx:
        torch.cuda.nvtx.range_push("phase_a")
        with torch.autograd.profiler.emit_nvtx():
            dt, w = fit(args.steps, args.hidden)
        torch.cuda.nvtx.range_pop()
    elif args.profile_a:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
            dt, w = fit(args.steps, args.hidden)
    else:
        dt, w = fit(args.steps, args.hidden)
    print(f"A_DONE seconds={dt:.6f} steps_per_s={args.steps / dt:.3f} weight_sum={w:.6f}", flush=True)
    if args.only_a:
        return 0
    wait_for(os.path.join(args.dir, "detached"))
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        dt, w = fit(args.steps, args.hidden)
    kernels, ops = {}, {}
    for e in prof.events():
        dev = str(getattr(e, "device_type", "")).endswith("CUDA")
        # GPU-side user annotations (Optimizer.step#SGD.step) are spans, not kernels
        if dev and not getattr(e, "is_user_annotation", False):
            k = kernels.setdefault(e.name, {"count": 0, "us": 0.0})
            k["count"] += 1
            k["us"] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
    for e in prof.key_averages():
        cuda = getattr(e, "device_time_total", None)
        if cuda is None:
            cuda = e.cuda_time_total
        ops[e.key] = {"count": e.count, "cuda_total_us": cuda}
    with open(os.path.join(args.dir, "torch.json"), "w") as f:
        json.dump({"kernels": kernels, "ops": ops}, f)
    print(f"B_DONE seconds={dt:.6f} weight_sum={w:.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
