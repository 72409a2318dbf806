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

from conftest import LTRACE, UNIT_TESTS, VENV_PY, WORKLOADS, chromium, parse_simple_report, wait_for

TRAIN = os.path.join(WORKLOADS, "train_lightning.py")
BATCHES = 24


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


def trace_steps(tmp, with_body=False):
    """Training steps from the Chrome trace's slices, independently of the
    page's code: each run_training_batch with the fetch before it and the
    on_train_batch_end hooks after it, on the loop's thread: (begin, end,
    the fetch's duration[, run_training_batch's begin])."""
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
        steps.append((begin, end, fetch[-1]["dur"] if fetch else 0) + ((b["ts"],) if with_body else ()))
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
    want = trace_steps(tmp, with_body=True)
    for bar, (b, e, fetch, body) in zip(bars, want):
        assert sum(int(bar["data-%s-ns" % k]) for k in parts) == int(bar["data-ns"])
        # The dataloader part is the trace's fetch slice and the batch
        # transfer after it, all before run_training_batch: a CPU transfer
        # takes microseconds, but one preempted on a busy machine took 1.35
        # ms (past 5 % of the fetch).
        dataloader = int(bar["data-dataloader-ns"])
        assert fetch * 1000 - 2 <= dataloader <= (body - b) * 1000 + 2, (bar, fetch, body - b)
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
    # The ranked findings (--report verdict) head the list: input-bound
    # first, with the same share, linked to the process's step charts.
    first = re.search(r'<ul class="verdicts">\n<li class="verdict" data-verdict="([\w-]+)" data-value="([\d.]+)">'
                      r'<a href="#([\w-]+)">([^<]*)</a>', dom)
    assert first and first.group(1) == "ranked-input-bound", dom[dom.find("verdicts"):][:1500]
    assert abs(float(first.group(2)) - share) < 0.02, (first.group(2), share)
    assert 'id="%s"' % first.group(3) in dom and first.group(4).startswith("#1 input-bound (pid ")


def trace_val_steps(tmp):
    """Validation steps from the Chrome trace, as trace_steps finds the
    training ones: each validation_step with the val_next fetch before it and
    the on_validation_batch_end hooks after it."""
    ev = [e for e in json.load(open(tmp / "run.json"), parse_float=Decimal)["traceEvents"] if e.get("ph") == "X"]
    bodies = sorted((e for e in ev if e["name"] == "[Strategy]SingleDeviceStrategy.validation_step"),
                    key=lambda e: e["ts"])
    tid = bodies[0]["tid"]
    ev = sorted((e for e in ev if e["tid"] == tid), key=lambda e: e["ts"])
    steps = []
    for k, b in enumerate(bodies):
        nxt = bodies[k + 1]["ts"] if k + 1 < len(bodies) else Decimal("Infinity")
        fetch = [e for e in ev if e["name"].endswith(".val_next") and e["ts"] + e["dur"] <= b["ts"]
                 and (k == 0 or e["ts"] >= bodies[k - 1]["ts"] + bodies[k - 1]["dur"])]
        ends = [e for e in ev if e["name"].endswith("on_validation_batch_end") and b["ts"] <= e["ts"] < nxt]
        steps.append((fetch[-1]["ts"] if fetch else b["ts"], max([b["ts"] + b["dur"]] + [e["ts"] + e["dur"] for e in ends])))
    return steps


def test_validation_finding_matches_the_trace(run):
    """The validation runs of the real fit (the sanity check's 2 batches,
    then 4 after the epoch): their count and time on the validation chart
    equal the trace's, and the finding is there exactly when their share of
    the steps' span reaches its 10% threshold."""
    tmp, _, dom, _ = run
    train, val = trace_steps(tmp), trace_val_steps(tmp)
    assert len(val) == 6
    runs, cur = [], [val[0]]
    for prev, v in zip(val, val[1:]):
        if any(prev[1] <= b < v[0] for b, _, _ in train):
            runs.append(cur)
            cur = []
        cur.append(v)
    runs.append(cur)
    assert [len(r) for r in runs] == [2, 4]
    run_ns = sum((r[-1][1] - r[0][0]) * 1000 for r in runs)
    span_ns = (max(train[-1][1], val[-1][1]) - min(train[0][0], val[0][0])) * 1000
    head, _ = chart(dom, "steptime", "validation")
    assert int(head["data-runs"]) == 2
    assert abs(int(head["data-run-ns"]) - run_ns) <= 8 and abs(int(head["data-span-ns"]) - span_ns) <= 4
    share = float(run_ns / span_ns)
    m = re.search(r'<li class="verdict" data-verdict="validation" data-value="([\d.]+)"><a href="#([\w-]+)">', dom)
    assert bool(m) == (share >= 0.10), (share, bool(m))
    if m:
        assert abs(float(m.group(1)) - share) < 1e-6 and 'id="%s"' % m.group(2) in dom


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


