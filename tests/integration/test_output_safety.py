"""Every file ltrace-bpf writes, as root on a shared machine (issue 17):
never through a symbolic link or hard link someone planted, never into
another user's file, never below another user's directory link; under sudo
what it creates belongs to the invoking user, and traces are 0600."""
import os
import stat
import subprocess

import pytest

from conftest import LTRACE, VENV_PY, WORKLOADS

TRAIN = os.path.join(WORKLOADS, "train_lightning.py")
INVOKER = 65534  # "nobody": the user who ran sudo
STRANGER = 12345  # a third user who planted something
UNSAFE = 14  # ExitCode::unsafe_output

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (BPF, chown)")


def sudo_env():
    return dict(os.environ, SUDO_UID=str(INVOKER), SUDO_GID=str(INVOKER), SUDO_USER="nobody")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """One real Lightning run recorded under "sudo": the trace is the
    invoking user's and private."""
    tmp = tmp_path_factory.mktemp("safety")
    trace = tmp / "run.ltrace"
    r = subprocess.run([LTRACE, "run", "--no-gpu", "--off-cpu", "-o", str(trace), "--", VENV_PY, TRAIN,
                        "--profiler", "none", "--epochs", "1", "--batches", "8"],
                       capture_output=True, text=True, timeout=600, env=sudo_env())
    assert r.returncode == 0, r.stderr[-3000:]
    st = trace.stat()
    assert (st.st_uid, st.st_gid) == (INVOKER, INVOKER)
    assert stat.S_IMODE(st.st_mode) == 0o600
    return tmp, trace


# Each writer of `report`: its options with OUT standing for the file written.
WRITERS = {
    "chrome": ["--chrome", "OUT"],
    "html": ["--html", "OUT"],
    "flamegraph": ["--flamegraph", "OUT"],
    "collapsed": ["--collapsed", "OUT"],
    "speedscope": ["--speedscope", "OUT"],
    "dump": ["--dump", "OUT"],
}


def report(trace, writer, out, env=None):
    args = [str(out) if a == "OUT" else a for a in WRITERS[writer]]
    return subprocess.run([LTRACE, "report", str(trace)] + args, capture_output=True, text=True, timeout=300,
                          env=env)


@pytest.mark.parametrize("writer", list(WRITERS))
def test_each_writer_refuses_planted_links_and_files(recorded, tmp_path, writer):
    _, trace = recorded
    victim = tmp_path / "victim"
    victim.write_text("precious")
    # A symbolic link in place of the output file.
    sym = tmp_path / "sym.out"
    sym.symlink_to(victim)
    r = report(trace, writer, sym)
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == UNSAFE and last.startswith("ltrace-bpf: not writing") and "symbolic link" in last, r.stderr
    # A hard link to a file the tool may write (root's own).
    hard = tmp_path / "hard.out"
    os.link(victim, hard)
    r = report(trace, writer, hard)
    assert r.returncode == UNSAFE and "hard link" in r.stderr, r.stderr
    # Another user's file.
    planted = tmp_path / "planted.out"
    planted.write_text("theirs")
    os.chown(planted, STRANGER, STRANGER)
    r = report(trace, writer, planted)
    assert r.returncode == UNSAFE and "another user" in r.stderr, r.stderr
    assert planted.read_text() == "theirs"
    # Another user's link to a directory, on the way to the file.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    dirlink = tmp_path / "dirlink"
    dirlink.symlink_to(elsewhere)
    os.lchown(dirlink, STRANGER, STRANGER)
    r = report(trace, writer, dirlink / "x.out")
    assert r.returncode == UNSAFE and "symbolic link of another user" in r.stderr, r.stderr
    assert not (elsewhere / "x.out").exists()
    assert victim.read_text() == "precious"
    # The same writer writes a fresh file, for the invoking user.
    good = tmp_path / "sub" / "good.out"
    good.parent.mkdir()
    r = report(trace, writer, good, env=sudo_env())
    assert r.returncode == 0, r.stderr
    assert good.stat().st_uid == INVOKER and good.stat().st_size > 0


def test_lightning_report_files(recorded, tmp_path):
    """--dirpath/--filename appends Lightning's fit-NAME.txt: never through a
    planted link; the directory it creates is the invoking user's."""
    _, trace = recorded
    victim = tmp_path / "victim"
    victim.write_text("precious")
    d = tmp_path / "reports"
    d.mkdir()
    (d / "fit-prof.txt").symlink_to(victim)
    r = subprocess.run([LTRACE, "report", str(trace), "--dirpath", str(d), "--filename", "prof"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == UNSAFE and "symbolic link" in r.stderr, r.stderr
    assert victim.read_text() == "precious"
    fresh = tmp_path / "new" / "deeper"
    r = subprocess.run([LTRACE, "report", str(trace), "--dirpath", str(fresh), "--filename", "prof"],
                       capture_output=True, text=True, timeout=300, env=sudo_env())
    assert r.returncode == 0, r.stderr
    assert (fresh / "fit-prof.txt").stat().st_uid == INVOKER
    assert fresh.stat().st_uid == INVOKER and fresh.parent.stat().st_uid == INVOKER
    assert "Action" in (fresh / "fit-prof.txt").read_text()


def test_merge_outputs(recorded, tmp_path):
    """report DIR --merge: the merged Chrome trace and the per-rank traces."""
    _, trace = recorded
    traces = tmp_path / "traces"
    traces.mkdir()
    os.link(trace, traces / "rank0.ltrace")  # the input may have links; only outputs are checked
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "merged.json").symlink_to(victim)
    r = subprocess.run([LTRACE, "report", str(traces), "--merge", "--chrome", str(tmp_path / "merged.json")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == UNSAFE and "symbolic link" in r.stderr, r.stderr
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    planted = ranks / "rank-0.json"  # reports/cluster/merged_trace.cpp: rank_trace_filename
    planted.write_text("theirs")
    os.chown(planted, STRANGER, STRANGER)
    r = subprocess.run([LTRACE, "report", str(traces), "--merge", "--chrome-dir", str(ranks)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == UNSAFE and "another user" in r.stderr, r.stderr
    assert victim.read_text() == "precious" and planted.read_text() == "theirs"
    os.unlink(planted)
    r = subprocess.run([LTRACE, "report", str(traces), "--merge", "--chrome-dir", str(ranks / "new")],
                       capture_output=True, text=True, timeout=300, env=sudo_env())
    assert r.returncode == 0, r.stderr
    assert (ranks / "new").stat().st_uid == INVOKER and (ranks / "new" / "rank-0.json").stat().st_uid == INVOKER
