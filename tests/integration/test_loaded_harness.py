"""`make test-loaded`'s harness, tests/with_cpu_hogs.sh: the CPU hogs run
while the command runs, its exit status comes back, and no hog outlives the
script, whether the command fails, is interrupted, or the script is killed."""
import os
import re
import signal
import subprocess

from busy import wait_until
from conftest import ROOT

HOGS = os.path.join(ROOT, "tests", "with_cpu_hogs.sh")


def hog_pids(stderr_text):
    m = re.search(r"with_cpu_hogs: (\d+) CPU-bound process\(es\):([\d ]+)", stderr_text)
    assert m, stderr_text
    pids = [int(p) for p in m.group(2).split()]
    assert len(pids) == int(m.group(1)), stderr_text
    return pids


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def running_child(parent, comm):
    """A child of `parent` that has exec'd `comm` (not a shell still forking)."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                text = f.read()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        if name == comm and int(text.rsplit(")", 1)[1].split()[1]) == parent:
            return int(d)
    return None


def test_the_commands_status_comes_back_and_the_hogs_end():
    r = subprocess.run([HOGS, "-n", "2", "sh", "-c", "sleep 2; exit 3"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, r.stderr
    pids = hog_pids(r.stderr)
    assert len(pids) == 2
    wait_until(lambda: not any(alive(p) for p in pids), 30, "the hogs to end")


def test_hogs_burn_cpu_while_the_command_runs(tmp_path):
    err = tmp_path / "err"
    with open(err, "w") as e:
        # As from a terminal: SIGINT at its default.  Run from a background
        # job (`make test &`, a CI runner's `cmd &`), everything inherits it
        # ignored, and a shell cannot trap a signal ignored on entry, nor
        # does sleep die of it.
        p = subprocess.Popen([HOGS, "-n", "2", "sleep", "600"], stderr=e, start_new_session=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        pids = wait_until(lambda: "CPU-bound" in err.read_text() and hog_pids(err.read_text()), 60, "the hogs")
        before = [cpu_ticks(h) for h in pids]
        wait_until(lambda: all(cpu_ticks(h) > b for h, b in zip(pids, before)), 60, "the hogs to use CPU")
        # The command is running (exec'd): a SIGINT that lands while dash is
        # still forking it is taken by the child's copy of the script's trap
        # and lost when it execs, and sleep then runs its 600 s (CI saw this
        # twice on a loaded machine; a user's Ctrl-C at that instant too).
        wait_until(lambda: running_child(p.pid, "sleep"), 60, "the command to start")
        # Ctrl-C reaches the whole foreground group: the command ends, so do the hogs.
        os.killpg(p.pid, signal.SIGINT)
        assert p.wait(timeout=60) != 0
        wait_until(lambda: not any(alive(h) for h in pids), 30, "the hogs to end after SIGINT")
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)


def test_no_hog_outlives_a_killed_script(tmp_path):
    err = tmp_path / "err"
    with open(err, "w") as e:
        p = subprocess.Popen([HOGS, "-n", "2", "sleep", "30"], stderr=e)  # the orphaned sleep ends by itself
    try:
        pids = wait_until(lambda: "CPU-bound" in err.read_text() and hog_pids(err.read_text()), 60, "the hogs")
        p.send_signal(signal.SIGKILL)  # no trap runs: each hog notices its parent is gone
        p.wait()
        wait_until(lambda: not any(alive(h) for h in pids), 60, "the hogs to end after the script's SIGKILL")
    finally:
        if p.poll() is None:
            p.kill()
