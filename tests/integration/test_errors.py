"""Bad input: one clear line on stderr, the documented exit code, no crash
or stack dump."""
import os
import subprocess
import time

import pytest

from conftest import LTRACE, PYENV, WORKLOADS, wait_for

USAGE, NO_PROC, NOT_PY, UNSUPPORTED, PERM = 2, 3, 4, 5, 6


def lt(*args, **kw):
    return subprocess.run([LTRACE] + list(args), capture_output=True, text=True, timeout=60, **kw)


def one_line(r):
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("ltrace-bpf: ")
    assert "Traceback" not in r.stderr and "terminate" not in r.stderr
    return lines[0]


@pytest.mark.parametrize("args,code,text", [
    (["--bogus"], USAGE, "unknown option '--bogus'"),
    (["--pid", "abc"], USAGE, "invalid pid 'abc'"),
    (["--pid", "-5"], USAGE, "invalid pid"),
    (["--pid"], USAGE, "needs a value"),
    (["--all", "--pid", "1"], USAGE, "--all takes every torch/Lightning process"),
    (["ps", "--pid", "1"], USAGE, "ps takes no option but -v"),
    (["--pid", "1", "--duration", "soon"], USAGE, "invalid duration"),
    (["--pid", "1", "--dirpath", "x"], USAGE, "go together"),
    (["--pid", "1", "--report", "nope"], USAGE, "unknown report"),
    (["--pid", "4000000"], NO_PROC, "no such process: 4000000"),
])
def test_usage_errors(args, code, text):
    r = lt(*args)
    assert r.returncode == code, r.stderr
    assert text in one_line(r)


def test_help_lists_exit_codes():
    r = lt("--help")
    assert r.returncode == 0
    assert "exit codes:" in r.stdout and "6 missing privileges" in r.stdout


@pytest.fixture
def sleeper():
    p = subprocess.Popen(["sleep", "60"])
    yield p
    p.kill()


def test_not_python(sleeper):
    r = lt("--pid", str(sleeper.pid))
    assert r.returncode == NOT_PY
    assert "is not a CPython process" in one_line(r)


def start_python(python):
    p = subprocess.Popen([python, "-c", "import time; print('READY', flush=True); time.sleep(60)"],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().startswith("READY")
    return p


@pytest.mark.parametrize("version", ["3.7", "3.6"])
def test_unsupported_python(version):
    found = sorted(d for d in os.listdir(PYENV) if d.startswith(version + "."))
    if not found:
        pytest.skip(f"no CPython {version} on this machine")
    p = start_python(os.path.join(PYENV, found[-1], "bin", "python" + version))
    try:
        r = lt("--pid", str(p.pid))
        assert r.returncode == UNSUPPORTED, r.stderr
        assert f"CPython {version} is not supported" in one_line(r)
    finally:
        p.kill()


def test_missing_privileges():
    p = start_python("/usr/bin/python3.11")
    try:
        r = lt("--pid", str(p.pid), preexec_fn=lambda: (os.setgid(65534), os.setuid(65534)))
        assert r.returncode == PERM, r.stderr
        line = one_line(r)
        assert "CAP_SYS_PTRACE" in line or "CAP_BPF" in line
    finally:
        p.kill()


def test_python_without_lightning_gets_empty_report_and_hint():
    p = start_python("/usr/bin/python3.11")
    try:
        r = lt("--pid", str(p.pid), "--duration", "0.3")
        assert r.returncode == 0, r.stderr
        assert r.stdout == "Profiler Report\n\n"
        assert "no Lightning actions seen" in r.stderr
    finally:
        p.kill()


def test_sigterm_prints_report(tmp_path):
    p = start_python("/usr/bin/python3.11")
    try:
        err_path = tmp_path / "lt.err"
        with open(err_path, "w") as err_file:
            lt_proc = subprocess.Popen([LTRACE, "--pid", str(p.pid), "-v"], stdout=subprocess.PIPE,
                                       stderr=err_file, text=True)
        wait_for(str(err_path), "attached", 60, lt_proc)  # a fixed sleep can end before a busy machine attaches
        lt_proc.terminate()
        out, _ = lt_proc.communicate(timeout=30)
        err = err_path.read_text()
        assert lt_proc.returncode == 0, err
        assert out == "Profiler Report\n\n"
        assert p.poll() is None  # the target is untouched
    finally:
        p.kill()


@pytest.mark.parametrize("code,want", [("import sys; sys.exit(3)", 3), ("pass", 0),
                                       ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", 128 + 15)])
def test_run_returns_the_commands_status(code, want):
    """`run` exits with the command's status, 128 + signal when it was
    killed (as time, perf record and nsys do), after printing its report."""
    r = subprocess.run([LTRACE, "run", "--no-gpu", "--", "/usr/bin/python3.11", "-c", code], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == want, r.stderr
    assert "lost events" in r.stderr, r.stderr  # the session ended normally first


def test_kernel_thread_is_named_as_such():
    """A kernel thread (kthreadd, pid 2) is not a CPython process: exit 4 and
    one line that says why, not a claim about privileges we have."""
    r = subprocess.run([LTRACE, "--pid", "2"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 4, r.stderr
    assert "kernel thread" in r.stderr and "CAP_SYS_PTRACE" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
