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

from busy import wait_until
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


def bridge_states(log):
    """The bridge's callback states so far (LTRACE_BRIDGE_DEBUG lines)."""
    return re.findall(r"op observer: (active|off)", log.read_text())


def stopped(pid):
    """Whether process pid is stopped (SIGSTOP: state T)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] in ("T", "t")


def test_a_killed_or_stopped_tracer_never_holds_the_job(tmp_path, raising_plain):
    """One job, tracers that go wrong at each point, and what the job
    computes is what it computes alone:
    - killed (SIGKILL) at each step of the op observer's handshake (its
      request posted to the bridge; the bridge's answer read);
    - killed while ops run (and throw): the kernel drops our semaphore's
      uprobe with the process, the bridge removes its callback at its next
      poll (100 ms);
    - stopped (SIGSTOP, as Ctrl-Z would) while the job does the rest of its
      ops: the job never waits on its reader (its work ends while the tracer
      is stopped; the full buffer drops and counts). Resumed, it still had
      the observer: the dead ones left nothing in its way."""
    job, log, go = start_job(tmp_path, RAISING + ["--repeat", REPEAT])
    try:
        for point in ("observer-asked", "observer-active"):
            err = tmp_path / f"{point}.err"
            p = subprocess.Popen([LTRACE, "--pid", str(job.pid), "-v", "--report", "ops"],
                                 stdout=subprocess.DEVNULL, stderr=open(err, "w"), cwd=tmp_path,
                                 env=dict(os.environ, LTRACE_BPF_TEST_STOP_AT=point))
            wait_until(lambda: p.poll() is not None or stopped(p.pid), 120, f"the tracer to stop at {point}")
            assert p.poll() is None, err.read_text()
            p.kill()
            p.wait()
            # Its semaphore went with it: the bridge's callback is off (if
            # it was ever on) within a poll.
            wait_until(lambda: (bridge_states(log) or ["off"])[-1] == "off", 30, f"the callback off after {point}")
        first, _, err1 = tracer(tmp_path, "first", job.pid)
        wait_until(lambda: bridge_states(log)[-1:] == ["active"], 60, "the first tracer's handshake")
        go.touch()
        time.sleep(0.3)  # ops running, some throwing
        first.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        first.wait()
        wait_until(lambda: bridge_states(log)[-1] == "off", 30, "the callback off after the kill")
        off_s = time.monotonic() - killed
        # One poll of 100 ms, plus the scheduling of the bridge's thread on a
        # busy machine: the bound says it is the poll, not a timeout.
        assert off_s < 5.0, off_s
        last, out3, err3 = tracer(tmp_path, "last", job.pid)
        wait_until(lambda: bridge_states(log)[-1] == "active" or last.poll() is not None, 120,
                   "the last tracer's handshake")
        assert last.poll() is None, err3.read_text()
        last.send_signal(signal.SIGSTOP)
        wait_until(lambda: stopped(last.pid), 60, "the last tracer to stop")
        # The rest of the job's ops (~10 s of ~840,000 calls) run while its
        # reader is stopped.
        wait_for(str(log), "RESULT", 600, job)
        assert stopped(last.pid)
        last.send_signal(signal.SIGCONT)
        assert job.wait(timeout=600) == 0, log.read_text()[-3000:]
        assert last.wait(timeout=120) == 0, err3.read_text()[-3000:]
    finally:
        if job.poll() is None:
            job.kill()
    assert result_line(log.read_text()) == raising_plain
    e3 = err3.read_text()
    assert "# of Calls and CPU times are exact" in e3, e3[-3000:]
    assert re.search(r"\d+ op call\(s\) the op observer could not record \(its buffer was full\)", e3), e3[-3000:]
    assert "Profile stats for: records" in out3.read_text()


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
