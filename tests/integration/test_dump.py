"""`ltrace-bpf dump`: every thread's stack, state, native leaf and the GIL
holder of a running CPython, read without stopping it.  Real CPythons (pyenv
3.8/3.11/3.12/3.13 and Debian's /usr/bin/python3.11), a workload whose
threads block at known lines (tests/workloads/dump_target.py)."""
import json
import os
import re
import subprocess
import sys
import time

import pytest

import containers
from conftest import LTRACE, WORKLOADS, pyenv_python, wait_for

TARGET = os.path.join(WORKLOADS, "dump_target.py")
# time.sleep: clock_nanosleep (3.11+), select (3.8-3.10).
SLEEP_CALLS = {"clock_nanosleep", "select", "pselect6", "nanosleep"}


def marked_lines():
    lines = {}
    for n, text in enumerate(open(TARGET, encoding="utf-8"), 1):
        m = re.search(r"# at: (\w+)", text)
        if m:
            lines.setdefault(m.group(1), set()).add(n)
    return lines


def pythons():
    out = []
    for minor in (8, 11, 12, 13):
        p = pyenv_python(minor)
        if p:
            out.append(pytest.param(p, id="pyenv-3.%d" % minor))
    if os.path.exists("/usr/bin/python3.11"):
        out.append(pytest.param("/usr/bin/python3.11", id="debian-3.11"))
    return out


