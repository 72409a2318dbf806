"""`watch --all`, as the systemd unit and the DaemonSet run it: a job
started after the watcher is adopted from its first instruction (its
capture holds the whole fit, set-up to its last step), its failed exit is
captured, the job's own result is untouched, and while the watcher runs
no second watcher of that job starts on another directory (one watcher per
process on a machine). A process that another watcher (with a /run of
its own) traces before --all finds it is left to that watcher. Serial:
--all takes every torch process here."""
import glob
import os
import signal
import subprocess

import pytest

from conftest import LTRACE, VENV_PY, WORKLOADS, parse_simple_report, wait_for

pytestmark = pytest.mark.serial

STEPS = 40


# Started before the --all watcher, not a torch process until told: then
# it loads Lightning (so --all finds it running) and waits to be let go.
# Run from a file: a command line naming Lightning would make it one.
LATE = """import os, sys, time
while not os.path.exists(sys.argv[1]): time.sleep(0.05)
try:
    import lightning.pytorch
except ImportError:
    import pytorch_lightning
print("LOADED", flush=True)
while not os.path.exists(sys.argv[2]): time.sleep(0.05)
"""


def test_a_job_started_under_watch_all_is_captured_from_its_first_step(tmp_path):
    wdir, err = tmp_path / "w", tmp_path / "w.err"
    late_go, late_end, late_out = tmp_path / "late.go", tmp_path / "late.end", tmp_path / "late.out"
    with open(late_out, "w") as lo:
        (tmp_path / "late.py").write_text(LATE)
        late = subprocess.Popen([VENV_PY, str(tmp_path / "late.py"), str(late_go), str(late_end)], stdout=lo,
                                stderr=subprocess.STDOUT)
    other = None
    with open(err, "w") as le:
        lt = subprocess.Popen([LTRACE, "watch", "--all", "-v", "--dir", str(wdir), "--capture-before", "60s",
                               "--capture-after", "1s"], stdout=subprocess.DEVNULL, stderr=le)
    job = None
    try:
        wait_for(str(err), "watch: recording to", 60, lt)
        # Another watcher, from a /run of its own, takes the late process
        # while it is no torch job yet; --all then finds it and leaves it.
        other_err = tmp_path / "other.err"
        with open(other_err, "w") as oe:
            other = subprocess.Popen(["unshare", "-m", "sh", "-c", 'mount -t tmpfs tmpfs /run && exec "$@"', "sh",
                                      LTRACE, "watch", "--pid", str(late.pid), "-v", "--dir", str(tmp_path / "w3")],
                                     stdout=subprocess.DEVNULL, stderr=oe)
        wait_for(str(other_err), "attached", 120, other)
        late_go.touch()
        wait_for(str(late_out), "LOADED", 600, late)
        left = wait_for(str(err), f"watch: pid {late.pid} not adopted: traced by another ltrace-bpf (pid {other.pid}: ",
                        120, lt)
        assert "a watcher (one watcher per process on a machine): left to it" in left, left
        late_end.touch()
        assert late.wait(timeout=120) == 0
        assert other.wait(timeout=120) == 0, other_err.read_text()
        go = tmp_path / "go"
        with open(tmp_path / "job.out", "w") as out:
            job = subprocess.Popen([VENV_PY, os.path.join(WORKLOADS, "watch_job.py"), "--wait-file", str(go),
                                    "--steps", str(STEPS), "--exit-code", "3"], stdout=out,
                                   stderr=subprocess.STDOUT, cwd=tmp_path)
        wait_for(str(tmp_path / "job.out"), "READY", 600, job)
        # Adopted (a torch process appeared) before it starts its fit.
        wait_for(str(err), f"pid {job.pid}: CPython", 120, lt)
        second = subprocess.run([LTRACE, "watch", "--pid", str(job.pid), "--dir", str(tmp_path / "w2")],
                                capture_output=True, text=True, timeout=120)
        assert second.returncode == 20 and second.stderr.count("\n") == 1, second.stderr
        assert f"the watcher pid {lt.pid} (on {wdir}) runs here and it watches every process (--all)" \
            in second.stderr, second.stderr
        go.touch()
        assert job.wait(timeout=600) == 3  # its own exit code, through the watcher
        wait_for(str(err), "watch: summary: exit", 120, lt)
        lt.send_signal(signal.SIGINT)
        assert lt.wait(timeout=120) == 0, err.read_text()[-3000:]
    finally:
        for p in (job, lt, late, other):
            if p is not None and p.poll() is None:
                p.kill()
    assert "FIT DONE" in (tmp_path / "job.out").read_text()
    caps = glob.glob(str(wdir / "captures" / f"*-{job.pid}-*exit"))
    assert len(caps) == 1, (os.listdir(wdir / "captures"), err.read_text()[-3000:])
    r = subprocess.run([LTRACE, "report", os.path.join(caps[0], "trace.ltrace"), "--report", "simple"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = parse_simple_report(r.stdout)
    # Every step, and the set-up hooks before the first: from its start.
    assert rows["run_training_batch"][1] == str(STEPS), r.stdout
    assert rows["[LightningModule]Model.setup"][1] == "1", r.stdout
