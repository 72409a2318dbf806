"""A live attach's memory must not grow with attach time (issue 20, point 12).

A real Lightning fit, small model (thousands of actions and ops a second),
with the live simple, advanced and ops reports at --rate 999 for ~60 s:
ltrace-bpf's RSS is sampled twice a second.  Durations, op windows and
symbols must be aggregated as they arrive, so the second half of the
attach adds (almost) nothing.  Loading a library's symbol table is a
one-off step of tens of MB whenever the first sample lands in it; such
steps are not growth with time and are left out (any one-second increase
above STEP_MB), the steady increments are summed."""
import os
import signal
import subprocess
import time

from busy import wait_until
from conftest import LTRACE, VENV_PY, WORKLOADS, wait_for

# The binary under test (LTRACE_BPF=another build: does it fail without the fix?)
LTRACE_BIN = os.environ.get("LTRACE_BPF", LTRACE)
ATTACH_S = 60
STEP_MB = 20.0  # a one-second increase this big is a symbol table load, not a leak
SECOND_HALF_MAX_MB = 6.0


def rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def cpu_seconds(pid):
    """utime + stime of a process, in seconds (/proc/PID/stat)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def steady_growth(samples):
    """MB added by increments below STEP_MB per second (one-off loads left out)."""
    grown = 0.0
    for (t0, r0), (t1, r1) in zip(samples, samples[1:]):
        d = r1 - r0
        if d < STEP_MB * max(t1 - t0, 0.5):
            grown += d
    return grown


def test_live_rss_stays_flat(tmp_path):
    stop = tmp_path / "stop"
    log = tmp_path / "job.log"
    with open(log, "w") as lo:
        job = subprocess.Popen([VENV_PY, os.path.join(WORKLOADS, "train_lightning.py"), "--epochs", "1000000",
                                "--batches", "400", "--until-file", str(stop)], stdout=lo, stderr=subprocess.STDOUT)
    try:
        wait_for(str(log), "READY", 300, job)
        # The fit is under way (Trainer set-up done) once the job has spent
        # a second of CPU time past READY: a condition, not a guessed sleep.
        ready_cpu = cpu_seconds(job.pid)
        wait_until(lambda: cpu_seconds(job.pid) >= ready_cpu + 1.0 or job.poll() is not None, 300,
                   "the fit to use 1 s of CPU")
        assert job.poll() is None, log.read_text()
        with open(tmp_path / "lt.out", "w") as out, open(tmp_path / "lt.err", "w") as err:
            lt = subprocess.Popen([LTRACE_BIN, "--pid", str(job.pid), "-v", "--report", "simple,advanced,ops", "--rate",
                                   "999"], stdout=out, stderr=err)
            wait_for(str(tmp_path / "lt.err"), "attached", 120, lt)
            t0 = time.monotonic()
            samples = []
            while time.monotonic() - t0 < ATTACH_S:
                assert lt.poll() is None, (tmp_path / "lt.err").read_text()
                samples.append((time.monotonic() - t0, rss_mb(lt.pid)))
                time.sleep(0.5)
            lt.send_signal(signal.SIGINT)  # detach: the reports print
            assert lt.wait(timeout=120) == 0, (tmp_path / "lt.err").read_text()
    finally:
        stop.touch()
        job.kill()
        job.wait()
    report = (tmp_path / "lt.out").read_text()
    assert "Profiler Report" in report and "aten::" in report, report[-3000:]
    first = [s for s in samples if s[0] < ATTACH_S / 2]
    second = [s for s in samples if s[0] >= ATTACH_S / 2]
    assert len(first) > 20 and len(second) > 20, samples
    grown_first, grown_second = steady_growth(first), steady_growth(second)
    print(f"RSS {samples[0][1]:.1f} -> {second[0][1]:.1f} -> {samples[-1][1]:.1f} MB; steady growth "
          f"{grown_first:.1f} MB in the first half, {grown_second:.1f} MB in the second")
    assert grown_second <= SECOND_HALF_MAX_MB, (
        f"RSS grew {grown_second:.1f} MB in the second half of a {ATTACH_S} s attach "
        f"(first half {grown_first:.1f} MB): {samples}")
