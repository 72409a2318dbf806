"""torch_xla jobs from outside (docs/design-xla.md): a real Lightning fit on
torch_xla's CPU PJRT device (tests/workloads/xla_fit.py, .venv-xla), attached
to while running.  The report's counts equal torch_xla's own metrics read in
the same process at the end (uncached compiles, executions, transfers), its
times are torch_xla's own timers within what our entry probes add, a
recompilation forced at step K (a new batch size) is counted and charged to
the action that marks the step, and a recorded trace reports the same."""
import json
import os
import re
import subprocess

import pytest

from conftest import LTRACE, ROOT, WORKLOADS
from test_dashboard import attrs, chromium
from test_perfetto import perfetto
from test_ps import parse_table

XLA_PY = os.path.join(ROOT, ".venv-xla", "bin", "python")
XLA_FIT = os.path.join(WORKLOADS, "xla_fit.py")
STEPS, RECOMPILE_AT = 20, 10
OPT_STEP = "[LightningModule]MLP.optimizer_step"


@pytest.fixture(scope="module")
def xla_python():
    if not os.path.exists(XLA_PY):
        pytest.skip(".venv-xla missing: run `make deps` (torch_xla)")
    return XLA_PY


def metrics_line(out):
    return json.loads(next(line for line in out.splitlines() if line.startswith("{")))


def xla_rows(text):
    """action -> its cells, from the first table of the XLA report."""
    rows, inside = {}, False
    for line in text.splitlines():
        if line.startswith("  action ") and "compiles" in line:
            inside = True
            continue
        if inside:
            if not line.startswith("  ") or line.startswith("  ("):
                break
            cells = re.split(r"\s{2,}", line.strip())
            rows[cells[0]] = cells[1:]
    return rows


def number(cell):
    return float(cell.split()[0])


def check_against_torch_xla(report, theirs):
    rows = xla_rows(report)
    assert "total" in rows, report
    total = rows["total"]
    compiles, compile_ms, executions, execute_ms = int(total[0]), number(total[1]), int(total[2]), number(total[3])
    to_dev, to_tensors, to_bytes = int(total[4]), int(total[5]), total[6]
    from_dev, from_bytes, marks = int(total[8]), total[10], int(total[12])
    c, m = theirs["counters"], theirs["metrics"]
    # Counts: exact.
    assert compiles == c["UncachedCompile"] == m["CompileTime"]["count"], report
    assert executions == m["ExecuteTime"]["count"] == c["CachedCompile"] + c["UncachedCompile"], report
    assert to_dev == m["TransferToDeviceTime"]["count"], report
    assert from_dev == m["TransferFromDeviceTime"]["count"], report
    assert to_tensors >= to_dev
    # Bytes: torch_xla's own count of each transfer, read back from its
    # metrics in the target, every one of them.
    assert to_bytes == str(int(m["OutboundData"]["total"])), report
    assert from_bytes == str(int(m["InboundData"]["total"])), report
    assert marks == c["MarkStep"] == theirs["mark_steps"], report
    # Times: torch_xla's own sections, or from our entry probe to their end:
    # never less than theirs, and more by at most a bound per call (a
    # uprobe's trap and the section's setup; generous for a busy machine).
    assert m["CompileTime"]["total"] / 1e6 - 0.01 <= compile_ms <= m["CompileTime"]["total"] / 1e6 + 2.0 * compiles
    assert m["ExecuteTime"]["total"] / 1e6 - 0.01 <= execute_ms <= m["ExecuteTime"]["total"] / 1e6 + 2.0 * executions
    # The forced recompilation: counted once, after step K, in the action
    # that marks the step (Lightning's XLAPrecision.optimizer_step).
    assert re.search(r"compiles: %d, recompilations: 1, graph cache hits: %d " % (compiles, c["CachedCompile"]),
                     report), report
    rec = [line for line in report.splitlines() if line.rstrip().endswith("recompilation")]
    assert len(rec) == 1, report
    step = int(rec[0].split()[0])
    assert step == RECOMPILE_AT + 1, rec  # steps counted from 1 by the step marks
    assert OPT_STEP in rec[0], rec
    assert int(rows[OPT_STEP][12]) == STEPS  # every training step marked in optimizer_step
    return rows


