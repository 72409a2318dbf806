"""--perfetto (Perfetto's protobuf trace) and --steps / --window on the trace
exports, from one real Lightning run recorded with op and allocator probes.

The Perfetto file is parsed with the official schema (the `perfetto` wheel's
perfetto_trace_pb2): its slices are the Chrome JSON's, name for name and
start for start, nested per track, and its memory counters carry the JSON's
"Total Allocated" values.  --steps keeps exactly the events that overlap the
chosen training steps, found here from the full Chrome trace as
test_dashboard finds them; --window those overlapping the seconds after the
attach; both the same in the merged per-rank traces and live (no trace
file); bad values are usage errors (exit 2, one line)."""
import json
import os
import shutil
import subprocess
from collections import Counter, defaultdict
from decimal import Decimal

import pytest

from conftest import LTRACE, VENV_PY, WORKLOADS, wait_for
from test_dashboard import trace_steps

TRAIN = os.path.join(WORKLOADS, "train_lightning.py")
FIRST, LAST = 3, 5  # --steps 3-5
CATS = ("user_annotation", "cpu_op")


def pb2():
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2
    except ImportError:
        pytest.fail("the perfetto wheel is not installed: run `make deps` (.ci/requirements.txt)")
    return perfetto_trace_pb2


def report(tmp, *args):
    r = subprocess.run([LTRACE, "report", str(tmp / "run.ltrace"), *map(str, args)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return r


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("perfetto")
    go, log = tmp / "go", tmp / "job.log"
    with open(log, "w") as f:
        job = subprocess.Popen([VENV_PY, TRAIN, "--wait-file", str(go), "--profiler", "none", "--epochs", "1",
                                "--batches", "12", "--data-delay", "0.002", "--val"],
                               stdout=f, stderr=subprocess.STDOUT)
    wait_for(str(log), "READY", 600, job)
    err = tmp / "rec.err"
    rec = subprocess.Popen([LTRACE, "record", "--pid", str(job.pid), "-o", str(tmp / "run.ltrace"), "-v",
                            "--profile-memory"], stderr=open(err, "w"))
    wait_for(str(err), "attached", 120, rec)
    go.touch()
    assert job.wait(120) == 0
    assert rec.wait(60) == 0
    report(tmp, "--profile-memory", "--chrome", tmp / "run.json", "--perfetto", tmp / "run.pftrace")
    return tmp


def chrome(path):
    return json.load(open(path), parse_float=Decimal)


def slices(doc):
    return [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] in CATS]


def key(e):
    return (e["name"], e["tid"], e["ts"], e["dur"])


def memory(doc):
    return [e for e in doc["traceEvents"] if e["ph"] == "i" and e["name"] == "[memory]"]


def perfetto(path):
    """(begins: [(name, category, ts_ns, track)], counters: {track: [values]}, track names)."""
    trace = pb2().Trace()
    trace.ParseFromString(open(path, "rb").read())
    names, cats, tracks = {}, {}, {}
    begins, counters = [], defaultdict(list)
    open_by_track = defaultdict(list)
    for p in trace.packet:
        if p.HasField("interned_data"):
            names.update({n.iid: n.name for n in p.interned_data.event_names})
            cats.update({c.iid: c.name for c in p.interned_data.event_categories})
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            tracks[d.uuid] = d
        if not p.HasField("track_event"):
            continue
        e = p.track_event
        assert e.track_uuid in tracks, "event before its track"
        if e.type == e.TYPE_SLICE_BEGIN:
            begins.append((names[e.name_iid], cats[e.category_iids[0]], p.timestamp, e.track_uuid))
            open_by_track[e.track_uuid].append(p.timestamp)
        elif e.type == e.TYPE_SLICE_END:
            stack = open_by_track[e.track_uuid]
            assert stack and stack[-1] <= p.timestamp, "an end without its begin"
            stack.pop()
        elif e.type == e.TYPE_COUNTER:
            counters[e.track_uuid].append(e.counter_value)
    assert not any(open_by_track.values()), "slices left open"
    return begins, counters, tracks


def overlapping(doc, begin_us, end_us, cats=CATS):
    """The Chrome events a range [begin, end] keeps: slices overlapping it, instants (and
    zero-length slices) in it."""
    def keeps(ts, dur):
        return begin_us <= ts <= end_us if dur == 0 else ts < end_us and ts + dur > begin_us
    kept = Counter(key(e) for e in slices(doc) if e["cat"] in cats and keeps(e["ts"], e["dur"]))
    inst = Counter((e["tid"], e["ts"]) for e in memory(doc) if keeps(e["ts"], 0))
    return kept, inst


def test_perfetto_has_the_chrome_slices_and_memory_counters(run):
    doc = chrome(run / "run.json")
    begins, counters, tracks = perfetto(run / "run.pftrace")
    want = slices(doc)
    assert Counter(e["cat"] for e in want)["cpu_op"] > 100  # the op probes were on
    # Name for name, and start for start (ns = the JSON's exact microseconds x 1000).
    assert Counter((n, c) for n, c, _, _ in begins) == Counter((e["name"], e["cat"]) for e in want)
    assert Counter((n, ts) for n, _, ts, _ in begins) == Counter((e["name"], int(e["ts"] * 1000)) for e in want)
    # Every slice on its thread's track, under a process named as in the JSON.
    threads = {u: d.thread for u, d in tracks.items() if d.HasField("thread")}
    assert {threads[t].tid for _, _, _, t in begins} == {e["tid"] for e in want}
    procs = [d.process for d in tracks.values() if d.HasField("process")]
    json_procs = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M"
                  and e["name"] == "process_name"}
    assert {(p.pid, p.process_name) for p in procs} == set(json_procs.items())
    # Memory: one counter value per allocator event, the JSON's running totals.
    mem = memory(doc)
    assert len(mem) > 100
    assert sum(len(v) for v in counters.values()) == len(mem)
    assert Counter(v for vals in counters.values() for v in vals) == Counter(e["args"]["Total Allocated"]
                                                                             for e in mem)
    assert os.path.getsize(run / "run.pftrace") < os.path.getsize(run / "run.json") / 2