class Target:
    def __init__(self, python, *args):
        self.proc = subprocess.Popen([python, TARGET, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("ready "), line
        self.tids = json.loads(line[len("ready "):])
        # "ready" is written before main reaches its marked line: on a busy
        # machine it was still in print() when dumped (CI: line 75, not 81).
        # Wait until it blocks reading stdin (read(0, ...): syscall 0, fd 0).
        if "--wait-file" not in args:
            deadline = time.time() + 60
            while not self._main_reads_stdin():
                assert time.time() < deadline, "the target's main thread never read stdin"
                time.sleep(0.01)

    def _main_reads_stdin(self):
        try:
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/syscall") as f:
                fields = f.read().split()
        except OSError:
            return self.proc.poll() is not None  # gone: the asserts say so
        return len(fields) > 1 and fields[0] == "0" and int(fields[1], 16) == 0

    def finish(self):
        out, _ = self.proc.communicate("quit\n", timeout=60)
        return self.proc.returncode, out

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def dump(pid, *args, timeout=60):
    return subprocess.run([LTRACE, "dump", "--pid", str(pid), *args], capture_output=True, timeout=timeout)


def dump_json(pid, *args):
    r = dump(pid, "--json", *args)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout.decode("utf-8"))  # strict: the output is valid UTF-8


def by_tid(proc):
    return {t["tid"]: t for t in proc["threads"]}


@pytest.mark.parametrize("python", pythons())
def test_dump_finds_each_thread_where_it_blocks(python):
    lines = marked_lines()
    t = Target(python)
    try:
        doc = dump_json(t.proc.pid)
        text = dump(t.proc.pid)
    finally:
        rc, out = t.finish()
    # The target goes on unharmed: it finishes with the output it always gives.
    assert rc == 0 and out == "done 5 threads, burned=True\n", (rc, out)
    [proc] = doc["processes"]
    assert proc["pid"] == t.proc.pid
    threads = by_tid(proc)

    def innermost(role):
        th = threads[t.tids[role]]
        assert th["python"], th
        assert th["frames"], th
        return th, th["frames"][0]

    for role, fn in [("sleeper", "sleeper"), ("reader", "reader"), ("locker", "locker"), ("burner", "burner"),
                     ("main", "main")]:
        th, f = innermost(role)
        assert f["function"] == fn, (role, th)
        assert f["line"] in lines[role], (role, f, lines[role])
        assert f["file"].endswith("dump_target.py"), f
    # The outermost frame of the main thread is the module.
    assert threads[t.tids["main"]]["frames"][-1]["function"] == "<module>"
    # States and the calls they block in.
    assert threads[t.tids["sleeper"]]["syscall"] in SLEEP_CALLS, threads[t.tids["sleeper"]]
    assert threads[t.tids["reader"]]["syscall"] == "read"
    assert threads[t.tids["locker"]]["syscall"] == "futex"
    assert threads[t.tids["main"]]["syscall"] == "read"  # sys.stdin.readline
    for role in ("sleeper", "reader", "locker", "main"):
        th = threads[t.tids[role]]
        assert th["state"] == "sleeping", th
        assert th["native_leaf"] and th["native_leaf"]["dso"].startswith("libc"), th
        assert not th["holds_gil"], th
    # The burner is the only thread that wants the GIL: it holds it.
    assert proc["gil_known"]
    assert proc["gil_tid"] == t.tids["burner"], proc["gil_tid"]
    assert threads[t.tids["burner"]]["holds_gil"]
    # Names that are not plain UTF-8: JSON gives back the target's str ...
    weird = threads[t.tids["weird"]]["frames"]
    assert weird[0]["function"] in ("wait", "Condition.wait"), weird  # Event.wait's Condition.wait
    assert {"function": "w\u00e9ird", "file": "odd\udcff\nname.py", "line": 2} in weird, weird
    # ... and the text is valid UTF-8, the surrogate escaped, the newline too.
    assert text.returncode == 0, text.stderr.decode()
    body = text.stdout.decode("utf-8")
    assert "w\u00e9ird (odd\\udcff\\x0aname.py:2)" in body, body
    assert "Thread %d \"" % t.tids["burner"] in body and "(holds the GIL)" in body
    assert "    sleeper (%s:" % TARGET in body


def test_dump_50_threads_and_children():
    python = pyenv_python(12) or "/usr/bin/python3.11"
    t = Target(python, "--idle", "46", "--child")
    try:
        started = time.monotonic()
        doc = dump_json(t.proc.pid, "--children")
        wall = time.monotonic() - started
    finally:
        rc, out = t.finish()
    assert rc == 0 and out == "done 51 threads, burned=True\n", (rc, out)
    procs = {p["pid"]: p for p in doc["processes"]}
    assert set(procs) == {t.proc.pid, t.tids["child"]}
    parent = procs[t.proc.pid]
    py_threads = [th for th in parent["threads"] if th["python"]]
    assert len(py_threads) == 52  # main + 51
    idlers = [th for th in py_threads if any(f["function"] == "idler" for f in th["frames"])]
    assert len(idlers) == 46
    assert all(th["tid"] and th["syscall"] == "futex" for th in idlers)
    assert procs[t.tids["child"]]["threads"][0]["frames"][0]["function"] == "<module>"
    print("dump of %d threads: read %.1f ms in the process, %.0f ms for the command" %
          (len(parent["threads"]), parent["read_ms"], wall * 1000))


def test_dump_of_a_vanishing_process_fails_cleanly():
    # No such pid: exit 3, one line.
    r = dump(4194303)
    assert r.returncode == 3 and r.stderr.decode().count("\n") == 1, r
    # Not Python: exit 4, not "exited".
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        r = dump(sleeper.pid)
        assert r.returncode == 4 and b"not a CPython" in r.stderr, r
    finally:
        sleeper.kill()
        sleeper.wait()
    # A process whose threads come and go, and which exits while we dump it
    # again and again: every dump is valid JSON or exit 3 with one line; the
    # last ones (pid gone) exit 3.
    python = pyenv_python(11) or "/usr/bin/python3.11"
    churn = ("import threading, time\n"
             "def f(): time.sleep(0.001)\n"
             "end = time.time() + 1.5\n"
             "while time.time() < end:\n"
             "    ts = [threading.Thread(target=f) for _ in range(20)]\n"
             "    [t.start() for t in ts]; [t.join() for t in ts]\n")
    p = subprocess.Popen([python, "-c", churn])
    codes = []
    try:
        while True:
            alive = p.poll() is None
            r = dump(p.pid, "--json")
            codes.append(r.returncode)
            if r.returncode == 0:
                json.loads(r.stdout.decode("utf-8"))
            else:
                assert r.returncode in (3, 4, 5), r  # 4/5: caught before the interpreter is set up
                assert r.stderr.decode().count("\n") == 1, r.stderr
                if r.returncode == 3:
                    assert re.search(r"exited while being dumped|no such process", r.stderr.decode()), r.stderr
            if not alive:
                break
    finally:
        p.kill()
        p.wait()
    print("dumps of an exiting process: %d whole, %d exit 3, %d other" %
          (codes.count(0), codes.count(3), len(codes) - codes.count(0) - codes.count(3)))
    assert codes.count(0) >= 1 and codes[-1] == 3, codes


@pytest.mark.parametrize("minor", [14, 15])
def test_dump_in_a_container(tmp_path, minor):
    """CPython 3.14/3.15 from Debian sid in a pid namespace: tids mapped to
    ours, the GIL holder from the live _Py_DebugOffsets."""
    lines = marked_lines()
    box = containers.Box(containers.root_path("sid"), mode="container")
    try:
        script = box.put(TARGET)
        go = box.inside + "/go"
        os.mkfifo(box.host(go))
        out_path = tmp_path / "target.out"
        with open(out_path, "w") as out:
            box.start(["/usr/bin/python3.%d" % minor, script, "--wait-fifo", go], stdout=out)
        text = wait_for(str(out_path), "\n", 60, box.proc)
        ns_tids = json.loads(text.split("ready ", 1)[1].splitlines()[0])
        host = {}  # tid inside -> tid here
        for tid in os.listdir("/proc/%d/task" % box.pid):
            status = open("/proc/%d/task/%s/status" % (box.pid, tid)).read()
            host[int(re.search(r"NSpid:.*\s(\d+)\n", status).group(1))] = int(tid)
        doc = dump_json(box.pid)
        # The target reads the FIFO (its main thread blocks in open()):
        # this open does not block, and fails (ENXIO) if the target is gone.
        fd = os.open(box.host(go), os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, b"x")
        os.close(fd)
        assert box.wait(60) == 0
        assert out_path.read_text().endswith("done 5 threads, burned=True\n")
    finally:
        box.stop()
    [proc] = doc["processes"]
    assert proc["python"] == "3.%d" % minor
    threads = by_tid(proc)
    for role in ("sleeper", "reader", "locker", "burner"):
        th = threads[host[ns_tids[role]]]
        assert th["frames"][0]["function"] == role and th["frames"][0]["line"] in lines[role], th
    assert proc["gil_known"] and proc["gil_tid"] == host[ns_tids["burner"]], proc["gil_tid"]
