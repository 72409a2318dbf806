"""Chrome/Perfetto trace (kineto conventions, loaded by HTA) and the HTML
page (rendered by headless Chromium), from a real Lightning run."""
import json
import os
import re
import shutil
import subprocess
from collections import Counter, defaultdict

import pytest

from conftest import LTRACE, VENV_PY, WORKLOADS, chromium, parse_simple_report

TRAIN = os.path.join(WORKLOADS, "train_lightning.py")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """One recorded run, exported both ways from the trace file."""
    from conftest import wait_for
    tmp = tmp_path_factory.mktemp("exports")
    go, log = tmp / "go", tmp / "job.log"
    with open(log, "w") as f:
        job = subprocess.Popen([VENV_PY, TRAIN, "--wait-file", str(go), "--profiler", "none", "--epochs", "2",
                                "--batches", "16", "--val"], stdout=f, stderr=subprocess.STDOUT)
    wait_for(str(log), "READY", 600, job)
    err = tmp / "rec.err"
    rec = subprocess.Popen([LTRACE, "record", "--pid", str(job.pid), "-o", str(tmp / "run.ltrace"), "-v",
                            "--rate", "499", "--off-cpu"],
                           stderr=open(err, "w"))
    wait_for(str(err), "attached", 120, rec)
    go.touch()
    assert job.wait(120) == 0
    assert rec.wait(60) == 0
    r = subprocess.run([LTRACE, "report", str(tmp / "run.ltrace"), "--chrome", str(tmp / "run.json"), "--html",
                        str(tmp / "run.html")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return tmp, parse_simple_report(r.stdout)


def test_chrome_trace_schema_and_counts(exported):
    import jsonschema
    tmp, rows = exported
    d = json.load(open(tmp / "run.json"))
    schema = json.load(open(os.path.join(os.path.dirname(__file__), "chrome_trace.schema.json")))
    jsonschema.validate(d, schema)
    assert d["schemaVersion"] == 1
    assert set(d["distributedInfo"]) >= {"rank", "world_size"}
    assert set(d["ltrace_bpf"]) >= {"ringbuf_drops", "open_at_detach", "ended_before_attach", "estimated_durations"}
    meta = [e for e in d["traceEvents"] if e["ph"] == "M"]
    assert {e["name"] for e in meta} >= {"process_name", "thread_name"}
    slices = [e for e in d["traceEvents"] if e["ph"] == "X"]
    for e in slices:
        assert set(e) >= {"ph", "cat", "name", "pid", "tid", "ts", "dur", "args"}
        assert e["cat"] == "user_annotation" and e["dur"] >= 0
    # One slice per counted call, as in the Simple report.
    counts = Counter(e["name"] for e in slices)
    for name, cells in rows.items():
        if name != "Total":
            assert counts[name] == int(cells[1]), name
    # Exact slices nest properly per thread (no partial overlap).
    by_tid = defaultdict(list)
    for e in slices:
        if not e["args"].get("estimated"):
            by_tid[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_tid.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for b, end in spans:
            while stack and stack[-1] <= b:
                stack.pop()
            assert not stack or end <= stack[-1] + 1e-3, (b, end, stack[-1])
            stack.append(end)


def test_hta_loads_the_trace(exported, tmp_path):
    tmp, rows = exported
    trace_dir = tmp_path / "hta"
    trace_dir.mkdir()
    shutil.copy(tmp / "run.json", trace_dir / "rank-0.json")
    code = (
        "from hta.trace_analysis import TraceAnalysis\n"
        f"a = TraceAnalysis(trace_dir={str(trace_dir)!r})\n"
        "t = a.t.get_trace(0)\n"
        "names = set(a.t.symbol_table.sym_table)\n"
        "print('ROWS', len(t)); print('HAS', '[LightningModule]Model.on_fit_start' in names)\n"
    )
    r = subprocess.run([VENV_PY, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    slices = [e for e in json.load(open(tmp / "run.json"))["traceEvents"] if e["ph"] == "X"]
    assert f"ROWS {len(slices)}" in r.stdout
    assert "HAS True" in r.stdout


def test_html_renders_in_headless_chromium(exported, tmp_path):
    tmp, rows = exported
    html = tmp / "run.html"
    text = html.read_text(encoding="utf-8")
    assert "http://" not in text and "https://" not in text and " src=" not in text  # self-contained
    base = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + str(tmp_path / "prof")]
    dom = subprocess.run(base + ["--dump-dom", html.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "run_training_epoch" in dom.stdout and "<svg" in dom.stdout
    assert "Lost events:" in dom.stdout
    # The sampled stacks: a flame graph per action, drawn by the page's script.
    assert "On-CPU Python stacks per action" in dom.stdout and "Off-CPU (blocked)" in dom.stdout
    assert re.search(r'<div [^>]*data-i="', dom.stdout)  # frame boxes (divs) exist only once the script ran
    assert ">[Strategy]SingleDeviceStrategy.training_step<" in dom.stdout  # one profile per action
    assert "Uncaught" not in dom.stderr and "CONSOLE" not in dom.stderr
    shot = tmp_path / "report.png"
    r = subprocess.run(base + ["--window-size=1280,1600", "--screenshot=" + str(shot), html.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    assert shot.stat().st_size > 20000  # a rendered table and timeline, not a blank page
    os.makedirs(os.path.join(os.path.dirname(__file__), "..", "..", "build"), exist_ok=True)
    shutil.copy(shot, os.path.join(os.path.dirname(__file__), "..", "..", "build", "report-screenshot.png"))
