"""GPU support on this CPU-only machine, with the real parts that run here:
the bridge library injected into real CPython + PyPI torch (a CUDA build:
libcudart and libcupti are in the process, the driver is not), NVTX through
NVTX_INJECTION64_PATH under `ltrace-bpf run` (torch.cuda.nvtx works without a
GPU), and the guarantees around them: a CPU-only job is never injected, the
target's results do not change, bad commands get a clear error.  Kernel times
need a GPU: tests/gpu/run.sh (docs/benchmarks.md)."""
import os
import re
import subprocess
import sys
import time

import pytest
from conftest import LTRACE, ROOT, VENV_PY, wait_for

BRIDGE = os.path.join(ROOT, "build", "libltrace-bridge.so")

pytestmark = pytest.mark.skipif(not os.path.exists(BRIDGE), reason="bridge not built (make bridge)")

NVTX_PROG = r"""
import os, sys, time, torch
torch.cuda.nvtx.range_push("outer")
for i in range(3):
    torch.cuda.nvtx.range_push(f"inner{i % 2}")
    torch.randn(16, 16).mm(torch.randn(16, 16))
    time.sleep(0.05)
    torch.cuda.nvtx.range_pop()
torch.cuda.nvtx.mark("marked")
torch.cuda.nvtx.range_pop()
print("RESULT", float(torch.ones(4).sum()))
"""

LOOP_PROG = r"""
import os, sys, time, torch
torch.manual_seed(0)
print("READY", os.getpid(), flush=True)
x = torch.randn(64, 64)
acc = 0.0
# At least argv[1] steps, and on until the file argv[2] (if given) appears:
# the tracer's whole session falls inside the loop however slowly a busy
# machine attaches.  The result depends only on the number of steps.
n, stop = int(sys.argv[1]), (sys.argv[2] if len(sys.argv) > 2 else None)
i = 0
while i < n or (stop and not os.path.exists(stop)):
    acc += float(torch.mm(x, x).relu().sum()) * 1e-6
    time.sleep(0.002)
    i += 1
print("RESULT %.6f STEPS %d" % (acc, i), flush=True)
"""


def nvtx_rows(text):
    """nvtx_sum rows: range -> instances (Style, Range are the last columns)."""
    rows = {}
    body = text.split("NVTX Range Summary (nvtx_sum):", 1)
    if len(body) < 2:
        return rows
    for line in body[1].splitlines()[4:]:
        if not line.strip():
            break
        cells = line.split()
        rows[cells[-1]] = int(cells[2].replace(",", ""))
    return rows


def test_run_captures_nvtx_from_the_first_call(tmp_path):
    prog = tmp_path / "nvtx.py"
    prog.write_text(NVTX_PROG)
    r = subprocess.run([LTRACE, "run", "--report", "gpu", "--", VENV_PY, str(prog)], capture_output=True, text=True,
                       timeout=900)  # bounds a hang: importing torch takes minutes on a busy machine
    assert r.returncode == 0, r.stderr
    assert "RESULT 4.0" in r.stdout  # the command's own output goes through untouched
    rows = nvtx_rows(r.stdout)
    assert rows == {"outer": 1, "inner0": 2, "inner1": 1}, r.stdout


