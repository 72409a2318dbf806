"""`--report memory` (issue 15): per action and device sums and peaks, the
leak view, out-of-memory events, Chrome memory instants and the HTML
timeline.  A crafted trace checks the outputs against each other and the
Chrome schema without BPF; real targets (torch's allocator probes) check
the leak view byte for byte, a caught OOM, and a Lightning fit's
per-action bytes."""
import json
import os
import re
import subprocess

from conftest import LTRACE, VENV_PY, WORKLOADS

ADVERSARIAL = os.path.join(os.path.dirname(LTRACE), "make-adversarial")
SCHEMA = os.path.join(os.path.dirname(__file__), "chrome_trace.schema.json")
MEM_LEAK = os.path.join(WORKLOADS, "mem_leak.py")
TRAIN = os.path.join(WORKLOADS, "train_lightning.py")
TRAIN_STEP = "[Strategy]SingleDeviceStrategy.training_step"


def section(text, pid=None):
    """The memory report's lines for one process (the first, or `pid`)."""
    lines = text.splitlines()
    starts = [i for i, l in enumerate(lines) if re.match(r"^pid \d+", l)]
    assert starts, text
    for n, i in enumerate(starts):
        if pid is None or lines[i].startswith(f"pid {pid}"):
            end = starts[n + 1] if n + 1 < len(starts) else len(lines)
            return lines[i:end]
    raise AssertionError(f"no section for pid {pid}: {text}")


def table_after(lines, header_start):
    """Rows (split on 2+ spaces) of the table whose header starts with `header_start`."""
    at = next(i for i, l in enumerate(lines) if l.strip().startswith(header_start))
    rows = []
    for l in lines[at + 1:]:
        if not l.strip() or l.strip().startswith("("):
            break
        rows.append(re.split(r"\s{2,}", l.strip()))
    return rows


def devices(lines):
    return {r[0]: [int(c) if re.fullmatch(r"-?\d+", c) else c for c in r[1:]] for r in table_after(lines, "device ")}


def actions(lines):
    return {(r[0], r[1]): [int(c) if c.isdigit() else c for c in r[2:]] for r in table_after(lines, "action ")}


def leaks(lines):
    """(bytes, count, device, op, allocated at) per group; stack lines skipped."""
    at = next(i for i, l in enumerate(lines) if l.strip().startswith("bytes  count"))
    out = []
    for l in lines[at + 1:]:
        if not l.strip() or l.strip().startswith("..."):
            break
        if l.startswith("        "):
            continue  # a frame of the group above
        c = re.split(r"\s{2,}", l.strip())
        out.append((int(c[0]), int(c[1]), c[2], c[3], c[4]))
    return out


