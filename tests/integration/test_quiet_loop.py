"""The drain loop sleeps while its targets wait (issue 33, point 6;
user/collector/session.cpp, "Sleeping"): no timer of its own wakes it
more than about once a second, a record or a library load does."""
import os
import signal
import subprocess
import sys

from conftest import LTRACE, VENV_PY, WORKLOADS, logged_run, wait_for

WAITING_JOB = "import torch, time\nprint('READY', flush=True)\nwhile True:\n    time.sleep(3600)\n"


def scheduled(pid):
    """How many times the process's threads were put on a CPU (each wake-up is one)."""
    n = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                n += int(f.read().split()[2])
        except (OSError, IndexError, ValueError):
            pass
    return n


def test_the_tracer_sleeps_while_its_target_waits(tmp_path):
    """Attached with ops (the op observer in the job, idle) to a job asleep
    in time.sleep: over 3 s the tracer's threads are woken at most 4 times
    a second, plus a few (its once-a-second backstop, the pending GPU
    probes' 5 s backstop).  The loop it replaces napped 20 ms: 150 or more."""
    job = subprocess.Popen([VENV_PY, "-c", WAITING_JOB], stdout=subprocess.PIPE, text=True)
    try:
        assert job.stdout.readline().strip() == "READY"
        with logged_run([LTRACE, "--pid", str(job.pid), "-v", "--report", "simple,ops"], tmp_path) as (lt, out, err):
            text = wait_for(str(err), "attached", 120, lt)
            assert "op observer" in text or "ops" in text, text[-2000:]
            before = scheduled(lt.pid)
            window_s = 3
            try:
                lt.wait(timeout=window_s)
            except subprocess.TimeoutExpired:
                pass
            woken = scheduled(lt.pid) - before
            lt.send_signal(signal.SIGINT)
            assert lt.wait(timeout=120) == 0, open(err).read()[-3000:]
        assert woken <= 4 * window_s + 4, f"{woken} wake-ups in {window_s} s"
        print(f"tracer woken {woken} times in {window_s} s while its target slept")
    finally:
        job.kill()
        job.wait()


def test_a_library_loaded_while_attached_is_probed_at_its_load(tmp_path):
    """A CPython attached before it imports torch: its loader tells the
    loop of the load, and the op observer starts then.  The retry poll is
    set to 10 minutes (LTRACE_BPF_PENDING_ATTACH_MS, which the told
    targets' backstop follows), so only the load being told can start it;
    the 7 negs run once it measures every call, and are counted exactly."""
    a, b = tmp_path / "a", tmp_path / "b"
    job = subprocess.Popen([VENV_PY, os.path.join(WORKLOADS, "late_import.py"), "--wait-file", str(a), "--ops-file",
                            str(b)], stdout=subprocess.PIPE, text=True)
    try:
        assert job.stdout.readline().startswith("READY")
        env = dict(os.environ, LTRACE_BPF_PENDING_ATTACH_MS="600000")
        with logged_run([LTRACE, "--pid", str(job.pid), "-v", "--no-gpu", "--report", "ops", "--row-limit", "-1"],
                        tmp_path, env=env) as (lt, out, err):
            wait_for(str(err), "attached", 120, lt)
            a.touch()
            wait_for(str(err), "the op observer measures every call", 300, lt)
            b.touch()
            assert job.wait(timeout=120) == 0
            assert lt.wait(timeout=300) == 0, open(err).read()[-3000:]
            report = open(out).read()
        calls = {}
        for line in report.splitlines():
            cells = line.split()
            if cells and cells[0] == "aten::neg":
                calls[cells[0]] = int(cells[-1])
        assert calls == {"aten::neg": 7}, (report[-3000:], open(err).read()[-3000:])
    finally:
        if job.poll() is None:
            job.kill()
        job.wait()


if __name__ == "__main__":
    sys.exit("run with pytest")
