"""A finalizing target is held at its exit until its last samples are read
(user/proc/exit_hold.h). The hold must be invisible: signals still arrive,
the exit status is the job's own, and a tracer killed while it holds a
target leaves the target running on (the kernel detaches a dead tracer's
tracees)."""
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import LTRACE, WORKLOADS, pyenv_python, wait_for


def tracer_of(pid):
    """The process whose thread traces PID, from TracerPid in /proc/PID/status
    (0: none). TracerPid names the tracing thread: ltrace-bpf's exit holder
    is a thread of its own."""
    with open(f"/proc/{pid}/status") as f:
        tid = next((int(line.split()[1]) for line in f if line.startswith("TracerPid:")), 0)
    try:
        with open(f"/proc/{tid}/status") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("Tgid:")), tid)
    except OSError:  # no tracer, or it is gone
        return tid


def wait_until(cond, what, timeout, *procs, err=None):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        for p in procs:
            assert p.poll() is None, f"exited early (rc={p.returncode}) waiting for {what}"
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}: {err.read_text() if err else ''}")


@pytest.fixture
def slow_exit(tmp_path):
    """Starts tests/workloads/slow_exit.py and ltrace-bpf on it, lets the job
    run into its atexit handler and waits until ltrace-bpf holds it there.
    Yields (job, tracer, paths); kills whatever is left at the end."""
    out, err, rep = tmp_path / "job.out", tmp_path / "lt.err", tmp_path / "lt.out"
    go, release = tmp_path / "go", tmp_path / "release"
    with open(out, "w") as o:
        job = subprocess.Popen([pyenv_python(11), os.path.join(WORKLOADS, "slow_exit.py"), "--wait-file", str(go),
                                "--release-file", str(release)], stdout=o, stderr=subprocess.STDOUT, cwd=tmp_path)
    procs = [job]
    try:
        wait_for(str(out), "READY", 120, job)
        with open(rep, "w") as r, open(err, "w") as e:
            lt = subprocess.Popen([LTRACE, "--pid", str(job.pid), "-v", "--rate", "999", "--report", "advanced"],
                                  stdout=r, stderr=e, cwd=tmp_path)
        procs.append(lt)
        wait_for(str(err), "attached", 120, lt)
        go.touch()
        wait_for(str(out), "FINALIZING", 120, job)
        wait_until(lambda: tracer_of(job.pid) == lt.pid, "ltrace-bpf to hold the job", 60, job, lt, err=err)
        yield job, lt, dict(out=out, err=err, rep=rep, release=release)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_held_job_gets_its_signals_and_its_exit_status(slow_exit):
    job, lt, f = slow_exit
    os.kill(job.pid, signal.SIGUSR1)
    wait_for(str(f["out"]), "SIGUSR1", 60, job)
    assert tracer_of(job.pid) == lt.pid  # still held: the signal was passed on, not the hold dropped
    f["release"].touch()
    assert job.wait(timeout=120) == 7
    assert lt.wait(timeout=300) == 0, f["err"].read_text()
    assert "EXITED" in f["out"].read_text()
    err = f["err"].read_text()
    assert "read at its exit, released" in err, err
    assert re.search(r"slow_exit\.py:\d+\(burn\)$", f["rep"].read_text(), re.M)  # its samples, named


def state_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_job_waits_at_its_exit_for_a_stalled_tracer(slow_exit):
    """The tracer stopped (SIGSTOP: a tracer starved of CPU, at its worst)
    while the job runs its last 30 ms and exits: the job waits at its exit
    stop, and once the tracer runs again its last function is named."""
    job, lt, f = slow_exit
    os.kill(lt.pid, signal.SIGSTOP)
    try:
        f["release"].touch()
        wait_for(str(f["out"]), "EXITED", 60, job)
        wait_until(lambda: state_of(job.pid) == "t", "the job to stop at its exit", 60, job)
    finally:
        os.kill(lt.pid, signal.SIGCONT)
    assert job.wait(timeout=120) == 7
    assert lt.wait(timeout=300) == 0, f["err"].read_text()
    rep = f["rep"].read_text()
    row = next((line for line in rep.splitlines() if line.endswith("(last_burst)")), None)
    assert row, rep
    # Its 30 ms of CPU, sampled at 999 Hz: named, not <unknown> (the job
    # keeps its last frames' code objects alive through finalization).
    assert int(row.split()[1]) >= 10, row
    assert "<unknown>" not in rep, rep


def test_ctrl_z_lets_the_held_job_go_before_the_tracer_stops(slow_exit):
    """Ctrl-Z (SIGTSTP) stops the tracer as the user asked, but not the job
    it holds at its exit: that is let go first (user/proc/job_stop.h), so
    the job exits while the tracer is stopped, and the tracer, continued,
    ends as usual."""
    job, lt, f = slow_exit
    os.kill(lt.pid, signal.SIGTSTP)
    try:
        wait_until(lambda: state_of(lt.pid) == "T", "the tracer to stop", 60, lt, err=f["err"])
        assert tracer_of(job.pid) == 0, "stopped while still holding the job"
        f["release"].touch()
        assert job.wait(timeout=120) == 7  # its exit, with the tracer still stopped
        assert state_of(lt.pid) == "T"
    finally:
        os.kill(lt.pid, signal.SIGCONT)
    assert lt.wait(timeout=300) == 0, f["err"].read_text()
    err = f["err"].read_text()
    assert "stopped by job control; first let go of 1 process(es) held at their exit" in err, err
    assert "EXITED" in f["out"].read_text()


def test_tracer_killed_while_holding_leaves_the_job_running(slow_exit):
    job, lt, f = slow_exit
    lt.kill()  # SIGKILL: no chance to detach
    lt.wait()
    wait_until(lambda: tracer_of(job.pid) == 0, "the kernel to detach the job", 60, job)
    os.kill(job.pid, signal.SIGUSR1)
    wait_for(str(f["out"]), "SIGUSR1", 60, job)
    f["release"].touch()
    assert job.wait(timeout=120) == 7
    assert f["out"].read_text().splitlines()[-1] == "EXITED"


def test_run_sees_its_commands_own_end_when_killed_while_held(tmp_path):
    """`run`'s command is our own child: killed while held, it stops at its
    exit like any tracee, is released, and its status (137) is still there
    for `run` to report: the hold never takes a child's status."""
    out, err = tmp_path / "lt.out", tmp_path / "lt.err"
    go, release = tmp_path / "go", tmp_path / "release"
    with open(out, "w") as o, open(err, "w") as e:
        lt = subprocess.Popen([LTRACE, "run", "-v", "--rate", "999", "--report", "advanced", "--",
                               pyenv_python(11), os.path.join(WORKLOADS, "slow_exit.py"), "--wait-file", str(go),
                               "--release-file", str(release)], stdout=o, stderr=e, cwd=tmp_path)
    try:
        # The interpreter's probes are in before the job goes on (`run`
        # attaches them after exec: issue 32).
        wait_for(str(err), "attached", 120, lt)
        go.touch()
        text = wait_for(str(out), "FINALIZING", 120, lt)
        job = int(text.split("FINALIZING")[1].split()[0])
        wait_until(lambda: tracer_of(job) == lt.pid, "ltrace-bpf to hold its command", 60, lt, err=err)
        os.kill(job, signal.SIGKILL)
        assert lt.wait(timeout=300) == 128 + signal.SIGKILL, err.read_text()
        assert "the command exited with status 137" in err.read_text()
    finally:
        if lt.poll() is None:
            lt.kill()