def test_steps_keep_exactly_the_chosen_steps(run):
    full = chrome(run / "run.json")
    steps = trace_steps(run)
    assert len(steps) >= LAST + 2
    r = report(run, "--profile-memory", "--steps", f"{FIRST}-{LAST}", "--chrome", run / "steps.json",
               "--perfetto", run / "steps.pftrace")
    assert f"training steps {FIRST}-{LAST}" in r.stderr
    doc = chrome(run / "steps.json")
    kept, inst = overlapping(full, steps[FIRST][0], steps[LAST][1])
    assert Counter(key(e) for e in slices(doc)) == kept
    assert Counter((e["tid"], e["ts"]) for e in memory(doc)) == inst
    names = Counter(e["name"] for e in slices(doc))
    assert names["run_training_batch"] == LAST - FIRST + 1
    assert sum(n for k, n in names.items() if k.endswith("training_step")) == LAST - FIRST + 1
    # The Perfetto export of the same range: the same slices.
    begins, counters, _ = perfetto(run / "steps.pftrace")
    assert Counter((n, ts) for n, _, ts, _ in begins) == Counter((e["name"], int(e["ts"] * 1000))
                                                                 for e in slices(doc))
    assert sum(len(v) for v in counters.values()) == len(memory(doc))
    # The text report is the whole run's either way.
    assert r.stdout == report(run, "--profile-memory").stdout


def test_window_keeps_what_overlaps_it(run):
    full = chrome(run / "run.json")
    attach_us = Decimal(full["ltrace_bpf"]["attach_ns"]) / 1000
    steps = trace_steps(run)
    # A window from step FIRST's start (ms after the attach), 150 ms long.
    start = ((steps[FIRST][0] - attach_us) / 1000).quantize(Decimal("1")) / 1000
    end = start + Decimal("0.15")
    r = report(run, "--profile-memory", "--window", f"{start},{end}", "--chrome", run / "win.json", "--perfetto",
               run / "win.pftrace")
    assert "window" in r.stderr
    doc = chrome(run / "win.json")
    kept, inst = overlapping(full, attach_us + start * 1_000_000, attach_us + end * 1_000_000)
    assert sum(kept.values()) > 0
    assert Counter(key(e) for e in slices(doc)) == kept
    assert Counter((e["tid"], e["ts"]) for e in memory(doc)) == inst
    begins, _, _ = perfetto(run / "win.pftrace")
    assert len(begins) == sum(kept.values())


