"""`ltrace-bpf ps` and `--all` on real processes: torch on the host, a plain
CPython (not listed), real containers (own pid, mount and UTS namespaces, a
Docker-named cgroup) from the sid root, odd bytes in names, a deleted root,
zombies, processes that come and go during the scan; and --all attaching to
processes in two containers and on the host at once, one of them started
after the attach, one report each."""
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest

import containers
import lightning_site
from conftest import LTRACE, PYENV, SITE_PACKAGES, VENV_PY, WORKLOADS, parse_simple_report, wait_for

# Sees every process on the machine: not beside other tests (pytest.ini).
pytestmark = pytest.mark.serial

IDLE = os.path.join(WORKLOADS, "idle_import.py")
ACTIONS = os.path.join(WORKLOADS, "profiler_actions.py")
COLUMNS = ["PID", "NSPID", "HOST", "CONTAINER", "RANK", "LOCAL", "WORLD", "PYTHON", "TORCH", "LIGHTNING", "CUDA",
           "XLA", "COMMAND", "PROFILE"]


def parse_table(text):
    """pid -> {column: cell}, by the header's column positions (code points)."""
    lines = text.splitlines()
    assert lines and lines[0].split() == COLUMNS, text
    starts = [lines[0].index(c) for c in COLUMNS]
    rows = {}
    for line in lines[1:]:
        cells = [line[a:b].strip() for a, b in zip(starts, starts[1:] + [None])]
        row = dict(zip(COLUMNS, cells))
        rows[int(row["PID"])] = row
    return rows


