"""The verdict's GC pauses on every CPython here: Debian's 3.11 through its
USDT probes (python:gc__start / gc__done), pyenv's 3.8-3.13, built
without them, through the entry of their invoke_gc_callback
(bpf/pygc.bpf.c). A script with automatic collection off runs 20 full
collections over a known number of fresh reference cycles: the recording
has exactly those 20 generation-2 collections first, each with the count
gc.collect() returned, and durations that add up to about the time the
script measured around its calls."""
import json
import os
import subprocess

import pytest

from conftest import LTRACE, WORKLOADS, pyenv_python, wait_for

CASES = [(m, pyenv_python(m)) for m in range(8, 14)] + [(11, "/usr/bin/python3.11")]


@pytest.mark.parametrize("minor,python", CASES, ids=[f"3.{m}-{'usdt' if p and p.startswith('/usr') else 'callback'}"
                                                     for m, p in CASES])
def test_every_collection_with_its_count(tmp_path, minor, python):
    if python is None or not os.path.exists(python):
        pytest.fail(f"CPython 3.{minor} is not installed at the expected place")
    go, out, trace = tmp_path / "go", tmp_path / "job.out", tmp_path / "gc.ltrace"
    with open(out, "w") as o:
        job = subprocess.Popen([python, os.path.join(WORKLOADS, "gc_cycles.py"), "--wait-file", str(go)],
                               stdout=o, stderr=subprocess.STDOUT)
    try:
        wait_for(str(out), "READY", 60, job)
        err = tmp_path / "lt.err"
        with open(err, "w") as e:
            lt = subprocess.Popen([LTRACE, "record", "--pid", str(job.pid), "-o", str(trace), "--report", "verdict",
                                   "-v"], stderr=e)
        wait_for(str(err), "attached", 60, lt)
        go.touch()
        assert job.wait(timeout=120) == 0, out.read_text()
        assert lt.wait(timeout=60) == 0, err.read_text()
    finally:
        if job.poll() is None:
            job.kill()
    check_collections(trace, out.read_text(), err.read_text())


def check_collections(trace, target_out, lt_err, rounds=20):
    """The recording has the script's `rounds` full collections first, each
    with the count gc.collect() returned, timed within the script's own
    timing of its calls."""
    assert "no garbage-collection probes" not in lt_err, lt_err
    result = json.loads([x for x in target_out.splitlines() if x.startswith("{")][-1])
    dump = subprocess.run([LTRACE, "report", str(trace), "--dump", "-"], capture_output=True, text=True, timeout=60)
    assert dump.returncode == 0, dump.stderr
    pauses = []
    for line in dump.stdout.splitlines():
        f = line.split()
        if len(f) > 2 and f[2] == "py_gc":
            kv = dict(x.split("=", 1) for x in f[3:] if "=" in x)
            pauses.append((int(f[0]) - int(kv["began"]), int(kv["generation"]), int(kv["collected"])))
    # The USDT probes also see the collections of the interpreter's
    # shutdown (_PyGC_CollectNoFail, which runs no gc.callbacks and so no
    # invoke_gc_callback): after the script's.
    pauses = pauses[:rounds]
    assert [g for _, g, _ in pauses] == [2] * rounds, pauses
    assert [c for _, _, c in pauses] == result["collected"], (pauses, result)
    ours, theirs = sum(d for d, _, _ in pauses) / 1e9, sum(result["seconds"])
    # Each pause is inside the script's timing of its call, which adds
    # gc.collect()'s own call and a clock read: ours at most theirs.
    assert 0.5 * theirs <= ours <= theirs * 1.02, (ours, theirs)
