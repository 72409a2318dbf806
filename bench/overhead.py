"""Overhead of ltrace-bpf on a real Lightning CPU fit, side by side in one run.

For each interpreter layout and model size, interleaved repetitions of:
  none    default Trainer (PassThroughProfiler), nothing attached
  simple  Trainer(profiler=SimpleProfiler()), Lightning's own timing
  ltrace  default Trainer, ltrace-bpf attached from before fit
Prints steady-state steps/s (median of reps), overhead vs none, the ratio of
our overhead to SimpleProfiler's, and ltrace-bpf's attach latency.

usage: .venv/bin/python bench/overhead.py [--reps 3] [--markdown docs/benchmarks.md]
       .venv/bin/python bench/overhead.py --in-run [bench/inrun_ab.py's options]

Separate runs cannot show 1 %: consecutive runs with nothing attached vary
from 13 to 18 steps/s here. --in-run attaches and detaches in turn within
one job instead, with a confidence interval (bench/inrun_ab.py).
"""
import argparse
import glob
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LTRACE = os.path.join(ROOT, "build", "ltrace-bpf")
TRAIN = os.path.join(ROOT, "tests", "workloads", "train_lightning.py")
SITE = glob.glob(os.path.join(ROOT, ".venv", "lib", "python3*", "site-packages"))[0]

INTERPRETERS = {
    # Debian's PGO build (the interpreter in the executable): gen_iternext is
    # inlined into builtin_next, which is still probed at its entry (only
    # gen_iternext's address is taken there; `ltrace-bpf -v` says
    # "probes: builtin_next@... gen_throw@...").
    "debian-3.11-exe": ([os.path.join(ROOT, ".venv", "bin", "python")], {}),
    # pyenv build (libpython3.11.so): generator entry-point probes.
    "pyenv-3.11-lib": (["/root/.pyenv/versions/3.11.7/bin/python3.11"], {"PYTHONPATH": SITE}),
}
SIZES = {
    "small (BoringModel-size, dispatch-bound)": ["--hidden", "32", "--depth", "1", "--batch-size", "8",
                                                 "--batches", "600", "--warmup", "50"],
    "large (>= 20 ms step)": ["--hidden", "1024", "--depth", "4", "--batch-size", "128",
                              "--batches", "60", "--warmup", "10"],
}


def steady(out):
    for line in out.splitlines():
        if line.startswith("STEADY"):
            return float(line.split("steps_per_s=")[1])
    raise RuntimeError("no STEADY line in:\n" + out)


def run(cmd, env, mode):
    env = dict(os.environ, **env)
    with tempfile.TemporaryDirectory() as tmp:
        go = os.path.join(tmp, "go")
        log = os.path.join(tmp, "job.log")
        args = cmd + [TRAIN, "--epochs", "1", "--wait-file", go]
        if mode == "simple":
            args += ["--profiler", "simple"]
        with open(log, "w") as f:
            job = subprocess.Popen(args + run.size_args, stdout=f, stderr=subprocess.STDOUT, env=env)
        while "READY" not in open(log).read():
            if job.poll() is not None:
                raise RuntimeError(open(log).read())
            time.sleep(0.05)
        latency = None
        lt = None
        if mode == "ltrace":
            err_path = os.path.join(tmp, "lt.err")
            t0 = time.perf_counter()
            lt = subprocess.Popen([LTRACE, "--pid", str(job.pid), "-v"], stdout=subprocess.DEVNULL,
                                  stderr=open(err_path, "w"))
            while "attached" not in open(err_path).read():
                time.sleep(0.001)
            latency = (time.perf_counter() - t0) * 1000
        open(go, "w").close()
        job.wait()
        if lt:
            lt.wait()
        return steady(open(log).read()), latency


def main():
    if "--in-run" in sys.argv[1:]:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import inrun_ab

        return inrun_ab.main([a for a in sys.argv[1:] if a != "--in-run"])
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--markdown")
    args = ap.parse_args()
    lines = []
    latencies = []
    for iname, (cmd, env) in INTERPRETERS.items():
        for sname, size_args in SIZES.items():
            run.size_args = size_args
            res = {"none": [], "simple": [], "ltrace": []}
            for _ in range(args.reps):
                for mode in res:  # interleaved, so drift hits every mode alike
                    sps, lat = run(cmd, env, mode)
                    res[mode].append(sps)
                    if lat:
                        latencies.append(lat)
            med = {m: statistics.median(v) for m, v in res.items()}
            ov = {m: (med["none"] / med[m] - 1) * 100 for m in ("simple", "ltrace")}
            ratio = ov["ltrace"] / ov["simple"] if ov["simple"] > 0 else float("nan")
            row = (f"| {iname} | {sname} | {med['none']:.1f} | {med['simple']:.1f} ({ov['simple']:+.1f}%) | "
                   f"{med['ltrace']:.1f} ({ov['ltrace']:+.1f}%) | {ratio:.2f} |")
            print(row, flush=True)
            lines.append(row)
    lat = (f"attach latency (ltrace-bpf start -> probes live, {len(latencies)} attaches): "
           f"median {statistics.median(latencies):.1f} ms, max {max(latencies):.1f} ms")
    print(lat)
    header = ["| interpreter | model | none steps/s | SimpleProfiler steps/s (overhead) | "
              "ltrace-bpf steps/s (overhead) | ltrace / Simple overhead |",
              "|---|---|---|---|---|---|"]
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write("\n".join(header + lines) + "\n\n" + lat + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
