"""The op observer (torchbridge/op_observer.cpp, docs/design-op-observer.md):
a RecordFunction callback ltrace-bpf puts into a running job.  What the
job must never notice: a tracer killed at any point (the callback goes
within a poll of the bridge), attach/detach cycles with ops that throw, a
second tracer (which falls back to the probes).  Its times against
torch.profiler's are test_ops.py's."""
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import LTRACE, VENV_PY, WORKLOADS, wait_for

TORCH_OPS = os.path.join(WORKLOADS, "torch_ops.py")
RAISING = ["--iters", "40", "--raising"]
REPEAT = "150"  # ~12 s: ten attach/detach cycles fit in it


def result_line(out):
    return next(line for line in out.splitlines() if line.startswith("RESULT"))


@pytest.fixture(scope="module")
def raising_plain():
    """The workload's result without us."""
    r = subprocess.run([VENV_PY, TORCH_OPS] + RAISING + ["--repeat", REPEAT], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return result_line(r.stdout)


def start_job(tmp_path, args):
    """The workload, waiting for its go file, with the bridge's state changes
    on its stderr (LTRACE_BRIDGE_DEBUG=1)."""
    log = tmp_path / "job.log"
    go = tmp_path / "go"
    job = subprocess.Popen([VENV_PY, TORCH_OPS, "--wait-file", str(go)] + args, stdout=open(log, "w"),
                           stderr=subprocess.STDOUT, env=dict(os.environ, LTRACE_BRIDGE_DEBUG="1"), cwd=tmp_path)
    wait_for(str(log), "READY", 300, job)
    return job, log, go


def tracer(tmp_path, name, pid, extra=()):
    out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
    p = subprocess.Popen([LTRACE, "--pid", str(pid), "-v", "--report", "ops"] + list(extra), stdout=open(out, "w"),
                         stderr=open(err, "w"), cwd=tmp_path)
    wait_for(str(err), "attached", 120, p)
    return p, out, err


def test_killed_tracer_leaves_the_job_running_with_the_observer_off(tmp_path, raising_plain):
    """SIGKILL to ltrace-bpf while ops run (and throw): the kernel drops our
    semaphore's uprobe with the process, the bridge removes its callback at
    its next poll (100 ms), and the job computes what it computes alone.  A
    new tracer then takes the buffer the dead one left."""
    job, log, go = start_job(tmp_path, RAISING + ["--repeat", REPEAT])
    try:
        first, _, err1 = tracer(tmp_path, "first", job.pid)
        wait_for(str(log), "op observer: active", 60, job)
        go.touch()
        time.sleep(0.3)  # ops running, some throwing
        first.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        first.wait()
        wait_for(str(log), "op observer: off", 30, job)
        off_s = time.monotonic() - killed
        # One poll of 100 ms, plus the scheduling of the bridge's thread on a
        # busy machine: the bound says it is the poll, not a timeout.
        assert off_s < 5.0, off_s
        second, out2, err2 = tracer(tmp_path, "second", job.pid, ["-d", "1"])
        assert second.wait(timeout=120) == 0, err2.read_text()
        assert "# of Calls and CPU times are exact" in err2.read_text(), err2.read_text()[-2000:]
        assert "Profile stats for: records" in out2.read_text()
        assert job.wait(timeout=600) == 0, log.read_text()[-3000:]
    finally:
        if job.poll() is None:
            job.kill()
    assert result_line(log.read_text()) == raising_plain
    assert log.read_text().count("op observer: active") == 2


def test_a_second_tracer_gets_the_probes(tmp_path):
    """Two ltrace-bpf on one job: the first has the observer, the second
    says why not and reports sampled estimates with its own probes."""
    job, log, go = start_job(tmp_path, ["--iters", "100", "--repeat", "15"])
    try:
        first, out1, err1 = tracer(tmp_path, "first", job.pid)
        second, out2, err2 = tracer(tmp_path, "second", job.pid)
        go.touch()
        assert job.wait(timeout=600) == 0, log.read_text()[-3000:]
        assert first.wait(timeout=120) == 0 and second.wait(timeout=120) == 0
    finally:
        for p in (job,):
            if p.poll() is None:
                p.kill()
    e2 = err2.read_text()
    assert re.search(r"op observer not used \(another ltrace-bpf \(pid %d\) reads its ops\)" % first.pid, e2), e2
    assert "Self CPU~" in out2.read_text()
    assert "Self CPU~" not in out1.read_text() and "Self CPU" in out1.read_text()
    # The same calls, seen both ways.
    def calls(text, name):
        return sum(int(m.group(1)) for m in re.finditer(r"^\s*%s\s.*\s(\d+)\s*$" % re.escape(name), text, re.M))
    assert calls(out1.read_text(), "aten::mm") == calls(out2.read_text(), "aten::mm") > 0


def test_attach_detach_cycles_leave_the_result_unchanged(tmp_path, raising_plain):
    """Ten attach/detach cycles (each registers and removes the callback)
    while ops throw: every cycle reports exact times, the job's result is
    its result alone.  bench/observer_cycles.py runs 1000 beside two CPU hogs."""
    job, log, go = start_job(tmp_path, RAISING + ["--repeat", REPEAT])
    try:
        go.touch()
        for i in range(10):
            r = subprocess.run([LTRACE, "--pid", str(job.pid), "--report", "ops", "-d", "0.3"], capture_output=True,
                               text=True, timeout=120)
            if job.poll() is not None:
                break
            assert r.returncode == 0, r.stderr
            assert "# of Calls and CPU times are exact" in r.stderr, (i, r.stderr[-2000:])
        assert job.wait(timeout=600) == 0, log.read_text()[-3000:]
    finally:
        if job.poll() is None:
            job.kill()
    assert result_line(log.read_text()) == raising_plain
    assert log.read_text().count("op observer: off") >= 9
