"""Memory of a long live attach: does ltrace-bpf's RSS grow with attach time?

Starts the demo job (tests/workloads/train_lightning.py, the `make demo`
model, training until told to stop), then attaches ltrace-bpf to it twice,
one after the other (or, with --together, both at once), for --seconds each:
  live    ltrace-bpf --pid P --report simple,advanced,ops --rate 999
  record  ltrace-bpf record --pid P --report simple,advanced,ops --rate 999 -o FILE
and samples ltrace-bpf's VmRSS (/proc/PID/status) every second from
"attached" on, then stops it with SIGINT.  Prints,
per mode, the RSS after --settle seconds (attaching loads the op probes
and symbol tables in steps), at half time and at the end, the peak, and
the slope over the second half (least squares, MB per hour), and the
ratios live / record.

usage: .venv/bin/python bench/live_rss.py [--seconds 3600] [--settle 30] [--modes live,record]
       [--report simple,advanced,ops] [--together] [--csv FILE]
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LTRACE = os.environ.get("LTRACE_BPF", os.path.join(ROOT, "build", "ltrace-bpf"))
TRAIN = os.path.join(ROOT, "tests", "workloads", "train_lightning.py")
PYTHON = os.path.join(ROOT, ".venv", "bin", "python")
# make demo's model (tests/workloads/demo.sh), repeated until --until-file exists.
JOB_ARGS = ["--profiler", "none", "--epochs", "1000000", "--batches", "200", "--val", "--hidden", "256", "--depth", "3"]


def rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def slope_mb_per_hour(samples):
    """Least-squares slope of (seconds, MB) in MB per hour."""
    if len(samples) < 2:
        return 0.0
    n = len(samples)
    mt = sum(t for t, _ in samples) / n
    mr = sum(r for _, r in samples) / n
    var = sum((t - mt) ** 2 for t, _ in samples)
    cov = sum((t - mt) * (r - mr) for t, r in samples)
    return cov / var * 3600.0 if var else 0.0


def start_job(tmp):
    log = open(os.path.join(tmp, "job.log"), "w+")
    job = subprocess.Popen([PYTHON, TRAIN] + JOB_ARGS, stdout=log, stderr=subprocess.STDOUT)
    while "READY" not in open(log.name).read():
        if job.poll() is not None:
            raise RuntimeError(open(log.name).read())
        time.sleep(0.2)
    time.sleep(3)  # training now
    return job


def command(mode, pid, report, tmp):
    args = [LTRACE, "--pid", str(pid), "-v", "--report", report, "--rate", "999"]
    if mode == "record":
        args = [LTRACE, "record", "--pid", str(pid), "-v", "--report", report, "--rate", "999",
                "-o", os.path.join(tmp, "run.ltrace")]
    return args


def measure(modes, pid, seconds, report, tmp):
    """Attach each mode (all at once), sample their RSS each second for
    `seconds` from "attached" on, stop them with SIGINT: {mode: [(t, MB)]}."""
    procs = {}
    for mode in modes:
        out = open(os.path.join(tmp, mode + ".out"), "w")
        err = open(os.path.join(tmp, mode + ".err"), "w+")
        procs[mode] = (subprocess.Popen(command(mode, pid, report, tmp), stdout=out, stderr=err), err.name)
    for mode, (p, err) in procs.items():
        while "attached" not in open(err).read():
            if p.poll() is not None:
                raise RuntimeError(f"{mode}: exit {p.returncode}: {open(err).read()[-2000:]}")
            time.sleep(0.1)
    t0 = time.monotonic()
    samples = {mode: [] for mode in modes}
    while time.monotonic() - t0 < seconds:
        for mode, (p, err) in procs.items():
            if p.poll() is not None:
                raise RuntimeError(f"{mode}: exit {p.returncode}: {open(err).read()[-2000:]}")
            r = rss_mb(p.pid)
            if r is not None:
                samples[mode].append((time.monotonic() - t0, r))
        time.sleep(1.0)
    for mode, (p, err) in procs.items():
        p.send_signal(signal.SIGINT)  # detach: the report prints, the file closes
    for mode, (p, err) in procs.items():
        if p.wait() != 0:
            raise RuntimeError(f"{mode}: exit {p.returncode}: {open(err).read()[-2000:]}")
    return samples


def summarize(samples, settle):
    # Attaching loads symbol tables in steps (libtorch's, the first
    # samples' libraries): the slope is over the second half only.
    steady = [s for s in samples if s[0] >= settle] or samples
    half = [s for s in samples if s[0] >= samples[-1][0] / 2] or samples
    return {
        "start": steady[0][1],
        "mid": half[0][1],
        "end": samples[-1][1],
        "peak": max(r for _, r in samples),
        "slope": slope_mb_per_hour(half),
        "n": len(samples),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=3600, help="attach time per mode (default 3600)")
    ap.add_argument("--settle", type=float, default=30.0, help="seconds after which the first RSS is reported")
    ap.add_argument("--modes", default="live,record")
    ap.add_argument("--report", default="simple,advanced,ops")
    ap.add_argument("--together", action="store_true", help="attach the modes at the same time (half the wall time)")
    ap.add_argument("--csv", help="write every sample here (mode,t_s,rss_mb)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("live_rss: needs root (BPF)")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        job = start_job(tmp)
        try:
            modes = args.modes.split(",")
            groups = [modes] if args.together else [[m] for m in modes]
            measured = {}
            for group in groups:
                measured.update(measure(group, job.pid, args.seconds, args.report, tmp))
            for mode in modes:
                samples = measured[mode]
                results[mode] = (samples, summarize(samples, args.settle))
                s = results[mode][1]
                print(f"{mode:7s} RSS at {args.settle:.0f} s {s['start']:7.1f} MB, at half time {s['mid']:7.1f} MB, "
                      f"end {s['end']:7.1f} MB, peak {s['peak']:7.1f} MB; slope over the second half "
                      f"{s['slope']:8.1f} MB/hour ({s['n']} samples)", flush=True)
        finally:
            job.kill()
            job.wait()
    if "live" in results and "record" in results:
        live, rec = results["live"][1], results["record"][1]
        print(f"live / record: end RSS {live['end'] / rec['end']:.2f}x, peak {live['peak'] / rec['peak']:.2f}x, "
              f"second-half slope {live['slope']:.1f} vs {rec['slope']:.1f} MB/hour")
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("mode,t_s,rss_mb\n")
            for mode, (samples, _) in results.items():
                for t, r in samples:
                    f.write(f"{mode},{t:.1f},{r:.1f}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
