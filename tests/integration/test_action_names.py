"""Action names as the target wrote them: long names never merge (issue 20,
point 6), names past the bound keep their start, length and end, and
control characters reach a terminal escaped but files byte-exact (point 11)."""
import json
import os
import subprocess

import pytest

from conftest import LTRACE, WORKLOADS, parse_simple_report, pyenv_python
import lightning_site

LONG = os.path.join(WORKLOADS, "long_names.py")
# What BPF sends of one name (bpf/events.h): the BEGIN's head, then up to 16
# tails of 256 bytes; past that, the 15 tails that continue it and the end.
HEAD_ASCII, HEAD_UNITS, CHUNK, TAILS = 223, 224, 256, 16


def str_kind(name):
    top = max(map(ord, name))
    return 0 if top < 0x80 else 1 if top < 0x100 else 2 if top < 0x10000 else 4


def shown(name):
    """The row name the report gives `name` (docs/design-actions.md)."""
    kind = str_kind(name)
    unit = kind or 1
    head = HEAD_UNITS if kind else HEAD_ASCII
    if len(name) * unit <= head + TAILS * CHUNK:
        return name
    prefix = (head + (TAILS - 1) * CHUNK) // unit
    return name[:prefix] + f"[...cut: {len(name)} characters in all...]" + name[-(CHUNK // unit):]


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    base = tmp_path_factory.mktemp("sites")
    return {"2.3.3": lightning_site.build(str(base / "pl233"), "2.3.3"),
            "2.6.6": lightning_site.build(str(base / "pl266"), "2.6.6")}


def check_rows(text, counts, where):
    rows = parse_simple_report(text)
    for name, calls in counts.items():
        want = shown(name)
        assert want in rows, f"{where}: {want[:60]!r}... ({len(name)} chars) missing; rows: " + \
            repr([r[:60] for r in rows])
        assert int(rows[want][1]) == calls, (where, want[:60], rows[want])
    # nothing merged, nothing extra
    assert len([r for r in rows if r != "Total"]) == len(counts), (where, [r[:60] for r in rows])


# pyenv's (libpython) and Debian's python3.11 (in the executable, PGO: its
# resumes come through the _PyEval_EvalFrameDefault probe).
@pytest.mark.parametrize("minor,python", [(m, pyenv_python(m)) for m in (8, 11, 12, 13)] +
                         [(11, "/usr/bin/python3.11")], ids=["3.8", "3.11", "3.12", "3.13", "3.11-exe"])
def test_long_names_never_merge(attach, sites, tmp_path, minor, python):
    assert python and os.path.exists(python), f"CPython 3.{minor} missing"
    trace = tmp_path / "long.lt"
    run = attach([python, LONG], lt_args=["-o", str(trace)],
                 env={"PYTHONPATH": sites["2.3.3" if minor == 8 else "2.6.6"]})
    assert run.target_rc == 0, run.target_out
    assert run.lt_rc == 0, run.lt_err
    counts = json.loads(run.target_out.split("RESULT ", 1)[1])["counts"]
    check_rows(run.lt_out, counts, "live")
    r = subprocess.run([LTRACE, "report", str(trace)], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode("utf-8")  # strict: never invalid UTF-8
    check_rows(out, counts, "report")
    assert out == run.lt_out  # the same bytes live and from the file
    # the two names past the bound are said to be cut; nothing else is
    cut_calls = sum(c for n, c in counts.items() if shown(n) != n)
    assert f"{cut_calls} action call(s) with a name not seen whole" in run.lt_err, run.lt_err


def read_pty(cmd):
    """Runs `cmd` with stdout and stderr on a terminal; returns (rc, bytes seen)."""
    import pty
    master, slave = pty.openpty()
    p = subprocess.Popen(cmd, stdout=slave, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    seen = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the other side is closed
            break
        if not data:
            break
        seen += data
    os.close(master)
    return p.wait(60), seen


def test_control_characters_escaped_on_a_terminal_only(attach, sites, tmp_path):
    trace = tmp_path / "esc.lt"
    run = attach([pyenv_python(12), LONG, "--set", "escapes"], lt_args=["-o", str(trace)],
                 env={"PYTHONPATH": sites["2.6.6"]})
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    counts = json.loads(run.target_out.split("RESULT ", 1)[1])["counts"]
    # Not a terminal (a file): byte-exact, as Lightning would print them.
    check_rows(run.lt_out, counts, "live to a file")
    assert "clear\x1b[2Jscreen" in run.lt_out and "bell\x07ring" in run.lt_out
    rc, seen = read_pty([LTRACE, "report", str(trace)])
    assert rc == 0, seen
    text = seen.decode("utf-8")
    assert "clear\\x1b[2Jscreen" in text and "bell\\x07ring" in text and "c1\\u009bname" in text, text
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
    # Piped: raw again, the same bytes as live.
    r = subprocess.run([LTRACE, "report", str(trace)], capture_output=True, timeout=60)
    assert r.returncode == 0 and r.stdout.decode("utf-8") == run.lt_out


@pytest.mark.parametrize("version", ["3.14", "3.15"])
def test_long_names_never_merge_sid(tmp_path, version):
    """3.14 and 3.15 (Debian sid, in a chroot): the same reader, the same rows."""
    import containers
    from test_containers import run_boxed
    trace = tmp_path / "long.lt"
    run = run_boxed(containers.root_path("sid"), tmp_path, f"/usr/bin/python{version}", LONG, mode="chroot",
                    site=True, lt_args=["-o", str(trace)])
    assert run.target_rc == 0, run.target_out
    assert run.lt_rc == 0, run.lt_err
    counts = json.loads(run.target_out.split("RESULT ", 1)[1])["counts"]
    check_rows(run.lt_out, counts, "live")
    r = subprocess.run([LTRACE, "report", str(trace)], capture_output=True, timeout=120)
    assert r.returncode == 0 and r.stdout.decode("utf-8") == run.lt_out, r.stderr