def test_run_command_not_found_is_a_clear_error(tmp_path):
    r = subprocess.run([LTRACE, "run", "--", str(tmp_path / "no-such-program")], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 10, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "No such file or directory" in lines[0], r.stderr


def test_run_needs_a_command():
    r = subprocess.run([LTRACE, "run"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "run needs a command" in r.stderr


_LOOPS = []


@pytest.fixture(autouse=True)
def _end_loops():
    """A loop waiting for its stop file ends with the test, failed or not."""
    yield
    while _LOOPS:
        p, stop = _LOOPS.pop()
        if stop:
            stop.touch()
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def start_loop(tmp_path, iters, env=None, stop=None):
    prog = tmp_path / "loop.py"
    prog.write_text(LOOP_PROG)
    out = tmp_path / "loop.out"
    p = subprocess.Popen([VENV_PY, str(prog), str(iters)] + ([str(stop)] if stop else []), stdout=open(out, "w"),
                         stderr=subprocess.STDOUT, env=dict(os.environ, **(env or {})))
    _LOOPS.append((p, stop))
    wait_for(str(out), "READY", 300, p)
    return p, out


def steps_of(out):
    m = re.search(r"STEPS (\d+)", open(out).read())
    return int(m.group(1)) if m else None


def result_of(out):
    m = re.search(r"RESULT (\S+)", open(out).read())
    return m.group(1) if m else None


def mapped_bridge(pid):
    with open(f"/proc/{pid}/maps") as f:
        return "libltrace-bridge" in f.read()


def test_cpu_only_job_is_never_injected(tmp_path):
    # PyPI torch maps libcudart at import; without the driver CUDA is not in
    # use, and the GPU side must leave a CPU job exactly as it was.  (The op
    # observer of --report ops puts the bridge in by design:
    # test_op_observer.py.)
    stop = tmp_path / "stop"
    p, out = start_loop(tmp_path, 1500, stop=stop)
    r = subprocess.run([LTRACE, "--pid", str(p.pid), "--report", "gpu", "--duration", "1.5"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert not mapped_bridge(p.pid)
    assert "GPU Report" not in r.stdout
    stop.touch()
    p.wait(timeout=300)
    assert p.returncode == 0


def test_late_injection_leaves_the_target_unchanged(tmp_path):
    # LTRACE_GPU_WITHOUT_DRIVER lets the tracer treat libcudart as "CUDA in
    # use": the real ptrace injection, USDT attach and bridge protocol run;
    # the bridge sees no driver, takes nothing, and says so.
    sub = tmp_path / "inj"
    sub.mkdir()
    stop = sub / "stop"
    p, out = start_loop(sub, 1500, stop=stop)
    r = subprocess.run([LTRACE, "--pid", str(p.pid), "-v", "--report", "ops,gpu", "--duration", "1.5"],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ, LTRACE_GPU_WITHOUT_DRIVER="1"))
    assert r.returncode == 0, r.stderr
    assert mapped_bridge(p.pid)
    # The op observer (the ops report) puts the bridge in first; the GPU
    # tracer takes CUPTI through that one bridge.
    assert "op observer: bridge injected" in r.stderr and "GPU: CUPTI through the bridge already in" in r.stderr
    assert r.stderr.count("bridge injected") + r.stderr.count("GPU: injected") == 1  # one injection
    assert "waiting for the CUDA driver" in r.stderr  # the bridge's own report, through its USDT probe
    assert "tracer left" in r.stderr                  # ...and its answer to the detach protocol
    # "attached" is said only once the injected bridge has reported: a job
    # started on that word has its first kernels in the report.
    said = r.stderr.index("waiting for the CUDA driver")
    assert said < r.stderr.index("ltrace-bpf: attached:") and "injected bridges (GPU, op observer) reported after" in r.stderr, r.stderr
    stop.touch()
    p.wait(timeout=300)
    assert p.returncode == 0
    # The same number of steps, never injected: the same result.
    ref, ref_out = start_loop(tmp_path, steps_of(out))
    ref.wait(timeout=300)
    assert result_of(ref_out) is not None and result_of(out) == result_of(ref_out), (out.read_text(), ref_out.read_text())


def test_no_inject_and_no_gpu(tmp_path):
    stop = tmp_path / "stop"
    p, out = start_loop(tmp_path, 2000, stop=stop)
    env = dict(os.environ, LTRACE_GPU_WITHOUT_DRIVER="1")
    r = subprocess.run([LTRACE, "--pid", str(p.pid), "--no-inject", "--report", "gpu", "--duration", "1"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert not mapped_bridge(p.pid)
    assert "--no-inject; falling back to" in r.stderr  # uprobes on libcudart instead
    # ...and they are in: one uprobe_multi link for libcudart's sites
    m = re.search(r"falling back to (\d+) entry uprobes", r.stderr)
    assert m and int(m.group(1)) > 0, r.stderr
    r = subprocess.run([LTRACE, "--pid", str(p.pid), "--no-gpu", "--report", "gpu", "--duration", "1"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert not mapped_bridge(p.pid)
    stop.touch()
    p.wait(timeout=300)
    assert p.returncode == 0


def test_gpu_records_survive_the_trace_file(tmp_path):
    prog = tmp_path / "nvtx.py"
    prog.write_text(NVTX_PROG)
    trace = tmp_path / "t.ltrace"
    live = subprocess.run([LTRACE, "run", "--report", "gpu", "-o", str(trace), "--", VENV_PY, str(prog)],
                          capture_output=True, text=True, timeout=900)
    assert live.returncode == 0, live.stderr
    chrome, html = tmp_path / "t.json", tmp_path / "t.html"
    off = subprocess.run([LTRACE, "report", str(trace), "--report", "gpu", "--chrome", str(chrome), "--html", str(html)],
                         capture_output=True, text=True, timeout=60)
    assert off.returncode == 0, off.stderr
    import json
    events = json.load(open(chrome))["traceEvents"]
    ranges = sorted(e["name"] for e in events if e.get("cat") == "nvtx")
    assert ranges == ["inner0", "inner0", "inner1", "outer"]
    page = open(html).read()
    assert "<h4>NVTX ranges</h4>" in page and "<td>inner0</td><td>2</td>" in page
    # same ranges and counts offline; the command's own stdout is not in the file
    assert nvtx_rows(off.stdout) == nvtx_rows(live.stdout) == {"outer": 1, "inner0": 2, "inner1": 1}