def timeline_data(html):
    m = re.search(r'<script type="application/json" class="tl-data">(.*?)</script>', html, re.S)
    assert m, "no step timeline data"
    return json.loads(m.group(1))


def trace_slices_in(tmp, begin, end):
    """The Chrome trace's action slices of the traced process lying wholly
    inside [begin, end] (trace microseconds), as (name, ns from begin, ns
    from begin), sorted."""
    ev = [e for e in json.load(open(tmp / "run.json"), parse_float=Decimal)["traceEvents"] if e.get("ph") == "X"]
    pid = [e for e in ev if e["name"] == "run_training_batch"][0]["pid"]
    return sorted((e["name"], (e["ts"] - begin) * 1000, (e["ts"] + e["dur"] - begin) * 1000) for e in ev
                  if e["pid"] == pid and e["ts"] >= begin and e["ts"] + e["dur"] <= end)


def stage_section(dom, stage="train"):
    """The step timeline section of `stage` in the DOM (each stage with steps has its own)."""
    sid = "timeline" if stage == "train" else "timeline-" + stage
    m = re.search(r'<section class="steptl" id="p\d+-%s" data-stage="%s".*?</section>' % (sid, stage), dom, re.S)
    assert m, stage
    return m.group(0)


def page_slices(d, entry):
    return sorted((d["names"][s[0]], s[2], s[3]) for s in entry["s"])


def test_step_timeline_slices_are_the_steps_actions(run):
    tmp, rows, dom, _ = run
    html = (tmp / "run.html").read_text()
    d = timeline_data(html)
    want = trace_steps(tmp)
    assert d["stage"] == "train" and len(d["steps"]) >= 3
    # The default step drawn is the slowest; the script drew it on load.
    durs = [e - b for b, e, _ in want]
    assert d["def"] == durs.index(max(durs))
    assert 'data-drawn="%d"' % d["def"] in dom
    for entry in d["steps"]:
        b, e, _ = want[entry["i"]]
        assert abs(entry["e"] - (e - b) * 1000) <= 2
        got, exp = page_slices(d, entry), trace_slices_in(tmp, b, e)
        assert [n for n, _, _ in got] == [n for n, _, _ in exp], entry["i"]
        assert any(n == "run_training_batch" for n, _, _ in got)
        for (n, gb, ge), (_, wb, we) in zip(got, exp):
            assert abs(gb - wb) <= 2 and abs(ge - we) <= 2, (n, gb, ge, wb, we)
            assert 0 <= gb <= ge <= entry["e"]
    # The drawn step's rectangles are its slices (in the train section: the
    # validation steps have their own).
    drawn = [attrs(t) for t in re.findall(r'<rect class="sl"[^>]*>', stage_section(dom))]
    entry = [s for s in d["steps"] if s["i"] == d["def"]][0]
    assert sorted((r["data-name"], int(r["data-b"]), int(r["data-e"])) for r in drawn) == page_slices(d, entry)
    assert "--steps %d-%d" % (d["def"], d["def"]) in dom  # the export hint of the drawn step
    # The validation steps have their own timeline, drawn on load.
    v = all_timeline_data(html)["validation"]
    assert 'data-drawn="%d"' % v["def"] in stage_section(dom, "validation") and v["cmd"] == ""


