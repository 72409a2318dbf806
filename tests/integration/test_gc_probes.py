"""The verdict's GC pauses on every CPython here: Debian's 3.11 through its
USDT probes (python:gc__start / gc__done), pyenv's 3.8-3.13, built
without them, through the entry of their invoke_gc_callback
(bpf/pygc.bpf.c). A script with automatic collection off runs 20 full
collections over a known number of fresh reference cycles: the recording
has exactly those 20 generation-2 collections first, each with the count
gc.collect() returned, and durations that add up to about the time the
script measured around its calls.

Without either (a stripped libpython: the same pyenv builds with their
symbol table removed), the collections' time is estimated from the stack
samples taken inside one (LT_SAMPLE_IN_GC: the interpreter's
gc.collecting flag and the GIL holder, read by the sampler)."""
import glob
import json
import math
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
    trace, target_out, lt_err = record_gc_cycles(tmp_path, python)
    check_collections(trace, target_out, lt_err)


def record_gc_cycles(tmp_path, python, job_args=(), lt_args=(), env=None):
    """gc_cycles.py on `python`, recorded from its start (`--report verdict`)
    to its end: (the trace, its output, ltrace-bpf's stderr)."""
    go, out, trace = tmp_path / "go", tmp_path / "job.out", tmp_path / "gc.ltrace"
    with open(out, "w") as o:
        job = subprocess.Popen([python, os.path.join(WORKLOADS, "gc_cycles.py"), "--wait-file", str(go), *job_args],
                               stdout=o, stderr=subprocess.STDOUT, env=env)
    try:
        wait_for(str(out), "READY", 60, job)
        err = tmp_path / "lt.err"
        with open(err, "w") as e:
            lt = subprocess.Popen([LTRACE, "record", "--pid", str(job.pid), "-o", str(trace), "--report", "verdict",
                                   "-v", *lt_args], stderr=e)
        wait_for(str(err), "attached", 120, lt)
        go.touch()
        assert job.wait(timeout=120) == 0, out.read_text()
        assert lt.wait(timeout=300) == 0, err.read_text()
    finally:
        if job.poll() is None:
            job.kill()
    return trace, out.read_text(), err.read_text()


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
    cpu = sum(result["cpu_seconds"])
    # Each pause is inside the script's timing of its call, which adds
    # gc.collect()'s own call and a clock read: ours at most theirs.  And
    # at least the CPU time the calls took, less their own overhead (not
    # half the wall time: a preemption outside the collection, in the
    # call, counts in theirs only -- CI: 20.4 ms against 47.0 ms of wall
    # time beside the other test workers).
    assert 0.9 * cpu - rounds * 20e-6 <= ours <= theirs * 1.02, (ours, theirs, cpu)


# The layouts that differ in where BPF finds the flag and the GIL holder:
# 3.8 (_PyRuntime.gc), 3.9-3.11 (the interpreter's gc, _PyRuntime's GIL
# holder), 3.12 (the interpreter's _gil), 3.13 (its _Py_DebugOffsets).
STRIPPED = [8, 11, 12, 13]


@pytest.mark.parametrize("minor", STRIPPED, ids=[f"3.{m}-stripped" for m in STRIPPED])
def test_collections_estimated_from_samples_without_probes(tmp_path, minor):
    python = pyenv_python(minor)
    if python is None:
        pytest.fail(f"CPython 3.{minor} is not installed at the expected place")
    lib = glob.glob(os.path.join(os.path.dirname(python), "..", "lib", f"libpython3.{minor}.so.1.0"))
    assert lib, f"pyenv's 3.{minor} has no libpython"
    stripped = tmp_path / "lib"
    stripped.mkdir()
    # Its RUNPATH names pyenv's lib; LD_LIBRARY_PATH comes first.
    subprocess.run(["objcopy", "--strip-all", lib[0], str(stripped / os.path.basename(lib[0]))], check=True)
    trace, target_out, lt_err = record_gc_cycles(tmp_path, python, SAMPLED_ARGS, SAMPLED_LT_ARGS,
                                                 env=dict(os.environ, LD_LIBRARY_PATH=str(stripped)))
    assert str(stripped) in lt_err, "not the stripped library: " + lt_err
    check_sampled_collections(trace, target_out, lt_err)


# ~50 ms collections over 1M live lists, each after 50 ms of plain Python:
# about as much time outside the collector as in it.
SAMPLED_ARGS = ["--live", "1000000", "--busy-s", "0.05", "--rounds", "20"]
SAMPLED_LT_ARGS = ["--rate", "499"]  # ~600 samples in the collections: a bound of ~15 %


def check_sampled_collections(trace, target_out, lt_err, rounds=20):
    """The samples taken inside a collection add up to the collections' CPU
    time as the script measured it on its thread, within what sampling
    allows: a period for each collection (where its ends fall between two
    samples) and 3 standard deviations of the count (a busy machine's
    samples land at random in the thread's CPU time); the plain Python
    between them (as long) is not counted."""
    assert "its GC pauses are estimated from its stack samples" in lt_err, lt_err
    result = json.loads([x for x in target_out.splitlines() if x.startswith("{")][-1])
    dump = subprocess.run([LTRACE, "report", str(trace), "--dump", "-"], capture_output=True, text=True, timeout=60)
    assert dump.returncode == 0, dump.stderr
    period_ns, in_gc, samples = 0, 0, 0
    for line in dump.stdout.splitlines():
        f = line.split()
        if len(f) < 3:
            continue
        kv = dict(x.split("=", 1) for x in f[3:] if "=" in x)
        if f[2] == "sampler_info":
            period_ns = int(kv["period_ns"])
        elif f[2] == "py_sample":
            samples += 1
            weight = int(kv.get("weight", "1")) or 1
            in_gc += weight if int(kv["flags"]) & 0x20 else 0
        assert f[2] != "py_gc", "a collection recorded by probes this build does not have"
    assert period_ns, "no sampler"
    ours, cpu = in_gc * period_ns / 1e9, sum(result["cpu_seconds"])
    slack = period_ns / 1e9 * (rounds + 3 * math.sqrt(max(in_gc, 1)))
    assert abs(ours - cpu) <= slack, (ours, cpu, slack, samples, result["busy_cpu_s"])