def test_xla_fit_counts_equal_torch_xla_metrics(attach, xla_python):
    seen = {}

    def ps_row(pid):
        """`ps` while the job waits: its XLA column (torch_xla's version, PJRT device)."""
        r = subprocess.run([LTRACE, "ps"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        seen["ps"] = parse_table(r.stdout).get(pid)

    run = attach([xla_python, XLA_FIT, "--steps", str(STEPS), "--recompile-at", str(RECOMPILE_AT), "--val"],
                 lt_args=["--report", "xla,simple"], before_release=ps_row)
    assert run.target_rc == 0, run.target_out[-3000:]
    assert run.lt_rc == 0, run.lt_err[-3000:]
    theirs = metrics_line(run.target_out)
    assert theirs["device_type"] == "CPU" and theirs["batch_device"].startswith("xla")
    header = re.search(r"^pid \d+ .*: torch_xla (\S+), PJRT device (\S+)$", run.lt_out, re.M)
    assert header and header.group(1) == theirs["torch_xla"] and header.group(2) == "CPU", run.lt_out
    rows = check_against_torch_xla(run.lt_out, theirs)
    assert seen["ps"] and seen["ps"]["XLA"] == theirs["torch_xla"] + " CPU", seen
    assert seen["ps"]["PROFILE"] == "yes", seen
    # Validation's graph compiles once, in the hook that marks its steps, and
    # is no recompilation (that action had run no graph before).
    assert int(rows["[LightningModule]MLP.on_validation_batch_end"][0]) >= 1
    # The Simple report of the same run: one optimizer_step per step.
    assert re.search(r"\|\s+\[LightningModule\]MLP\.optimizer_step\s+\|[^|]+\|\s+%d\s+\|" % STEPS, run.lt_out)


def test_xla_recorded_trace_reports_the_same(attach, xla_python, tmp_path):
    trace = tmp_path / "xla.ltrace"
    run = attach([xla_python, XLA_FIT, "--steps", str(STEPS), "--recompile-at", str(RECOMPILE_AT)],
                 lt_args=["--report", "xla", "-o", str(trace)], subcommand="record")
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err[-3000:]
    theirs = metrics_line(run.target_out)
    rep = subprocess.run([LTRACE, "report", str(trace)], capture_output=True, text=True, timeout=300)
    assert rep.returncode == 0, rep.stderr
    check_against_torch_xla(rep.stdout, theirs)  # the recorded report list: xla
    # Chrome and Perfetto exports: each timed compile and execution a slice
    # on its calling thread, beside the Lightning actions.
    chrome, pf = tmp_path / "xla.json", tmp_path / "xla.pftrace"
    ex = subprocess.run([LTRACE, "report", str(trace), "--chrome", str(chrome), "--perfetto", str(pf)],
                        capture_output=True, text=True, timeout=300)
    assert ex.returncode == 0, ex.stderr
    events = json.loads(chrome.read_text())["traceEvents"]
    xla = [e for e in events if e.get("cat") == "xla"]
    names = [e["name"] for e in xla]
    assert names.count("XLA compile") == theirs["counters"]["UncachedCompile"], sorted(set(names))
    assert names.count("XLA execute") == theirs["metrics"]["ExecuteTime"]["count"]
    assert names.count("XLA transfer to device") == theirs["metrics"]["TransferToDeviceTime"]["count"]
    compile_ms = sum(e["dur"] for e in xla if e["name"] == "XLA compile") / 1e3
    assert abs(compile_ms - theirs["metrics"]["CompileTime"]["total"] / 1e6) <= 2.0 * names.count("XLA compile")
    # A recompile slice lies inside the optimizer_step action on its thread.
    steps = [e for e in events if e.get("cat") == "user_annotation" and e["name"] == OPT_STEP]
    last = max((e for e in xla if e["name"] == "XLA compile"), key=lambda e: e["ts"])
    assert any(s["tid"] == last["tid"] and s["ts"] <= last["ts"] and last["ts"] + last["dur"] <= s["ts"] + s["dur"]
               for s in steps), last
    begins, _, _ = perfetto(pf)
    assert sorted(n for n, c, _, _ in begins if c == "xla") == sorted(names)
    # The dashboard, as a browser renders it: compile time over the run, the
    # recompilation in red at its step.
    page = tmp_path / "xla.html"
    h = subprocess.run([LTRACE, "report", str(trace), "--html", str(page)], capture_output=True, text=True, timeout=300)
    assert h.returncode == 0, h.stderr
    dom = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                          "--user-data-dir=" + str(tmp_path / "prof"), "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    section = dom.stdout[dom.stdout.index('<section id="xla">'):]
    section = section[:section.index("</section>")]
    proc = attrs(re.search(r'<div class="xla-process"[^>]*>', section).group(0))
    assert int(proc["data-compiles"]) == theirs["counters"]["UncachedCompile"] and proc["data-recompiles"] == "1"
    bars = [attrs(t) for t in re.findall(r'<g class="bar"[^>]*>', section)]
    assert len(bars) == theirs["counters"]["UncachedCompile"]
    assert [int(b["data-step"]) for b in bars if b["data-recompile"] == "1"] == [RECOMPILE_AT + 1]
    assert abs(sum(int(b["data-ns"]) for b in bars) / 1e6 - theirs["metrics"]["CompileTime"]["total"] / 1e6) \
        <= 2.0 * len(bars)