def test_clicking_a_step_bar_draws_that_step(run, tmp_path):
    tmp, _, _, _ = run
    html = (tmp / "run.html").read_text()
    d = timeline_data(html)
    other = [s for s in d["steps"] if s["i"] != d["def"]][0]
    # A click on the stacked bar of another embedded step, dispatched after the page's own script set up.
    page = tmp_path / "click.html"
    page.write_text(html.replace("</body>", "<script>document.addEventListener('DOMContentLoaded',function(){"
                                 "document.querySelector('svg.chart.parts[data-stage=\"train\"] g.bar[data-i=\"%d\"]')"
                                 ".dispatchEvent(new MouseEvent('click',{bubbles:true}));});</script></body>"
                                 % other["i"]))
    base = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + str(tmp_path / "prof")]
    dom = subprocess.run(base + ["--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    out = dom.stdout
    assert 'data-drawn="%d"' % other["i"] in out
    assert re.search(r'<svg[^>]*class="tl"[^>]*data-step="%d"' % other["i"], out)
    drawn = [attrs(t) for t in re.findall(r'<rect class="sl"[^>]*>', stage_section(out))]
    assert sorted((r["data-name"], int(r["data-b"]), int(r["data-e"])) for r in drawn) == page_slices(d, other)


def test_page_loads_with_script_off(run, tmp_path):
    """Scripts blocked (a Content-Security-Policy of script-src 'none' in a
    copy of the page: headless Chromium's --dump-dom gives nothing with
    scripting disabled outright): the page still loads, the tables and the
    SVG charts are there, and the timeline says it needs script."""
    tmp, rows, _, _ = run
    html = (tmp / "run.html").read_text()
    page = tmp_path / "noscript.html"
    page.write_text(html.replace("<head>", "<head><meta http-equiv=\"Content-Security-Policy\" "
                                 "content=\"script-src 'none'\">", 1))
    base = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + str(tmp_path / "prof")]
    dom = subprocess.run(base + ["--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    out = dom.stdout
    assert 'data-script="ran"' not in out and 'class="tl"' not in out  # no script ran
    assert "<noscript><p class=\"note\">The step timeline is drawn by script" in html
    assert '<table class="simple">' in out and "run_training_batch" in out  # the tables remain
    assert '<svg class="chart steptime"' in out  # and the SVG charts


# A second run: fit with op and allocator records on (`--report ops
# --profile-memory`), then trainer.test()
# (4 batches, by construction: 32 samples of batch 8) and trainer.predict()
# (3 batches: 24 of 8), for the ops in the step timeline and the test and
# predict step charts.
TEST_BATCHES, PREDICT_BATCHES = 4, 3


@pytest.fixture(scope="module")
def ops_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dashboard-ops")
    go, log = tmp / "go", tmp / "job.log"
    with open(log, "w") as f:
        job = subprocess.Popen([VENV_PY, TRAIN, "--wait-file", str(go), "--profiler", "none", "--epochs", "1",
                                "--batches", "6", "--test", "--predict"], stdout=f, stderr=subprocess.STDOUT)
    wait_for(str(log), "READY", 600, job)
    err = tmp / "rec.err"
    rec = subprocess.Popen([LTRACE, "record", "--pid", str(job.pid), "--report", "ops", "--profile-memory", "-o",
                            str(tmp / "run.ltrace"), "-v"], stderr=open(err, "w"))
    wait_for(str(err), "attached", 120, rec)  # torch is loaded before READY: the op observer is in before "attached"
    go.touch()
    assert job.wait(180) == 0
    assert rec.wait(60) == 0
    r = subprocess.run([LTRACE, "report", str(tmp / "run.ltrace"), "--report", "ops", "--html", str(tmp / "run.html")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    base = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + str(tmp / "prof")]
    dom = subprocess.run(base + ["--dump-dom", (tmp / "run.html").as_uri()], capture_output=True, text=True,
                         timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    return tmp, (tmp / "run.html").read_text(), dom.stdout


def all_timeline_data(html):
    return {d["stage"]: d for d in (json.loads(m) for m in re.findall(
        r'<script type="application/json" class="tl-data">(.*?)</script>', html, re.S))}


def test_step_timeline_ops_nest_in_the_steps_actions(ops_run):
    tmp, html, dom = ops_run
    d = all_timeline_data(html)["train"]
    entry = [s for s in d["steps"] if s["i"] == d["def"]][0]
    assert "o" in entry and "ot" not in entry, "ops missing or thinned in a tiny run"
    names = d["names"]
    ops = entry["o"]
    # Ops by name as torch.profiler records them (the op observer: aten ops,
    # autograd nodes, record_function scopes); the model is Linear + ReLU +
    # MSE-style loss, SGD.
    op_names = {names[o[0]] for o in ops}
    odd = sorted(n for n in op_names if not (n.startswith(("aten::", "autograd::", "torch::autograd::"))
                                             or n.endswith("Backward0") or "#" in n or n == "detach"))
    assert not odd, odd
    assert {"aten::linear", "aten::addmm"} & op_names, op_names
    actions = [(names[s[0]], s[1], s[2], s[3], s[4]) for s in entry["s"]]
    step = [a for a in actions if a[0].endswith(".training_step")]
    back = [a for a in actions if a[0].endswith(".backward")]
    assert len(step) == 1 and len(back) == 1, actions

    def inside(o, a):
        return a[1] == o[1] and a[2] <= o[2] and o[3] <= a[3]

    in_step = [o for o in ops if inside(o, step[0])]
    in_back = [o for o in ops if inside(o, back[0])]
    assert {"aten::linear", "aten::addmm"} & {names[o[0]] for o in in_step}
    assert in_back, "no op inside backward"
    for o in ops:
        assert 0 <= o[2] <= o[3] <= entry["e"], o
        # Drawn below the innermost action it runs in (deeper rows), never
        # overlapping an action of its thread's rows at its own depth.
        holders = [a for a in actions if inside(o, a)]
        if holders:
            assert o[4] > max(a[4] for a in holders), (names[o[0]], o, holders)
        for a in actions:
            if a[1] == o[1] and a[4] == o[4]:
                assert a[3] <= o[2] or o[3] <= a[2], (names[o[0]], o, a)
    # The page drew them as op slices, apart from the actions (in the train
    # section: the test and predict sections draw their own).
    sec = stage_section(dom)
    assert 'data-drawn="%d"' % d["def"] in sec
    drawn = [attrs(t) for t in re.findall(r'<rect class="sl op"[^>]*>', sec)]
    assert len(drawn) == len(ops)
    assert {r["data-name"] for r in drawn} == op_names


def test_step_timeline_memory_events(ops_run):
    """The allocator events of the drawn training step, as markers: on the
    loop's thread, inside the step, allocations in the forward
    (training_step: activations) and drawn as ticks."""
    tmp, html, dom = ops_run
    d = all_timeline_data(html)["train"]
    entry = [s for s in d["steps"] if s["i"] == d["def"]][0]
    assert "m" in entry and "mt" not in entry
    marks = entry["m"]
    assert all(0 <= m[1] < entry["e"] and m[3] == 0 for m in marks)  # CPU, inside the step
    assert any(m[0] == d["tid"] for m in marks)
    step = [s for s in entry["s"] if d["names"][s[0]].endswith(".training_step")][0]
    assert any(m[0] == step[1] and step[2] <= m[1] <= step[3] and m[2] > 0 for m in marks)
    assert any(m[2] < 0 for m in marks)  # and frees
    drawn = [attrs(t) for t in re.findall(r'<rect class="mem"[^>]*>', stage_section(dom))]
    assert sorted(int(r["data-t"]) for r in drawn) == sorted(m[1] for m in marks)


def test_test_and_predict_steps_are_charted(ops_run):
    tmp, html, dom = ops_run
    for stage, n in (("test", TEST_BATCHES), ("predict", PREDICT_BATCHES)):
        head, body = chart(dom, "steptime", stage)
        assert int(head["data-steps"]) == n, (stage, head)
        assert len(re.findall(r"<circle [^>]*>", body)) == n
        phead, pbody = chart(dom, "parts", stage)
        bars = [attrs(t) for t in re.findall(r'<g class="bar"[^>]*>', pbody)]
        assert len(bars) == n
        parts = ("dataloader", "step", "backward", "optimizer", "hooks", "other")
        for bar in bars:
            assert sum(int(bar["data-%s-ns" % k]) for k in parts) == int(bar["data-ns"])
            assert int(bar["data-step-ns"]) > 0 and int(bar["data-backward-ns"]) == 0
    # Each stage has its own step timeline, drawn on load, with its step's
    # actions and ops (the step function's forward ops).
    data = all_timeline_data(html)
    assert set(data) == {"train", "test", "predict"}
    for stage, fn in (("test", ".test_step"), ("predict", ".predict_step")):
        d = data[stage]
        assert len(d["steps"]) == (TEST_BATCHES if stage == "test" else PREDICT_BATCHES)
        assert re.search(r'<section class="steptl" id="p\d+-timeline-%s" data-stage="%s" data-drawn="%d"'
                         % (stage, stage, d["def"]), dom), stage
        entry = [s for s in d["steps"] if s["i"] == d["def"]][0]
        assert any(d["names"][s[0]].endswith(fn) for s in entry["s"])
        assert any(d["names"][o[0]] in ("aten::linear", "aten::addmm") for o in entry.get("o", []))


# A GPU recording's page.  No GPU here: build/make-gpu-trace writes the
# records a CUDA Lightning fit leaves (tests/tools/make_gpu_trace.cpp: the
# loop's actions, GPU_LAUNCH on the loop's thread, CUPTI kernel / memcpy /
# runtime records joined by correlation id, two overlapping streams, a
# kernel running past its step's end, idle stretches) and a manifest of the
# intervals it wrote, from which the test computes its own numbers.
MAKE_GPU_TRACE = os.path.join(os.path.dirname(LTRACE), "make-gpu-trace")
GPU_STEPS = 12


def union(intervals):
    total, cur = 0, None
    for b, e in sorted(intervals):
        if cur and b <= cur[1]:
            cur[1] = max(cur[1], e)
        else:
            if cur:
                total += cur[1] - cur[0]
            cur = [b, e]
    return total + (cur[1] - cur[0] if cur else 0)


def gpu_parts(manifest, b, e):
    """Kernel time (union over streams), copy time not under a kernel, and
    idle time of the span [b, e), from the generator's intervals."""
    clip = [(k, max(gb, b), min(ge, e)) for k, _, gb, ge in manifest["gpu"] if min(ge, e) > max(gb, b)]
    kern = union([(x, y) for k, x, y in clip if k == "kernel"])
    busy = union([(x, y) for _, x, y in clip])
    return kern, busy - kern, (e - b) - busy


def gpu_page(tmp, mode):
    trace, manifest = tmp / ("gpu-%s.ltrace" % mode), tmp / ("gpu-%s.json" % mode)
    args = [MAKE_GPU_TRACE, str(trace), str(manifest), str(GPU_STEPS)] + (["busy"] if mode == "busy" else [])
    subprocess.run(args, check=True, timeout=60)
    page = tmp / ("gpu-%s.html" % mode)
    r = subprocess.run([LTRACE, "report", str(trace), "--html", str(page), "--report", "simple,gpu"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    base = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + str(tmp / ("prof-" + mode))]
    dom = subprocess.run(base + ["--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    shot = tmp / ("gpu-%s.png" % mode)  # the artifact: kept under the pytest tmp dir
    s = subprocess.run(base + ["--window-size=1280,1600", "--screenshot=" + str(shot), page.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert s.returncode == 0 and shot.exists(), s.stderr[-2000:]
    m = json.load(open(manifest))
    m["trace"] = str(trace)
    return m, r.stdout, dom.stdout, shot


@pytest.fixture(scope="module")
def gpu_run(tmp_path_factory):
    return gpu_page(tmp_path_factory.mktemp("dashboard-gpu"), "idle")


def test_gpu_page_parts_match_the_generators_intervals(gpu_run):
    manifest, out, dom, shot = gpu_run
    assert 'data-script="ran"' in dom and shot.stat().st_size > 20000
    rows = parse_simple_report(out)
    assert int(rows["run_training_batch"][1]) == GPU_STEPS
    # The GPU report saw the same records: every kernel and copy, by kind.
    kernels = sum(1 for k, *_ in manifest["gpu"] if k == "kernel")
    assert re.search(r"CUDA GPU Kernel Summary", out)
    counts = [int(m) for m in re.findall(r"^\s+[\d.]+\s+[\d,]+\s+(\d+)\s", out.split("CUDA GPU MemOps")[0], re.M)]
    assert sum(counts) == kernels, (counts, kernels)
    for stage, spans in (("train", manifest["train"]), ("validation", manifest["validation"])):
        head, body = chart(dom, "parts gpu", stage)
        assert int(head["data-steps"]) == len(spans) and head["data-bucket"] == "1"
        bars = [attrs(t) for t in re.findall(r'<g class="bar"[^>]*>', body)]
        assert len(bars) == len(spans)
        for bar, (b, e) in zip(bars, spans):
            kern, copy, idle = gpu_parts(manifest, b, e)
            assert int(bar["data-ns"]) == e - b, (stage, bar)
            assert (int(bar["data-kernel-ns"]), int(bar["data-copy-ns"]), int(bar["data-idle-ns"])) == (kern, copy, idle)
    # The step count is the report's, on the step-time chart too.
    thead, _ = chart(dom, "steptime", "train")
    assert int(thead["data-steps"]) == GPU_STEPS
    # Idle share over the training steps, computed here: the finding is
    # there when it reaches its threshold (20%), linked to the GPU chart.
    idle = sum(gpu_parts(manifest, b, e)[2] for b, e in manifest["train"])
    share = idle / sum(e - b for b, e in manifest["train"])
    assert share >= 0.2
    m = re.search(r'<li class="verdict" data-verdict="gpu_idle" data-value="([\d.]+)"><a href="#([\w-]+)">([^<]*)</a>',
                  dom)
    assert m, "no gpu_idle finding"
    assert abs(float(m.group(1)) - share) < 1e-6
    assert m.group(2) == "p%d-gpu-train" % manifest["pid"] and 'id="%s"' % m.group(2) in dom
    assert "shown when &gt;= 20.0%" in m.group(3)
    # Steps over twice the median (step 7's slow fetch), computed here.
    durs = [e - b for b, e in manifest["train"]]
    median = sorted(durs)[(len(durs) + 1) // 2 - 1]
    slow = [i for i, d in enumerate(durs) if d > 2 * median]
    m = re.search(r'<li class="verdict" data-verdict="slow_steps" data-value="([\d.]+)"><a href="#([\w-]+)">([^<]*)</a>',
                  dom)
    assert slow == [7] and m, (slow, durs)
    assert int(float(m.group(1))) == 1 and m.group(2) == "p%d-steptime-train" % manifest["pid"]
    assert "slowest: step 7, %.3f ms" % (durs[7] / 1e6) in m.group(3)
    # Validation: 2 runs of 2 steps, a small share of the span: counted, no finding.
    head, _ = chart(dom, "steptime", "validation")
    val = manifest["validation"]
    runs = [val[0:2], val[2:4]]
    assert int(head["data-runs"]) == 2
    assert int(head["data-run-ns"]) == sum(r[-1][1] - r[0][0] for r in runs)
    span = max(manifest["train"][-1][1], val[-1][1]) - manifest["train"][0][0]
    assert int(head["data-span-ns"]) == span
    assert int(head["data-run-ns"]) / span < 0.10 and 'data-verdict="validation"' not in dom


def test_gpu_page_without_idle_has_no_idle_finding(tmp_path):
    manifest, _, dom, _ = gpu_page(tmp_path, "busy")
    idle = sum(gpu_parts(manifest, b, e)[2] for b, e in manifest["train"])
    share = idle / sum(e - b for b, e in manifest["train"])
    assert 0 < share < 0.2, share
    head, _ = chart(dom, "parts gpu", "train")
    assert int(head["data-steps"]) == GPU_STEPS
    assert 'data-verdict="gpu_idle"' not in dom


def window_of(manifest, b, e):
    """`--window`'s argument for [b, e]: seconds after the attach, rounded
    outward to the microsecond."""
    b_us, e_us = (b - manifest["attach_ns"]) // 1000, -(-(e - manifest["attach_ns"]) // 1000)
    return "%d.%06d,%d.%06d" % (b_us // 10**6, b_us % 10**6, e_us // 10**6, e_us % 10**6)


def test_chart_spans_give_their_export_window(gpu_run, tmp_path):
    """Every span a chart names carries its `--window` (and the spikes their
    command), equal to the generator's times; the commands run."""
    manifest, _, dom, _ = gpu_run
    trace = manifest["trace"]
    spikes = re.search(r'<p class="spikes">(.*?)</p>', dom, re.S).group(1)
    links = [attrs(t) for t in re.findall(r"<a [^>]*>", spikes)]
    assert [int(a["data-i"]) for a in links] == [2, 5, 7, 8, 11]
    for a in links:
        i = int(a["data-i"])
        assert a["data-window"] == window_of(manifest, *manifest["train"][i])
        assert a["data-cmd"] == "ltrace-bpf report TRACE --steps %d-%d --perfetto step-%d.pftrace" % (i, i, i)
    for stage, spans in (("train", manifest["train"]), ("validation", manifest["validation"])):
        _, body = chart(dom, "steptime", stage)
        pts = [attrs(t) for t in re.findall(r"<circle [^>]*>", body)]
        assert [p["data-window"] for p in pts] == [window_of(manifest, b, e) for b, e in spans], stage
        _, body = chart(dom, "parts gpu", stage)
        bars = [attrs(t) for t in re.findall(r'<g class="bar"[^>]*>', body)]
        assert [b["data-window"] for b in bars] == [window_of(manifest, b, e) for b, e in spans], stage
    # The commands, run on the trace: the longest spike's (shown on the
    # page) and a validation step's window.
    cmd = re.search(r'<p class="note spike-cmd">.*?<code>([^<]*)</code>', dom).group(1)
    assert cmd == "ltrace-bpf report TRACE --steps 7-7 --perfetto step-7.pftrace"
    w = window_of(manifest, *manifest["validation"][1])
    for args in (["--steps", "7-7"], ["--window", w]):
        out = tmp_path / ("x%d.pftrace" % len(args[1]))
        r = subprocess.run([LTRACE, "report", trace] + args + ["--perfetto", str(out)], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0 and out.stat().st_size > 1000, r.stderr


def test_merged_heat_map_cells_give_their_window(gpu_run, tmp_path):
    manifest, _, _, _ = gpu_run
    d = tmp_path / "job"
    d.mkdir()
    shutil.copy(manifest["trace"], d / "rank.ltrace")
    r = subprocess.run([LTRACE, "report", str(d), "--merge", "--html", str(tmp_path / "merged.html")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    html = (tmp_path / "merged.html").read_text()
    cells = [attrs(t) for t in re.findall(r'<rect class="cell"[^>]*>', html)]
    assert len(cells) == GPU_STEPS
    for c, (b, e) in zip(cells, manifest["train"]):
        assert c["data-window"] == window_of(manifest, b, e)
    traces = json.loads(re.search(r'<script type="application/json" id="rank-traces">(.*?)</script>', html).group(1))
    assert list(traces.values()) == [str(d / "rank.ltrace")]
    # The rank's validation steps in its timeline have their window too (its own attach).
    v = all_timeline_data(html)["validation"]
    assert [s["w"] for s in v["steps"]] == [window_of(manifest, *manifest["validation"][s["i"]]).split(",")
                                             for s in v["steps"]]
    # What the step numbers mean across ranks: no COMM records here, so per rank, not lined up.
    note = re.search(r'<p class="note" id="step-numbering" data-measured="(\d)" data-offsets="([^"]*)">([^<]*)</p>', html)
    assert note and note.group(1) == "0" and note.group(2) == "-"
    assert "Step numbers are per rank" in note.group(3) and "cannot be lined up" in note.group(3)
    # A click on a cell writes its command (the page's script), which runs.
    page = tmp_path / "click.html"
    page.write_text(html.replace("</body>", "<script>document.addEventListener('DOMContentLoaded',function(){"
                                 "document.querySelector('svg.heatmap rect.cell[data-i=\"7\"]')"
                                 ".dispatchEvent(new MouseEvent('click',{bubbles:true}));});</script></body>"))
    base = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + str(tmp_path / "prof")]
    dom = subprocess.run(base + ["--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    got = re.search(r'<code id="cell-cmd">([^<]*)</code>', dom.stdout).group(1)
    rank = cells[7]["data-rank"]
    assert got == "ltrace-bpf report %s --window %s --perfetto rank%s-steps-7-7.pftrace" % (
        d / "rank.ltrace", window_of(manifest, *manifest["train"][7]), rank)
    cmd = got.replace("--perfetto rank", "--perfetto %s/rank" % tmp_path).split()
    assert cmd[0] == "ltrace-bpf"
    r = subprocess.run([LTRACE] + cmd[1:], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_merged_page_syncs_timelines_on_the_common_numbering(tmp_path):
    """The merged page's script on ranks attached at different moments
    (tests/unit/merged_page_test.cpp RanksAttachedLaterAreOnTheCommonNumbering
    writes the page: rank 1 attached 3 steps after rank 0, rank 2 with no
    measurable offset, drawn apart), in headless Chromium: #step=N and a
    heat-map click choose one common step on the aligned ranks' timelines
    (each in its own numbers), leave the rank apart alone, and the clicked
    cell's command names the rank's own steps."""
    page = tmp_path / "merged.html"
    unit = UNIT_TESTS
    r = subprocess.run([unit, "--gtest_filter=MergedPage.RanksAttachedLaterAreOnTheCommonNumbering"],
                       env=dict(os.environ, LT_MERGED_PAGE_OUT=str(page)), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and page.exists(), r.stdout[-2000:]
    html = page.read_text()
    # After load (#step=8 chosen): record each train timeline's step, click
    # rank 1's column 5, record, click rank 2's (apart) column 1, record.
    probe = ("<script>window.__err=[];window.addEventListener('error',function(e){window.__err.push(e.message);});"
             "window.addEventListener('load',function(){var o=[];"
             "function rec(tag){document.querySelectorAll('section.steptl[data-stage=\"train\"]').forEach("
             "function(s){o.push(tag+' '+s.id+' '+s.getAttribute('data-drawn'));});}"
             "function click(r,i){document.querySelector('svg.heatmap rect.cell[data-rank=\"'+r+'\"][data-i=\"'+i+"
             "'\"]').dispatchEvent(new MouseEvent('click',{bubbles:true}));}"
             "rec('hash');click(1,5);rec('click1');o.push('cmd '+document.getElementById('cell-cmd').textContent);"
             "click(2,1);rec('click2');o.push('errors '+window.__err.length);"
             "var p=document.createElement('pre');p.id='probe';p.textContent=o.join('\\n');"
             "document.body.appendChild(p);});</script>")
    probed = tmp_path / "probe.html"
    probed.write_text(html.replace("</body>", probe + "</body>"))
    base = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + str(tmp_path / "prof")]
    dom = subprocess.run(base + ["--dump-dom", probed.as_uri() + "#step=8"], capture_output=True, text=True,
                         timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    m = re.search(r'<pre id="probe">(.*?)</pre>', dom.stdout, re.S)
    assert m, dom.stdout[-2000:]
    got = m.group(1).split("\n")
    # Common step 8: rank 0's own 8, rank 1's own 5; rank 2 (apart) keeps its default (its slowest, own 7).
    assert got[0:3] == ["hash r0-timeline 8", "hash r1-timeline 5", "hash r2-timeline 7"], got
    # Rank 1's column 5 is common step 5: rank 0's own 5, rank 1's own 2.
    assert got[3:6] == ["click1 r0-timeline 5", "click1 r1-timeline 2", "click1 r2-timeline 7"], got
    # Its command: rank 1's own step 2, whose window is the job's step 5 (10 + 100 x 5 ms after the attach).
    assert got[6] == "cmd ltrace-bpf report node-0.ltrace --window 0.510000,0.551000 --perfetto rank1-steps-2-2.pftrace", got
    # The apart rank's cell chooses its own step on its timeline only.
    assert got[7:10] == ["click2 r0-timeline 5", "click2 r1-timeline 2", "click2 r2-timeline 1"], got
    assert got[10] == "errors 0", got


def clipped(spans, b, e):
    return sum(max(0, min(y, e) - max(x, b)) for x, y in spans)


def verdict_of(tmp, mode, steps=30):
    trace, manifest = tmp / ("v-%s.ltrace" % mode), tmp / ("v-%s.json" % mode)
    subprocess.run([MAKE_GPU_TRACE, str(trace), str(manifest), str(steps)] + ([mode] if mode != "idle" else []),
                   check=True, timeout=60)
    r = subprocess.run([LTRACE, "report", str(trace), "--report", "verdict"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    ranked = re.findall(r"^  (\d+)\. ([\w -]+) \(pid \d+\): ([\d.]+) ms per train step at stake\n\s+(.*)$", r.stdout,
                        re.M)
    return json.load(open(manifest)), [(kind, float(ms), evidence) for _, kind, ms, evidence in ranked], r.stdout


def idle_outside_loader(manifest):
    """GPU idle time per train step outside the dataloader part, from the generator's intervals."""
    idle = 0
    for b, e in manifest["train"]:
        idle += gpu_parts(manifest, b, e)[2]
        for x, y in manifest["loader"]:
            if x < e and y > b:
                idle -= gpu_parts(manifest, max(x, b), min(y, e))[2]
    return idle / len(manifest["train"]) / 1e6


@pytest.mark.parametrize("mode", ["sync", "tiny", "idle", "busy"])
def test_gpu_findings_each_at_the_time_its_workload_provoked(tmp_path, mode):
    """--report verdict's GPU findings on CUPTI records (make-gpu-trace):
    an `.item()` per step (a 1.5 ms wait in cudaStreamSynchronize) is
    host-device sync, ranked first at that wait; 281 kernels of 5 us a step
    are launch-bound, first, at the GPU's idle time outside the dataloader;
    the plain trace's idle GPU is gpu-idle; the busy one raises neither."""
    manifest, ranked, out = verdict_of(tmp_path, mode)
    kinds = [k for k, _, _ in ranked]
    n = len(manifest["train"])
    if mode == "sync":
        waits = sum(clipped(manifest["sync"], b, e) for b, e in manifest["train"]) / n / 1e6
        assert kinds[0] == "host-device sync", out
        assert abs(ranked[0][1] - waits) < 0.006, (ranked[0], waits)
        assert "cudaStreamSynchronize (1.0 per step" in ranked[0][2]
    elif mode == "tiny":
        assert kinds[0] == "launch-bound", out
        assert abs(ranked[0][1] - idle_outside_loader(manifest)) < 0.006, (ranked[0], idle_outside_loader(manifest))
        kernels = sum(1 for k, _, gb, _ in manifest["gpu"] if k == "kernel" and any(b <= gb < e for b, e in manifest["train"]))
        assert "%d kernels per step, median 5.0 us" % round(kernels / n) in ranked[0][2], ranked[0]
    elif mode == "idle":
        row = next(r for r in ranked if r[0] == "gpu-idle")
        assert abs(row[1] - idle_outside_loader(manifest)) < 0.006, (row, idle_outside_loader(manifest))
        assert "host-device sync" not in kinds and "launch-bound" not in kinds
    else:
        assert not {"host-device sync", "gpu-idle", "launch-bound"} & set(kinds), out