def ps(*args, timeout=60):
    """Runs `ltrace-bpf ps`; checks it is clean, printable UTF-8; returns
    (rows, stderr, CPU seconds it used: user + system, which a busy machine
    does not stretch as it does wall time)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([LTRACE, "ps"] + list(args), capture_output=True, timeout=timeout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out, err = r.stdout.decode("utf-8"), r.stderr.decode("utf-8")  # strict: no invalid UTF-8
    assert r.returncode == 0, err
    assert "Traceback" not in err and "terminate" not in err and "internal error" not in err, err
    for line in (out + err).splitlines():
        assert not any(ord(c) < 0x20 and c != "\t" or 0x7f <= ord(c) < 0xa0 for c in line), repr(line)
    return parse_table(out), err, cpu


def start(cmd, tmp_path, name, env=None, ready=True, timeout=600, **kw):
    """Starts a workload on the host; waits for its READY line."""
    log = tmp_path / f"{name}.out"
    full = dict(os.environ, PYTHONIOENCODING="utf-8", **(env or {}))
    with open(log, "w") as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=full, **kw)
    if ready:
        wait_for(str(log), "READY", timeout, p)
    return p, log


def stop(*procs):
    for p in procs:
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()


@pytest.fixture(scope="module")
def sid_root():
    return containers.root_path("sid")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return lightning_site.build(str(tmp_path_factory.mktemp("site") / "site"), "2.6.6")


def test_ps_host_torch_and_plain_python(tmp_path, site):
    torch_p, _ = start([VENV_PY, IDLE, "--wait-file", str(tmp_path / "go")], tmp_path, "torch",
                       env={"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"})
    plain, _ = start([VENV_PY, IDLE, "--import", ""], tmp_path, "plain")
    old = None
    py37 = sorted(d for d in os.listdir(PYENV) if d.startswith("3.7."))
    try:
        if py37:  # eligible by its Lightning site, but too old to profile
            old, _ = start([os.path.join(PYENV, py37[-1], "bin", "python3.7"), IDLE, "--import", ""], tmp_path,
                           "old", env={"PYTHONPATH": site})
        rows, err, cpu = ps("-v")
        row = rows[torch_p.pid]
        assert row["PYTHON"] == "3.11" and row["TORCH"].startswith("2.15.0"), row
        assert row["LIGHTNING"] == "2.6.6", row  # the venv's pytorch_lightning, next to its torch
        assert (row["RANK"], row["LOCAL"], row["WORLD"]) == ("1", "1", "2"), row
        assert row["HOST"] == socket.gethostname() and row["CONTAINER"] == "-" and row["NSPID"] == "-", row
        assert row["CUDA"] == "no" and row["PROFILE"] == "yes", row
        assert "idle_import.py" in row["COMMAND"], row
        # A CPython with neither torch nor Lightning: not listed, and -v says why.
        assert plain.pid not in rows
        assert re.search(rf"pid {plain.pid} \(.*\): not listed: CPython without torch", err), err
        assert "kernel thread(s)" in err, err
        if old:
            row = rows[old.pid]
            assert row["PYTHON"] == "3.7" and row["TORCH"] == "-" and row["LIGHTNING"] == "?", row
            assert row["PROFILE"].startswith("no: CPython 3.7 is not supported"), row
        # docs/benchmarks.md: well under 1 s of wall time on an idle machine;
        # its CPU time is what a busy machine leaves unchanged.
        assert cpu < 2, cpu
    finally:
        stop(torch_p, plain, old)


def test_ps_odd_bytes_are_escaped(tmp_path):
    # argv[0] and an argument that are not UTF-8, control characters, and a
    # thread name of odd bytes; torch from the venv's site through PYTHONPATH.
    env = {"PYTHONPATH": SITE_PACKAGES[0]}
    odd, _ = start([b"py\xff", "idle_import.py", b"\xfe\t\n", "--comm", "ff6261640a"], tmp_path, "odd", env=env,
                   executable="/usr/bin/python3.11", cwd=WORKLOADS)
    quiet, _ = start([b"q\xc3", "idle_import.py", "--import", "", "--comm", "c328290a"], tmp_path, "quiet",
                     executable="/usr/bin/python3.11", cwd=WORKLOADS)
    try:
        rows, err, _ = ps("-v")
        assert rows[odd.pid]["COMMAND"].startswith("py\\xff idle_import.py \\xfe\\x09\\x0a"), rows[odd.pid]
        assert rows[odd.pid]["PROFILE"] == "yes", rows[odd.pid]
        assert f"pid {quiet.pid} (\\xc3()\\x0a): not listed" in err, err
    finally:
        stop(odd, quiet)


def test_ps_deleted_root_zombie_and_races(tmp_path):
    jail = tmp_path / "jail"
    jail.mkdir()
    jailed, _ = start([VENV_PY, IDLE, "--chroot", str(jail)], tmp_path, "jailed")
    # A zombie: its parent never reaps it.
    parent, log = start([sys.executable, "-c", "import os, time\npid = os.fork()\nif pid == 0: os._exit(0)\n"
                         "print('READY', pid, flush=True)\ntime.sleep(120)"], tmp_path, "zombie")
    zombie = int(log.read_text().split()[1])
    churn = subprocess.Popen(["bash", "-c", "while :; do /bin/true; python3 -c pass; done"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        jail.rmdir()
        wait_for(f"/proc/{zombie}/stat", ") Z ", 10)
        rows, err, _ = ps("-v")
        row = rows[jailed.pid]
        assert row["PROFILE"] == "no: its root directory was deleted, its files cannot be read", row
        assert row["TORCH"] == "?", row  # mapped, but torch/version.py cannot be opened any more
        assert zombie not in rows
        assert "zombie(s)" in err, err
        # Processes that start and exit while the census runs: never a crash
        # or a broken row.
        for _ in range(15):
            rows, err, _ = ps()
            for r in rows.values():
                assert r["PROFILE"] == "yes" or r["PROFILE"].startswith("no: "), r
    finally:
        churn.kill()
        churn.wait()
        stop(jailed, parent)


def test_ps_in_a_container(sid_root, tmp_path):
    cid = uuid.uuid4().hex + uuid.uuid4().hex
    box = containers.Box(sid_root, mode="container", hostname="ps-box-a", cgroup_id=cid)
    script = box.put(IDLE)
    go = box.inside + "/go"
    log = tmp_path / "box.out"
    try:
        with open(log, "w") as out:
            box.start(["python3.13", script, "--wait-file", go], env={"PYTHONPATH": "/opt/site/cp313"}, stdout=out)
        wait_for(str(log), "READY", 600, box.proc)
        with open(f"/proc/{box.pid}/status") as f:
            nspid = re.search(r"^NSpid:\s+(.*)$", f.read(), re.M).group(1).split()
        assert len(nspid) == 2, nspid
        rows, _, _ = ps()
        row = rows[box.pid]
        assert row["NSPID"] == nspid[-1] == "1", row  # python is the container's first process
        assert row["HOST"] == "ps-box-a", row
        if box.cgroup_dirs:
            assert row["CONTAINER"] == cid[:12], row
        else:
            pytest.fail("no cgroup v1 pids or v2 hierarchy to put the container in")
        assert row["PYTHON"] == "3.13" and row["TORCH"].startswith("2.15.0") and row["LIGHTNING"] == "2.6.6", row
        assert row["PROFILE"] == "yes", row
        open(box.host(go), "w").close()
        assert box.wait(timeout=60) == 0
    finally:
        box.stop()


def reports_by_pid(text):
    """pid -> simple-report rows, from the "==> pid N ... <==" sections."""
    out = {}
    parts = re.split(r"^==> pid (\d+)[^\n]*<==\n", text, flags=re.M)
    for pid, body in zip(parts[1::2], parts[2::2]):
        out[int(pid)] = parse_simple_report(body)
    return out


def check_counts(rows, result_text, who):
    result = json.loads(result_text.split("RESULT ", 1)[1])
    expected = dict(result["counts"])
    expected.pop("direct")  # a bare start()/stop() from Python code is not seen (test_versions.py)
    for name, count in expected.items():
        assert name in rows and int(rows[name][1]) == count, (who, name, rows.get(name))


def test_all_two_containers_and_the_host(sid_root, tmp_path, site):
    boxes, logs, pids = [], [], {}
    lt = host = late = None
    try:
        for name in ("all-a", "all-b"):
            box = containers.Box(sid_root, mode="container", hostname=name,
                                 cgroup_id=uuid.uuid4().hex + uuid.uuid4().hex)
            boxes.append(box)
            inner_site = box.put(site)
            script = box.put(ACTIONS)
            log = tmp_path / f"{name}.out"
            with open(log, "w") as out:
                box.start(["python3.13", script, "--wait-file", box.inside + "/go"],
                          env={"PYTHONPATH": inner_site}, stdout=out)
            wait_for(str(log), "READY", 120, box.proc)
            logs.append((name, log, lambda b=box: open(b.host(b.inside + "/go"), "w").close()))
            pids[box.pid] = name
        go = tmp_path / "go"
        host, host_log = start([VENV_PY, ACTIONS, "--wait-file", str(go)], tmp_path, "host",
                               env={"PYTHONPATH": site})
        pids[host.pid] = "host"
        logs.append(("host", host_log, go.touch))

        lt_out, lt_err = tmp_path / "lt.out", tmp_path / "lt.err"
        with open(lt_out, "w") as o, open(lt_err, "w") as e:
            lt = subprocess.Popen([LTRACE, "--all", "--duration", "60", "-v"], stdout=o, stderr=e, cwd=tmp_path)
        wait_for(str(lt_err), "attached", 60, lt)
        # Started after the attach: found by the /proc poll.
        late_go = tmp_path / "late-go"
        late, late_log = start(["/usr/bin/python3.11", ACTIONS, "--wait-file", str(late_go)], tmp_path, "late",
                               env={"PYTHONPATH": site})
        pids[late.pid] = "late"
        logs.append(("late", late_log, late_go.touch))
        for pid in pids:
            wait_for(str(lt_err), f"pid {pid}: CPython", 30, lt)
        for _, _, release in logs:
            release()
        for box in boxes:
            assert box.wait(timeout=120) == 0
        assert host.wait(timeout=120) == 0 and late.wait(timeout=120) == 0
        lt.send_signal(signal.SIGINT)
        assert lt.wait(timeout=60) == 0, lt_err.read_text()
        reports = reports_by_pid(lt_out.read_text(encoding="utf-8"))
        for (name, log, _), pid in zip(logs, pids):
            assert pid in reports, (name, pid, lt_out.read_text(encoding="utf-8"))
            check_counts(reports[pid], log.read_text(encoding="utf-8"), name)
        err = lt_err.read_text()
        assert "CPython 3.13" in err and "CPython 3.11" in err, err
    finally:
        stop(lt, host, late)
        for box in boxes:
            box.stop()


def test_record_all_then_report(tmp_path, site):
    go = tmp_path / "go"
    target, log = start([VENV_PY, ACTIONS, "--wait-file", str(go)], tmp_path, "host", env={"PYTHONPATH": site})
    trace = tmp_path / "all.ltrace"
    lt_err = tmp_path / "lt.err"
    old = None
    py37 = sorted(d for d in os.listdir(PYENV) if d.startswith("3.7."))
    try:
        if py37:  # eligible, cannot be profiled: a note, not an error
            old, _ = start([os.path.join(PYENV, py37[-1], "bin", "python3.7"), IDLE, "--import", ""], tmp_path,
                           "old", env={"PYTHONPATH": site})
        with open(lt_err, "w") as e:
            lt = subprocess.Popen([LTRACE, "record", "--all", "-o", str(trace), "--duration", "60", "-v"],
                                  stdout=subprocess.DEVNULL, stderr=e)
        wait_for(str(lt_err), f"pid {target.pid}: CPython", 60, lt)
        go.touch()
        assert target.wait(timeout=120) == 0
        lt.send_signal(signal.SIGINT)
        assert lt.wait(timeout=60) == 0, lt_err.read_text()
        r = subprocess.run([LTRACE, "report", str(trace)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        reports = reports_by_pid(r.stdout)
        rows = reports[target.pid] if reports else parse_simple_report(r.stdout)
        check_counts(rows, log.read_text(encoding="utf-8"), "host")
        if old:
            assert re.search(rf"pid {old.pid} \(python3\.7\): not profiled: CPython 3\.7 is not supported",
                             lt_err.read_text()), lt_err.read_text()
    finally:
        stop(target, old)


def test_all_finds_nothing_exit_code(tmp_path):
    # Serial (marked so): no other test's torch process runs beside it, so
    # finding one is a failure, never a skip.
    r = subprocess.run([LTRACE, "--all", "--duration", "1"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 3, f"exit {r.returncode}; another torch/Lightning process on this host?\n{r.stderr}"
    assert r.stderr.strip().splitlines()[-1] == \
        "ltrace-bpf: --all: no process with torch or Lightning loaded was found", r.stderr