def test_merged_rank_traces_take_the_range(run, tmp_path):
    d = tmp_path / "traces"
    d.mkdir()
    shutil.copy(run / "run.ltrace", d / "node.ltrace")
    r = subprocess.run([LTRACE, "report", str(d), "--merge", "--steps", f"{FIRST}-{LAST}", "--chrome-dir",
                        str(tmp_path / "ranks"), "--perfetto", str(tmp_path / "merged.pftrace")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    full = chrome(run / "run.json")
    steps = trace_steps(run)
    # The merge reads no op or allocator records unless asked: actions only
    # (External id 0; the op observer's record_function scopes are
    # user_annotation slices too, each with its id).
    actions = {"traceEvents": [e for e in full["traceEvents"] if not e.get("args", {}).get("External id")]}
    kept, _ = overlapping(actions, steps[FIRST][0], steps[LAST][1], cats=("user_annotation",))
    (rank,) = list((tmp_path / "ranks").glob("rank-*.json"))
    got = Counter(key(e) for e in chrome(rank)["traceEvents"] if e["ph"] == "X" and e["cat"] == "user_annotation")
    assert got == kept
    begins, _, _ = perfetto(tmp_path / "merged.pftrace")
    assert Counter(n for n, _, _, _ in begins) == Counter(k[0] for k in got.elements())


@pytest.mark.parametrize("args, words", [
    (["--steps", "5-2", "--chrome", "x.json"], "invalid --steps '5-2'"),
    (["--steps", "two", "--perfetto", "x.pftrace"], "invalid --steps 'two'"),
    (["--window", "3,1", "--chrome", "x.json"], "invalid --window '3,1'"),
    (["--window", "10", "--chrome", "x.json"], "invalid --window '10'"),
    (["--steps", "1-2", "--window", "1,2", "--chrome", "x.json"], "exclude each other"),
    (["--steps", "1-2"], "--steps needs --chrome, --perfetto or --chrome-dir"),
])
def test_bad_ranges_are_usage_errors(tmp_path, args, words):
    r = subprocess.run([LTRACE, "report", str(tmp_path / "none.ltrace"), *args], capture_output=True, text=True,
                       timeout=30, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert words in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "x.json").exists()


def test_live_attach_takes_the_range(tmp_path):
    """Live (no trace file): --steps on --chrome and --perfetto at detach."""
    go, log = tmp_path / "go", tmp_path / "job.log"
    with open(log, "w") as f:
        job = subprocess.Popen([VENV_PY, TRAIN, "--wait-file", str(go), "--profiler", "none", "--epochs", "1",
                                "--batches", "8"], stdout=f, stderr=subprocess.STDOUT)
    wait_for(str(log), "READY", 600, job)
    err = tmp_path / "live.err"
    live = subprocess.Popen([LTRACE, "--pid", str(job.pid), "-v", "--steps", "2-3", "--chrome",
                             str(tmp_path / "live.json"), "--perfetto", str(tmp_path / "live.pftrace")],
                            stdout=subprocess.DEVNULL, stderr=open(err, "w"))
    wait_for(str(err), "attached", 120, live)
    go.touch()
    assert job.wait(120) == 0
    assert live.wait(60) == 0, open(err).read()
    assert "training steps 2-3" in open(err).read()
    doc = chrome(tmp_path / "live.json")
    names = Counter(e["name"] for e in slices(doc))
    assert names["run_training_batch"] == 2
    begins, _, _ = perfetto(tmp_path / "live.pftrace")
    assert Counter(n for n, _, _, _ in begins) == names