def test_crafted_trace_outputs_agree_and_chrome_validates(tmp_path):
    import jsonschema
    trace = tmp_path / "mem.ltrace"
    subprocess.run([ADVERSARIAL, "mem", "300000", str(trace)], check=True, timeout=120)
    r = subprocess.run([LTRACE, "report", str(trace), "--report", "memory", "--device-stats", "--chrome",
                        str(tmp_path / "t.json"), "--html", str(tmp_path / "t.html")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = section(r.stdout)
    dev = devices(lines)
    assert set(dev) == {"CPU", "CUDA 0"}
    cpu, cuda = dev["CPU"], dev["CUDA 0"]
    # allocs, allocated, frees, freed, unknown, live, peak live, reserved, peak reserved, OOMs
    assert cpu[5] == cpu[1] - cpu[3]  # CPU live: allocated - freed since the attach
    assert cpu[9] > 0 and cuda[7] == 2 << 20
    act = actions(lines)
    row = act[("[LightningModule]Model.training_step", "CPU")]
    assert row[:5] == cpu[:5]  # every allocation happened in the action
    # The leak view holds exactly what is alive: CPU allocations never freed.
    groups = leaks(lines)
    assert sum(g[0] for g in groups if g[2] == "CPU") <= cpu[5]
    m = re.search(r"still alive at the end: (\d+) allocations, (\d+) bytes", r.stdout)
    assert int(m.group(2)) == cpu[5] + cuda[5]
    # Chrome: kineto's instants, one per allocator event, valid against the schema.
    d = json.load(open(tmp_path / "t.json"))
    jsonschema.validate(d, json.load(open(SCHEMA)))
    inst = [e for e in d["traceEvents"] if e["ph"] == "i"]
    mem = [e for e in inst if e["name"] == "[memory]"]
    oom = [e for e in inst if e["name"] == "[OutOfMemory]"]
    assert len(mem) == cpu[0] + cpu[2] + cpu[4] + cuda[0] + cuda[2] + cuda[4]
    assert len(oom) == cpu[9] + cuda[9]
    assert sum(e["args"]["Bytes"] for e in mem if e["args"]["Device Type"] == 0) == cpu[1] - cpu[3]
    assert max(e["args"]["Total Reserved"] for e in mem if e["args"]["Device Type"] == 1) == 2 << 20
    # The CUDA keys of --device-stats.
    assert re.search(r"^  reserved_bytes\.all\.current\s+2097152$", r.stdout, re.M), r.stdout
    # HTML: one timeline per device, at most 2000 points each.
    html = (tmp_path / "t.html").read_text()
    # (the dashboard's step-time lines have a class; the memory timelines do not)
    polylines = re.findall(r'<polyline fill="none"[^>]*points="([^"]*)"', html)
    assert len(polylines) == 3  # CPU live; CUDA live and reserved
    assert all(0 < len(p.split()) <= 2000 for p in polylines)


def test_leak_view_lists_the_kept_tensors_at_their_line(attach):
    import jsonschema
    run = attach([VENV_PY, MEM_LEAK, "--keep", "8"], lt_args=["--report", "memory", "--chrome", "t.json"])
    assert run.target_rc == 0, run.target_out
    truth = json.loads(run.target_out.strip().splitlines()[-1])
    assert truth["oom"]
    assert run.lt_rc == 0, run.lt_err
    lines = section(run.lt_out)
    at_line = [g for g in leaks(lines) if g[4].endswith(f"mem_leak.py:{truth['leak_line']} (make)")]
    assert at_line, run.lt_out
    assert sum(g[0] for g in at_line) == truth["leak_bytes"], run.lt_out
    assert sum(g[1] for g in at_line) == 8
    assert all(g[2] == "CPU" for g in at_line)
    # Named by the op observer's calls around them, joined by time (the
    # observer loads into this torch: no op probes).
    assert "ops: the op observer in the job" in run.lt_err, run.lt_err
    assert all(g[3] == "aten::empty" for g in at_line), run.lt_out
    # The temporaries were freed: none is listed at their line.
    assert not [g for g in leaks(lines) if f"mem_leak.py:{truth['temp_line']} " in g[4]], run.lt_out
    # The OOM the target caught: listed, with its size and line; the target went on.
    m = re.search(r"out of memory: (\d+) failed allocations\n  at [\d.]+ s, thread \d+, CPU, (\d+) bytes asked",
                  run.lt_out)
    assert m and int(m.group(1)) >= 1 and int(m.group(2)) == 2**62, run.lt_out
    assert f"mem_leak.py:{truth['oom_line']})" in run.lt_out.split("out of memory:")[1], run.lt_out
    assert ", op aten::empty" in run.lt_out.split("out of memory:")[1], run.lt_out
    # Chrome: the same events as kineto's instants.
    d = json.load(open(run.tmp / "t.json"))
    jsonschema.validate(d, json.load(open(SCHEMA)))
    inst = [e for e in d["traceEvents"] if e["ph"] == "i"]
    assert [e["args"]["Bytes"] for e in inst if e["name"] == "[OutOfMemory]"][:1] == [2**62]
    kept = sorted(4 * (100_000 + 1000 * i) for i in range(8))
    made = sorted(e["args"]["Bytes"] for e in inst if e["name"] == "[memory]" and e["args"]["Bytes"] in kept)
    assert made == kept


def test_lightning_fit_bytes_per_action(attach):
    run = attach([VENV_PY, TRAIN, "--epochs", "1", "--batches", "10"], lt_args=["--report", "memory"])
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    lines = section(run.lt_out)
    act = actions(lines)
    step = act.get((TRAIN_STEP, "CPU"))
    assert step, run.lt_out
    allocs, allocated, frees, freed = step[0], step[1], step[2], step[3]
    assert allocs >= 10 and allocated > 0 and frees > 0 and freed > 0, step
    # Every byte is charged to one row: the rows add up to the device's totals.
    cpu = devices(lines)["CPU"]
    assert sum(v[1] for (a, d), v in act.items() if d == "CPU") == cpu[1]
    assert sum(v[3] for (a, d), v in act.items() if d == "CPU") == cpu[3]
