"""The tracer's own CPU while its target waits (issue 33, point 6).

usage: .venv/bin/python bench/idle_tracer.py [--seconds 20] [--rounds 3]

A job that imported torch and Lightning and then waits (it wakes every
50 ms to look for a file, as a job polling for its input does:
tests/workloads/idle_import.py) is attached to by `ltrace-bpf --pid`
(every default source: actions, stacks at 999 Hz, ops, memory,
collectives) and by `ltrace-bpf watch --pid` (the cheap tier). Once the
tracer says "attached", its CPU time (every thread's, from
/proc/PID/task/*/schedstat, in ns) is read, again --seconds later, and the
difference is printed per mode and round, with the number of times its
threads were scheduled (a wake-up is one). The job's own CPU over the same
window is printed beside it.
"""
import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LTRACE = os.environ.get("LTRACE_BPF_EXE", os.path.join(ROOT, "build", "ltrace-bpf"))
PY = os.path.join(ROOT, ".venv", "bin", "python")
JOB = os.path.join(ROOT, "tests", "workloads", "idle_import.py")


def cpu_and_switches(pid):
    """(CPU ns, times scheduled) summed over the process's threads."""
    ns = runs = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                run_ns, _wait_ns, slices = (int(x) for x in f.read().split())
        except (OSError, ValueError):
            continue
        ns += run_ns
        runs += slices
    return ns, runs


def one(mode, seconds, tmp):
    job = subprocess.Popen([PY, JOB, "--import", "torch,pytorch_lightning"], stdout=subprocess.PIPE, text=True)
    try:
        for line in job.stdout:
            if line.startswith("READY"):
                break
        args = [LTRACE, "--pid", str(job.pid), "-v", "-o", os.path.join(tmp, "out.txt")]
        if mode == "watch":
            args = [LTRACE, "watch", "--pid", str(job.pid), "-v", "--dir", os.path.join(tmp, f"w{time.time_ns()}"),
                    "--triggers", "none"]
        lt = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            while True:
                line = lt.stderr.readline()
                if not line:
                    raise SystemExit(f"{mode}: the tracer ended before attaching")
                if "attached" in line:
                    break
            time.sleep(1)  # the attach's own work (symbols, the bridges' handshakes) settles
            t0, j0 = cpu_and_switches(lt.pid), cpu_and_switches(job.pid)
            time.sleep(seconds)
            t1, j1 = cpu_and_switches(lt.pid), cpu_and_switches(job.pid)
        finally:
            lt.send_signal(signal.SIGINT)
            lt.communicate(timeout=120)
    finally:
        job.kill()
        job.wait()
    return {"tracer_ms": (t1[0] - t0[0]) / 1e6, "tracer_runs": t1[1] - t0[1], "job_ms": (j1[0] - j0[0]) / 1e6}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--modes", default="attach,watch")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-idle-")
    res = {m: [] for m in a.modes.split(",")}
    for r in range(a.rounds):
        for m in res:
            x = one(m, a.seconds, tmp)
            res[m].append(x)
            print(f"round {r} {m}: tracer {x['tracer_ms']:.1f} ms CPU, scheduled {x['tracer_runs']} times in "
                  f"{a.seconds:.0f} s; job {x['job_ms']:.1f} ms", flush=True)
    for m, xs in res.items():
        ms = statistics.median(x["tracer_ms"] for x in xs)
        runs = statistics.median(x["tracer_runs"] for x in xs)
        print(f"{m}: median tracer CPU {ms:.1f} ms per {a.seconds:.0f} s ({100 * ms / 1e3 / a.seconds:.3f} % of one "
              f"core), {runs / a.seconds:.1f} wake-ups/s")
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    sys.exit(main())
