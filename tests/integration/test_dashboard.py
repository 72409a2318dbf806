"""The HTML dashboard of a real Lightning fit with a slow dataloader,
recorded, loaded in headless Chromium (script run): the DOM's step count,
per-step durations and per-step parts equal the numbers of the same run's
text report and Chrome trace, and the dataloader verdict is there."""
import json
from decimal import Decimal
import os
import re
import shutil
import subprocess

import pytest

from conftest import LTRACE, VENV_PY, WORKLOADS, parse_simple_report, wait_for

TRAIN = os.path.join(WORKLOADS, "train_lightning.py")
BATCHES = 24


def chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("chromium is not installed: run `make deps`")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dashboard")
    go, log = tmp / "go", tmp / "job.log"
    with open(log, "w") as f:
        # 8 samples a batch, 3 ms each: ~24 ms of loading per training step.
        job = subprocess.Popen([VENV_PY, TRAIN, "--wait-file", str(go), "--profiler", "none", "--epochs", "1",
                                "--batches", str(BATCHES), "--data-delay", "0.003", "--val"],
                               stdout=f, stderr=subprocess.STDOUT)
    wait_for(str(log), "READY", 600, job)
    err = tmp / "rec.err"
    rec = subprocess.Popen([LTRACE, "record", "--pid", str(job.pid), "-o", str(tmp / "run.ltrace"), "-v"],
                           stderr=open(err, "w"))
    wait_for(str(err), "attached", 120, rec)
    go.touch()
    assert job.wait(120) == 0
    assert rec.wait(60) == 0
    r = subprocess.run([LTRACE, "report", str(tmp / "run.ltrace"), "--chrome", str(tmp / "run.json"), "--html",
                        str(tmp / "run.html")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    base = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + str(tmp / "prof")]
    dom = subprocess.run(base + ["--dump-dom", (tmp / "run.html").as_uri()], capture_output=True, text=True,
                         timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    shot = tmp / "dashboard.png"  # the artifact: kept under the pytest tmp dir
    s = subprocess.run(base + ["--window-size=1280,1400", "--screenshot=" + str(shot), (tmp / "run.html").as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert s.returncode == 0 and shot.exists(), s.stderr[-2000:]
    return tmp, parse_simple_report(r.stdout), dom.stdout, shot


def attrs(tag):
    return dict(re.findall(r'([\w-]+)="([^"]*)"', tag))


def chart(dom, cls, stage):
    m = re.search(r'<svg class="chart %s"[^>]*data-stage="%s"[^>]*>(.*?)</svg>' % (cls, stage), dom, re.S)
    assert m, (cls, stage)
    return attrs(m.group(0).split(">", 1)[0]), m.group(1)


def trace_steps(tmp):
    """Training steps from the Chrome trace's slices, independently of the
    page's code: each run_training_batch with the fetch before it and the
    on_train_batch_end hooks after it, on the loop's thread."""
    # Decimal: wall-clock microseconds with 3 decimals are past a double's precision.
    ev = [e for e in json.load(open(tmp / "run.json"), parse_float=Decimal)["traceEvents"] if e.get("ph") == "X"]
    bodies = sorted((e for e in ev if e["name"] == "run_training_batch"), key=lambda e: e["ts"])
    tid = bodies[0]["tid"]
    ev = sorted((e for e in ev if e["tid"] == tid), key=lambda e: e["ts"])
    steps = []
    for k, b in enumerate(bodies):
        nxt = bodies[k + 1]["ts"] if k + 1 < len(bodies) else Decimal("Infinity")
        fetch = [e for e in ev if e["name"].endswith(".train_dataloader_next") and e["ts"] + e["dur"] <= b["ts"]
                 and (k == 0 or e["ts"] >= bodies[k - 1]["ts"] + bodies[k - 1]["dur"])]
        ends = [e for e in ev if e["name"].endswith("on_train_batch_end") and b["ts"] <= e["ts"] < nxt]
        begin = fetch[-1]["ts"] if fetch else b["ts"]
        end = max([b["ts"] + b["dur"]] + [e["ts"] + e["dur"] for e in ends])
        steps.append((begin, end, fetch[-1]["dur"] if fetch else 0))
    return steps


def test_step_chart_matches_the_report_and_trace(run):
    tmp, rows, dom, shot = run
    assert 'data-script="ran"' in dom  # the page's script ran
    assert shot.stat().st_size > 20000
    calls = int(rows["run_training_batch"][1])
    assert calls == BATCHES
    head, body = chart(dom, "steptime", "train")
    assert int(head["data-steps"]) == calls and head["data-bucket"] == "1"
    points = [attrs(t) for t in re.findall(r"<circle [^>]*>", body)]
    assert len(points) == calls
    want = trace_steps(tmp)
    assert len(want) == calls
    for p, (b, e, _) in zip(points, want):
        # The trace's microseconds carry 3 decimals: agree to a nanosecond or two.
        assert abs(int(p["data-ns"]) - (e - b) * 1000) <= 2, (p, b, e)
    durs = sorted(int(p["data-ns"]) for p in points)
    assert int(head["data-p50-ns"]) == durs[(len(durs) + 1) // 2 - 1]


def test_parts_add_up_and_match_the_fetches(run):
    tmp, rows, dom, _ = run
    head, body = chart(dom, "parts", "train")
    bars = [attrs(t) for t in re.findall(r'<g class="bar"[^>]*>', body)]
    assert len(bars) == int(rows["run_training_batch"][1])
    parts = ("dataloader", "step", "backward", "optimizer", "hooks", "other")
    want = trace_steps(tmp)
    for bar, (b, e, fetch) in zip(bars, want):
        assert sum(int(bar["data-%s-ns" % k]) for k in parts) == int(bar["data-ns"])
        # The fetch is all of the dataloader part here (no batch transfer on CPU
        # is slower than a microsecond or so): the trace's fetch slice.
        assert abs(int(bar["data-dataloader-ns"]) - fetch * 1000) <= 2 + Decimal("0.05") * fetch * 1000, bar
        assert int(bar["data-step-ns"]) > 0 and int(bar["data-backward-ns"]) > 0
    # The Simple report's totals bound the chart's: the steps hold every
    # training_step call (exclusive time cannot exceed the calls' total).
    step_total = float(rows["[Strategy]SingleDeviceStrategy.training_step"][2]) * 1e9
    assert sum(int(b["data-step-ns"]) for b in bars) <= step_total * 1.0001 + 1000
    # Validation steps are charted too.
    vhead, _ = chart(dom, "steptime", "validation")
    assert int(vhead["data-steps"]) == int(rows["[Strategy]SingleDeviceStrategy.validation_step"][1])


def test_dataloader_verdict(run):
    tmp, rows, dom, _ = run
    m = re.search(r'<li class="verdict" data-verdict="dataloader" data-value="([\d.]+)"><a href="#(p\d+-parts-train)">'
                  r'([^<]*)</a>', dom)
    assert m, "no dataloader verdict"
    share = float(m.group(1))
    want = trace_steps(tmp)
    fetch_share = float(sum(f for _, _, f in want) / sum(e - b for b, e, _ in want))
    # The verdict's share is the dataloader part (fetch + transfer) over the steps.
    assert fetch_share - 0.01 <= share <= fetch_share + 0.05, (share, fetch_share)
    assert share > 0.3  # ~24 ms of sleep per batch against a tiny model
    assert 'id="%s"' % m.group(2) in dom  # the link has its chart
    assert "of training step time" in m.group(3)


def test_merged_page_from_the_same_trace(run, tmp_path):
    tmp, _, _, _ = run
    d = tmp_path / "job"
    d.mkdir()
    shutil.copy(tmp / "run.ltrace", d / "run.ltrace")
    r = subprocess.run([LTRACE, "report", str(d), "--merge", "--html", str(tmp_path / "merged.html")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    html = (tmp_path / "merged.html").read_text()
    m = re.search(r'<svg class="chart heatmap" data-ranks="(\d+)"', html)
    assert m and int(m.group(1)) >= 1
    assert len(re.findall(r'<rect class="cell"', html)) == BATCHES
