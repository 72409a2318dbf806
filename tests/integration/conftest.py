"""Shared harness: start a real target, attach the real ltrace-bpf (real BPF
on this kernel), release the target, collect everything."""
import contextlib
import glob
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LTRACE = os.path.join(ROOT, "build", "ltrace-bpf")
VENV_PY = os.path.join(ROOT, ".venv", "bin", "python")
SITE_PACKAGES = glob.glob(os.path.join(ROOT, ".venv", "lib", "python3*", "site-packages"))
WORKLOADS = os.path.join(ROOT, "tests", "workloads")
PYENV = "/root/.pyenv/versions"
# A build of tests/unit (its InjectCli.FromEnvironment is the injector of
# test_inject*.py, its MergedPage test writes test_dashboard.py's page):
# make test passes the ASan build's, so the plain one is never compiled.
UNIT_TESTS = os.environ.get("LT_UNIT_TESTS") or os.path.join(ROOT, "build", "unit-tests")
# Under make test (LT_REQUIRE_ALL=1) every test must run: make deps installed
# what each needs, so a skip there is a failure (pytest_runtest_makereport
# below).  A user's ad-hoc pytest keeps the skips.
REQUIRE_ALL = os.environ.get("LT_REQUIRE_ALL") == "1"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_ALL and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under make test (LT_REQUIRE_ALL=1), where nothing may be missing: {reason}"


# Time per test file (setup + call + teardown of its tests: its wall time on
# the worker that ran it), printed after pytest's own 30 slowest and added
# to build/test-file-times.txt (make integration-test's two passes each add
# theirs): docs/testing.md's "how long" column comes from it.
_FILE_SECONDS = {}


def pytest_runtest_logreport(report):
    name = report.nodeid.split("::", 1)[0]
    _FILE_SECONDS[name] = _FILE_SECONDS.get(name, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    # An xdist worker sees only its own files; the controller sees them all.
    if not _FILE_SECONDS or hasattr(terminalreporter.config, "workerinput"):
        return
    lines = [f"{seconds:8.1f} s  {name}" for name, seconds in
             sorted(_FILE_SECONDS.items(), key=lambda kv: -kv[1])]
    terminalreporter.write_sep("=", "time per test file")
    for line in lines:
        terminalreporter.write_line(line)
    out = os.path.join(ROOT, "build")
    if os.path.isdir(out) and not os.path.islink(out):
        path = os.path.join(out, "test-file-times.txt")
        # O_NOFOLLOW: never write through a planted link (we run as root).
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)
        except OSError:
            return
        workers = getattr(terminalreporter.config.option, "numprocesses", None)
        with os.fdopen(fd, "w") as f:
            f.write(f"# pytest {' '.join(terminalreporter.config.invocation_params.args)} (workers: {workers or 1})\n")
            f.write("\n".join(lines) + "\n")


def pyenv_python(minor):
    found = sorted(glob.glob(f"{PYENV}/3.{minor}.*/bin/python3.{minor}"))
    return found[-1] if found else None


def wait_for(path_or_fn, pattern, timeout, proc=None):
    deadline = time.time() + timeout
    while time.time() < deadline:
        text = open(path_or_fn, encoding="utf-8").read() if os.path.exists(path_or_fn) else ""
        if pattern in text:
            return text
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process exited early (rc={proc.returncode}) waiting for {pattern!r}: {text}")
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {pattern!r} in {path_or_fn}")


@contextlib.contextmanager
def logged_run(cmd, tmp_path, **kw):
    """A command whose stdout and stderr go to tmp_path's `out` and `err`
    files (for wait_for), killed if the test leaves before it ended; yields
    (process, out path, err path)."""
    out, err = tmp_path / "out", tmp_path / "err"
    p = subprocess.Popen(cmd, stdout=open(out, "w"), stderr=open(err, "w"), **kw)
    try:
        yield p, out, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def chromium():
    """The headless browser the page tests load pages in."""
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("chromium is not installed: run `make deps`")


class Run:
    """Result of one attached run."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def report_rows(self):
        return parse_simple_report(self.lt_out)


# Findings a loaded machine raises by itself (another process on the CPU
# slows some steps, or takes the CPU): a test that provokes one finding
# asserts its rank among the others.
LOAD_FINDINGS = ("outliers", "cpu contention")


def findings_past_load(text):
    """The verdict's findings as [(number, kind)] in rank order, without
    those the machine's load may raise (LOAD_FINDINGS)."""
    return [(int(n), k) for n, k in re.findall(r"^  (\d+)\. (.+?) \(pid \d+\)", text, re.M) if k not in LOAD_FINDINGS]


def parse_simple_report(text):
    rows = {}
    for line in text.splitlines():
        if line.startswith("|  ") and not line.startswith("|  Action"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows[cells[0]] = cells[1:]
    return rows


@pytest.fixture
def attach(tmp_path):
    """attach(target_cmd, lt_args=(), env=None) -> Run.

    The target must print READY and wait for the file given by --wait-file."""

    counter = [0]

    def run(target_cmd, lt_args=(), env=None, timeout=900, release=True, before_release=None, subcommand=None):
        counter[0] += 1
        tmp = tmp_path / f"run{counter[0]}"
        tmp.mkdir()
        go = tmp / "go"
        wl_out = tmp / "workload.out"
        lt_out = tmp / "lt.out"
        lt_err = tmp / "lt.err"
        full_env = dict(os.environ, PYTHONIOENCODING="utf-8", **(env or {}))
        with open(wl_out, "w") as wo:
            # [python, script, --wait-file GO, args...]: before any "--" the script may take
            cmd = list(target_cmd[:2]) + ["--wait-file", str(go)] + list(target_cmd[2:])
            target = subprocess.Popen(cmd, stdout=wo,
                                      stderr=subprocess.STDOUT, env=full_env, cwd=tmp)
        try:
            wait_for(str(wl_out), "READY", 600, target)  # torch + Lightning imports: minutes on a busy machine
            with open(lt_out, "w") as lo, open(lt_err, "w") as le:
                lt = subprocess.Popen([LTRACE] + ([subcommand] if subcommand else []) + ["--pid", str(target.pid), "-v"]
                                      + list(lt_args), stdout=lo, stderr=le, cwd=tmp)
            wait_for(str(lt_err), "attached", 120, lt)  # bounds a hang; a busy machine attaches slowly
            if before_release:
                before_release(target.pid)
            if release:
                go.touch()
            target_rc = target.wait(timeout=timeout)
            lt_rc = lt.wait(timeout=300)  # bounds a hang; the report waits for CPU on a busy machine
        finally:
            for p in (target,):
                if p.poll() is None:
                    p.kill()
        return Run(target_rc=target_rc, lt_rc=lt_rc, target_pid=target.pid, target_out=wl_out.read_text(encoding="utf-8"),
                   lt_out=lt_out.read_text(encoding="utf-8"), lt_err=lt_err.read_text(encoding="utf-8"), tmp=tmp)

    return run


@pytest.fixture
def lightning_python():
    """The interpreter with real torch + Lightning (Debian python3.11, in-executable layout)."""
    if not os.path.exists(VENV_PY):
        pytest.fail(".venv missing: run `make deps`")
    return VENV_PY
