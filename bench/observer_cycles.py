"""Attach/detach cycles of the op observer (issue 35: "1,000 attach/detach
cycles under load with identical results and 0 crashes").

Each cycle is a whole `ltrace-bpf --pid P --report ops -d D`: the bridge is
injected on the first, each cycle raises ltrace:ops's semaphore, hands over
the layout, the bridge registers its RecordFunction callback, the tracer
reads its calls for D seconds and leaves, the bridge removes the callback.
The job runs tests/workloads/torch_ops.py --raising (ops that throw C++
exceptions through observed calls, an error across the autograd engine)
in a loop; when it ends, its RESULT line must equal the same run's without
us, and the next job takes the following cycles.  Run it beside CPU hogs
(tests/with_cpu_hogs.sh -n 2) for "under load".

Counted: cycles, cycles whose ltrace-bpf exited non-zero or did not report
exact times, jobs that crashed or computed another result, time per cycle.

usage: tests/with_cpu_hogs.sh -n 2 .venv/bin/python bench/observer_cycles.py [--cycles 1000] [--duration 0.2]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LTRACE = os.path.join(ROOT, "build", "ltrace-bpf")
PY = os.path.join(ROOT, ".venv", "bin", "python")
TORCH_OPS = os.path.join(ROOT, "tests", "workloads", "torch_ops.py")
ARGS = ["--iters", "40", "--raising", "--repeat", "400"]


def result_line(text):
    return next((line for line in text.splitlines() if line.startswith("RESULT")), None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cycles", type=int, default=1000)
    ap.add_argument("--duration", type=float, default=0.2)
    a = ap.parse_args()
    t0 = time.monotonic()
    # Private copies (the bridge is found next to the executable): a rebuild
    # during the run cannot swap them.
    priv = tempfile.mkdtemp(prefix="observer_cycles")
    ltrace = os.path.join(priv, "ltrace-bpf")
    shutil.copy2(LTRACE, ltrace)
    shutil.copy2(os.path.join(ROOT, "build", "libltrace-bridge.so"), priv)
    plain = subprocess.run([PY, TORCH_OPS] + ARGS, capture_output=True, text=True, timeout=3600)
    want = result_line(plain.stdout)
    assert plain.returncode == 0 and want, plain.stderr[-2000:]
    cycles = bad_rc = not_exact = jobs = bad_jobs = 0
    cycle_s = []
    with tempfile.TemporaryDirectory() as tmp:
        while cycles < a.cycles:
            log = os.path.join(tmp, f"job{jobs}.log")
            job = subprocess.Popen([PY, TORCH_OPS] + ARGS, stdout=open(log, "w"), stderr=subprocess.STDOUT)
            jobs += 1
            while "READY" not in open(log).read():
                time.sleep(0.01)
            while job.poll() is None and cycles < a.cycles:
                c0 = time.monotonic()
                r = subprocess.run([ltrace, "--pid", str(job.pid), "--report", "ops", "-d", str(a.duration)],
                                   capture_output=True, text=True, timeout=300)
                if job.poll() is not None or "RESULT" in open(log).read():
                    break  # the job's work ended under this cycle: not a cycle
                cycles += 1
                cycle_s.append(time.monotonic() - c0)
                if r.returncode != 0:
                    bad_rc += 1
                    print(f"cycle {cycles}: exit {r.returncode}: {r.stderr[-500:]}", file=sys.stderr)
                elif "# of Calls and CPU times are exact" not in r.stderr:
                    not_exact += 1
                    why = [line for line in r.stderr.splitlines() if "op observer" in line or "no aten op" in line]
                    print(f"cycle {cycles}: not exact: {why or r.stderr[-800:]}", file=sys.stderr)
                if cycles % 100 == 0:
                    print(f"{cycles} cycles, {jobs} jobs", file=sys.stderr, flush=True)
            job.wait(timeout=3600)  # runs on to its end: its result and exit count
            text = open(log).read()
            if job.returncode != 0 or result_line(text) != want:
                bad_jobs += 1
                print(f"job {jobs}: exit {job.returncode}, {result_line(text)} != {want}", file=sys.stderr)
    shutil.rmtree(priv, ignore_errors=True)
    cycle_s.sort()
    print(f"cycles {cycles}, ltrace-bpf non-zero exits {bad_rc}, not exact {not_exact}; jobs {jobs}, "
          f"crashed or another result {bad_jobs}; per cycle median {cycle_s[len(cycle_s) // 2]:.3f} s, "
          f"max {cycle_s[-1]:.3f} s; {(time.monotonic() - t0) / 60:.1f} min")
    sys.exit(1 if bad_rc or not_exact or bad_jobs else 0)


if __name__ == "__main__":
    main()
