"""Op-level report (--report ops): real torch, real BPF, compared with
torch.profiler on the same deterministic workload; and the target's safety
while ops throw C++ exceptions under the probes."""
import json
import math
from decimal import Decimal
import os
import re
import subprocess

import pytest

from conftest import LTRACE, ROOT, SITE_PACKAGES, VENV_PY, WORKLOADS, pyenv_python
from ops_table import estimated_tables, merged, parse_ops_report

TORCH_OPS = os.path.join(WORKLOADS, "torch_ops.py")
TRAIN = os.path.join(WORKLOADS, "train_lightning.py")
# torch 1.13.1 + Lightning 2.2.5 from PyPI on pyenv's CPython 3.10, which
# make deps installs (.ci/requirements-torch113.txt): an older libtorch
# (other op set, TensorImpl layout, profiler) and an older Lightning.
TORCH113_PY = os.path.join(ROOT, ".venv-torch113", "bin", "python")
PYENV_310 = "/root/.pyenv/versions/3.10.13/bin/python3.10"  # what .ci/deps.sh builds it on


def need_torch113(python):
    """make deps makes .venv-torch113, so a missing one fails the test; it
    skips only where deps cannot make it (no pyenv CPython 3.10)."""
    if python != TORCH113_PY or os.path.exists(TORCH113_PY):
        return
    if not os.path.exists(PYENV_310):
        pytest.skip(f"no {PYENV_310}: make deps cannot make .venv-torch113 (torch 1.13.1)")
    pytest.fail(".venv-torch113 (torch 1.13.1 + Lightning 2.2.5) missing: run `make deps`")


def torch_profile(python, args, tmp_path, env=None):
    out = tmp_path / "prof.json"
    r = subprocess.run([python, TORCH_OPS, "--profile", str(out)] + args, capture_output=True, text=True,
                       timeout=300, cwd=tmp_path, env=dict(os.environ, **(env or {})))
    assert r.returncode == 0, r.stderr[-2000:]
    return profile_rows(out), r.stdout


def profile_rows(path):
    """torch_ops.py --profile's aten rows: counts, times, raw and merged calls."""
    data = json.loads(path.read_text())
    return {k: dict(v, raw=data["raw_counts"].get(k, 0), exact=data["exact_merged"].get(k, 0),
                    ties=data["merge_ties"].get(k, 0))
            for k, v in data["ops"].items() if k.startswith("aten::")}


def result_line(out):
    return next(line for line in out.splitlines() if line.startswith("RESULT"))


def raw_calls(dump_path):
    """Op entries per name, counted from the recorded events themselves."""
    names, calls = {}, {}
    for line in open(dump_path):
        f = line.split()
        if len(f) > 3 and f[2] == "op_name":
            names[f[3]] = f[4][len("name="):]
        elif len(f) > 3 and f[2] in ("op", "op_span") and not {"watermark", "hidden"} & set(f[3:]):
            # an op probe's entry, or the op observer's call (not its watermark, nor a call --ops left out)
            calls[f[3]] = calls.get(f[3], 0) + 1
    out = {}
    for op, n in calls.items():
        out[names[op]] = out.get(names[op], 0) + n
    return out


def assert_merged_calls(what, calls, exact, ties, raw):
    assert calls <= raw, (what, calls, raw)
    assert abs(calls - exact) <= ties, (what, calls, exact, ties)


def check_calls(ours, theirs):
    """Same names and identical calls for the ops both see."""
    missing = sorted(set(theirs) - set(ours))
    assert not missing, f"torch.profiler saw ops we did not: {missing}"
    for name, t in theirs.items():
        if t["raw"] == t["count"]:
            assert ours[name]["calls"] == t["count"], (name, ours[name]["calls"], t["count"])
        else:
            # torch merged some calls into a same-named parent (aten::sum ->
            # aten::sum.dim_IntList).  It finds parents from times truncated
            # to microseconds (torch 1.13), so its own count varies from run
            # to run (x.mean() x3: 3, 4 or 5); we see the real nesting and
            # must count what its rule gives on it, recomputed from the
            # profiler's recorded tree (tests/workloads/torch_merge.py).
            # Ties are nonzero only for a torch without that tree.
            assert_merged_calls(name, ours[name]["calls"], t["exact"], t["ties"], t["raw"])

def preempted_share(path, theirs):
    """Wall time the profiled work lost to neighbours (wall - thread CPU
    time), as a share of the ops' wall time: as much as that can sit in any
    one op's wall time and in none of our CPU-time samples."""
    data = json.loads(path.read_text())
    their_sum = sum(t["self_cpu_time_total"] for t in theirs.values()) / 1e6
    return min(1.0, max(0.0, data["wall_s"] - data["cpu_s"]) / their_sum)


def check_shares(ours, theirs, preempted=0.0):
    """CPU totals and the top-10 ranking agree within what sampling at 999 Hz
    can resolve, on the same run as torch.profiler's."""
    # The profiler measures wall time per op (its own overhead included: a
    # few us per op), we count 1 ms cpu-clock samples; a busy machine
    # stretches wall time, not CPU time, but alike for every op of the one
    # run, so compare each op's share of the total (both ways it is time in
    # ops).  Only ops holding >= 5% of it.  Bound: 3 sigma of the op's
    # Poisson sample count (sqrt(n) of N samples), plus 10% of the share
    # for what wall and CPU time legitimately differ by (measured: within
    # 0.011 of 0.14, 0.005 of 0.06, on an idle machine and beside two hogs),
    # plus the share of the run's wall time that neighbours took (`preempted`,
    # measured in the run: ~0 alone; in a CI run beside other tests it put
    # aten::matmul at 0.097 of their wall time against 0.136 of our CPU time).
    period_us = 1e6 / 999
    their_sum = sum(t["self_cpu_time_total"] for t in theirs.values())
    our_sum = sum(r["self_us"] for r in ours.values())
    samples = our_sum / period_us
    big = [n for n, t in theirs.items() if t["cpu_time_total"] >= 0.05 * their_sum]
    # How many ops pass 5 % is the profiler's timing: run 32 saw 2 on torch
    # 1.13 (aten::mm, aten::sigmoid) where runs 26-31 saw 3 or more.
    assert len(big) >= 2, big
    for name in big:
        their_share = theirs[name]["cpu_time_total"] / their_sum
        our_share = ours[name]["total_us"] / our_sum
        n = ours[name]["total_us"] / period_us
        bound = 3 * math.sqrt(max(n, 1)) / samples + 0.1 * their_share + preempted
        assert abs(our_share - their_share) <= bound, (name, our_share, their_share, bound, samples, preempted)
    # Ranking: within the profiler's top 10 by CPU total, every pair it
    # separates clearly (x1.5) is in the same order in ours, up to sampling
    # error: counts of samples are Poisson, so the difference of two has a
    # standard deviation of sqrt(a + b) samples; allow 4 of them (2 failed
    # `make test-loaded` once with 12 samples against a bound of 10.6).  The
    # profiler's side is its wall time less each op's 1% slowest calls: a
    # few preempted calls of a small op (3-6 ms each) made _log_softmax look
    # 1.5x aten::mul in two clean-clone CI runs, where CPU time says half.
    # Ops whose calls average under 20 us of the profiler's time are left
    # out of the ranking: its own cost per call (a few us, in its wall time,
    # never in our CPU samples of the op) is then a large part of what it
    # says (beside two hogs it put aten::t, 7200 calls, at 1.5x aten::sum,
    # 802 calls, where 28 samples said 8 to 20).
    def trimmed(n):
        return theirs[n].get("cpu_time_total_trimmed", theirs[n]["cpu_time_total"])

    def long_calls(n):
        return trimmed(n) >= 20.0 * max(theirs[n].get("count", 1), 1)

    top = [n for n in sorted(theirs, key=lambda n: -trimmed(n))[:10] if long_calls(n)]
    compared = 0
    for i, a in enumerate(top):
        for b in top[i + 1:]:
            if trimmed(a) > 1.5 * trimmed(b):
                compared += 1
                na, nb = ours[a]["total_us"] / period_us, ours[b]["total_us"] / period_us
                assert na - nb >= -4 * math.sqrt(na + nb), (a, b, ours[a], ours[b])
    assert compared >= 3, (top, compared)  # the workload has ops of clearly different weight


def check_measured(ours, theirs, per_call_us, preempted_us=0.0, sum_per_call_us=0.0):
    """The op observer's times against torch.profiler's on the same calls
    (both observers registered in the one process): each op's self and
    total CPU within 2%, plus `per_call_us` per call, plus 500 us once.
    Per call: each observer's callbacks run inside the other's interval (ours
    start and end before the profiler's), measured at 0.1-1.3 us per call on
    this workload's ops beside pytest; torch 1.13's profiler keeps whole
    microseconds, so its self times are off by up to 1 us per child and
    end (its aten::linear: 2.4 us per call under ours).  Once: the
    profiler's start sets up its per-thread state inside our interval of the
    first op it sees (aten::randn: 100-180 us measured).  Plus what
    neighbours took from the run (`preempted_us`: its wall less its thread's
    CPU time): a preemption between our callback and the profiler's moves
    its milliseconds from a parent's self to a child's in one observer only
    (CI 54, tests in parallel: 5 ms between aten::nll_loss and
    aten::nll_loss_nd, their sum within 2 %).
    The sum of self times within 2 %, plus `sum_per_call_us` per call: our
    callback (a global one) runs before the profiler's at both ends of a
    call, so our interval holds the profiler's start callback and its holds
    our end callback; their difference, 0.15 us per call on a Lightning
    fit's small ops (3000 calls of 4 us on average: our sum 3.5 % over),
    is lost in the 2 % where ops are larger (torch_ops.py: within 0.2 %)."""
    checked, off = 0, []
    for name, t in theirs.items():
        o = ours[name]
        for mine, their in (("self_us", "self_cpu_time_total"), ("total_us", "cpu_time_total")):
            bound = 0.02 * t[their] + per_call_us * t["count"] + 500.0 + preempted_us
            if abs(o[mine] - t[their]) > bound:
                off.append((name, mine, o[mine], t[their], bound))
        checked += 1
    assert not off, off
    assert checked >= 25, checked
    our_sum = sum(r["self_us"] for n, r in ours.items() if n in theirs)
    their_sum = sum(t["self_cpu_time_total"] for t in theirs.values())
    calls = sum(t["count"] for t in theirs.values())
    assert abs(our_sum - their_sum) <= 0.02 * their_sum + sum_per_call_us * calls + preempted_us, \
        (our_sum, their_sum, calls)


PYENV_311 = pyenv_python(11)
CASES = [pytest.param(VENV_PY, [], id="pypi-torch"),
         # the op probes instead of the op observer: sampled times
         pytest.param(VENV_PY, ["--no-inject"], id="pypi-torch-probes"),
         # the interpreter in libpython3.11.so (pyenv) instead of the executable
         pytest.param(PYENV_311, [], id="pyenv-3.11-libpython"),
         pytest.param(VENV_PY, ["--raising"], id="pypi-torch-raising"),
         pytest.param(TORCH113_PY, [], id="pypi-torch-1.13")]



@pytest.mark.parametrize("python,extra", CASES)
def test_ops_agree_with_torch_profiler(attach, tmp_path, python, extra):
    need_torch113(python)
    if python is None:
        pytest.fail("pyenv CPython 3.11 missing under /root/.pyenv/versions")
    env = {}
    if python == PYENV_311:
        env["PYTHONPATH"] = SITE_PACKAGES[0]  # the .venv's torch (cp311)
    probes = "--no-inject" in extra
    args = ["--iters", "800"] + [a for a in extra if a != "--no-inject"]
    # torch.profiler and ltrace-bpf on the same run: both see the same
    # neighbours (a busy machine slows a memory-bound op like aten::sigmoid
    # by its own amount in each run: 0.04 against 0.13 in two runs beside
    # another test) and the same calls.
    run = attach([python, TORCH_OPS, "--profile", "prof.json"] + args,
                 lt_args=["--report", "ops", "--row-limit", "-1", "--dump", "dump.txt"] + (["--no-inject"] if probes else []),
                 env=env)
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    theirs = profile_rows(run.tmp / "prof.json")
    # Every call torch.profiler recorded, we counted: identical, op by op.
    raw = raw_calls(run.tmp / "dump.txt")
    for name, t in theirs.items():
        assert raw.get(name) == t["raw"], (name, raw.get(name), t["raw"])
    tables = parse_ops_report(run.lt_out)
    assert list(tables) == ["records"], run.lt_out[:500]  # no Lightning: one table for the window
    ours = merged(tables)
    check_calls(ours, theirs)
    if probes:
        assert "op observer not used (--no-inject)" in run.lt_err
        assert "are sampled estimates" in run.lt_err
        check_shares(ours, theirs, preempted_share(run.tmp / "prof.json", theirs))
    else:
        assert "# of Calls and CPU times are exact" in run.lt_err, run.lt_err[-3000:]
        assert "sampled estimates" not in run.lt_err
        data = json.loads((run.tmp / "prof.json").read_text())
        check_measured(ours, theirs, 4.0 if python == TORCH113_PY else 2.0,
                       max(0.0, data["wall_s"] - data["cpu_s"]) * 1e6)


def test_lightning_fit_per_step_function(attach, tmp_path):
    """A real Lightning fit (train + validation) under torch.profiler, with
    ltrace-bpf attached to the same run: one table per step function, as
    PyTorchProfiler steps; every call torch.profiler records, we count; and
    the op observer's self and total CPU times per aten op are the
    profiler's, within check_measured's bounds."""
    args = ["--val", "--epochs", "2", "--batches", "12", "--torch-profile", "lp.json"]
    run = attach([VENV_PY, TRAIN] + args, lt_args=["--report", "ops", "--row-limit", "-1", "--dump", "dump.txt"])
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    data = json.loads((run.tmp / "lp.json").read_text())
    assert re.match(r"Op times \(pid \d+\): measured: .*\nFIT Profiler Report\n", run.lt_out), run.lt_out[:300]
    assert "# of Calls and CPU times are exact" in run.lt_err, run.lt_err[-3000:]
    tables = parse_ops_report(run.lt_out)
    # The ops of no batch (optimizer set-up, epoch ends) have their own table.
    assert set(tables) - {"outside step functions"} == {"[Strategy]SingleDeviceStrategy.training_step",
                                                        "[Strategy]SingleDeviceStrategy.validation_step"}, list(tables)
    train = tables["[Strategy]SingleDeviceStrategy.training_step"]
    assert train["aten::addmm"]["calls"] > 0 and train["aten::mm"]["calls"] > 0  # forward and backward
    val = tables["[Strategy]SingleDeviceStrategy.validation_step"]
    assert not [n for n in val if "backward" in n], sorted(val)
    raw = raw_calls(run.tmp / "dump.txt")
    theirs = {k: v for k, v in data["raw_counts"].items() if k.startswith("aten::")}
    assert len(theirs) > 30
    for name, n in theirs.items():
        assert raw.get(name) == n, (name, raw.get(name), n)
    rows = {k: v for k, v in data["ops"].items() if k.startswith("aten::")}
    check_measured(merged(tables), rows, 2.0, max(0.0, data["wall_s"] - data["cpu_s"]) * 1e6, sum_per_call_us=0.3)


def test_schedule_keeps_lightnings_active_steps(attach):
    run = attach([VENV_PY, TRAIN, "--epochs", "1", "--batches", "10"],
                 lt_args=["--report", "ops", "--row-limit", "-1", "--schedule"])
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    every = attach([VENV_PY, TRAIN, "--epochs", "1", "--batches", "10"], lt_args=["--report", "ops", "--row-limit", "-1"])
    assert every.target_rc == 0 and every.lt_rc == 0, every.lt_err
    step = "[Strategy]SingleDeviceStrategy.training_step"
    scheduled = parse_ops_report(run.lt_out)[step]
    full = parse_ops_report(every.lt_out)[step]
    # 10 steps: wait, warmup, 3 active, wait, warmup, 3 active: 6 of 10
    # batches (one forward each) are kept.
    assert scheduled["aten::addmm"]["calls"] * 10 == full["aten::addmm"]["calls"] * 6
    assert "--schedule left out 4 step(s)" in run.lt_err


@pytest.mark.parametrize("how", ["observer", "probes"])
@pytest.mark.parametrize("python", [pytest.param(VENV_PY, id="pypi-torch"),
                                    pytest.param(TORCH113_PY, id="pypi-torch-1.13")])
def test_group_by_input_shapes_matches_torch_profiler(attach, tmp_path, python, how):
    """--group-by-input-shapes: the (op, input shapes) rows and their calls
    are torch.profiler's (record_shapes=True, key_averages(group_by_input_shape=True)),
    in two torch builds whose RecordFunction and TensorImpl layouts differ;
    read by the op observer from the inputs torch hands its callback (exact
    times), or by the op probes from the argument registers (--no-inject)."""
    need_torch113(python)
    args = ["--iters", "100", "--raising"]
    theirs, _ = torch_profile(python, args + ["--record-shapes"], tmp_path)
    data = json.loads((tmp_path / "prof.json").read_text())
    run = attach([python, TORCH_OPS] + args,
                 lt_args=["--report", "ops", "--group-by-input-shapes", "--row-limit", "-1"]
                 + (["--no-inject"] if how == "probes" else []))
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    measured = "timed on its thread by the op observer" in run.lt_err
    assert measured == (how == "observer"), observer_lines(run.lt_err)
    lines = run.lt_out.splitlines()[1:]  # after the line naming the path that timed the ops
    header = re.split(r"\s{2,}", lines[3].strip())
    est = "" if measured else "~"
    assert header[1:3] == ["Self CPU %" + est, "Self CPU" + est] and header[-1] == "Input Shapes", header
    ours = {}
    for line in run.lt_out.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) == 8 and cells[0].startswith("aten::"):
            ours[cells[0] + " " + cells[7]] = ours.get(cells[0] + " " + cells[7], 0) + int(cells[6])
    assert "Input Shapes" in run.lt_out
    merged_names = {n for n, t in theirs.items() if t["raw"] != t["count"]}  # torch's timestamp-based merge
    checked = 0
    for key, count in data["shapes"].items():
        name = key.split(" ")[0]
        if not name.startswith("aten::") or name in merged_names:
            continue
        assert ours.get(key) == count, (key, ours.get(key), count, sorted(k for k in ours if k.startswith(name + " ")))
        checked += 1
    assert checked >= 25
    assert "aten::mm [[128, 256], [256, 256]]" in ours  # a forward matmul, shapes in torch's format


def observer_lines(err):
    """What the tracer said of the op observer and the bridge: the lines a
    failed assertion on them needs (pytest cuts a long stderr short)."""
    return "\n".join(l for l in err.splitlines() if re.search(r"observer|bridge|handshake|inject", l))


def test_a_wrong_shapes_row_is_caught_without_harm(attach, monkeypatch):
    """A RecordFunction layout the table got wrong (inputs_ read at
    sequence_nr_: a number as a pointer) is found out by the bridge's
    checked reads of the first calls: the job runs on unharmed with its
    result, shapes are said to be off, and every call is still counted."""
    args = ["--iters", "100", "--raising"]
    plain = subprocess.run([VENV_PY, TORCH_OPS] + args, capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr[-2000:]
    monkeypatch.setenv("LTRACE_BPF_TEST_SHAPES_INPUTS_OFFSET", "200")  # read by ltrace-bpf
    run = attach([VENV_PY, TORCH_OPS] + args,
                 lt_args=["--report", "ops", "--group-by-input-shapes", "--row-limit", "-1"])
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    assert result_line(run.target_out) == result_line(plain.stdout)
    assert "timed on its thread by the op observer" in run.lt_err, observer_lines(run.lt_err)
    assert "the op observer records no input shapes (an input read otherwise than the layout says)" in run.lt_err
    calls = {}
    for line in run.lt_out.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) >= 7 and cells[0] == "aten::mm":
            calls[cells[-1] if len(cells) == 8 else ""] = int(cells[6])
    assert sum(calls.values()) > 0 and set(calls) <= {""}, calls


@pytest.mark.parametrize("how", ["observer", "probes"])
def test_ops_report_layout(attach, how):
    """torch's header, exact (the op observer) or with a "~" on every CPU
    column (the op probes' sampled estimates)."""
    run = attach([VENV_PY, TORCH_OPS, "--iters", "200"],
                 lt_args=["--report", "ops", "--row-limit", "5", "--sort-by", "count"]
                 + (["--no-inject"] if how == "probes" else []))
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    lines = run.lt_out.splitlines()
    # A line before Lightning's title names the path that timed the ops.
    path = "sampled estimates (~): stack samples x" if how == "probes" else "measured: each call timed on its thread"
    assert lines[0].startswith(f"Op times (pid {run.target_pid}): {path}"), lines[0]
    if how == "probes":
        assert "op observer not used: --no-inject" in lines[0], lines[0]
    lines = lines[1:]
    assert lines[0] == "Profiler Report" and lines[1] == "Profile stats for: records"
    header = re.split(r"\s{2,}", lines[3].strip())
    est = "~" if how == "probes" else ""
    assert header == ["Name"] + [h + est for h in ("Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg")] \
        + ["# of Calls"]
    rows = parse_ops_report(run.lt_out)["records"]
    assert len(rows) == 5
    calls = [r["calls"] for r in rows.values()]
    assert calls == sorted(calls, reverse=True)
    assert re.search(r"^Self CPU time total" + est + r": [0-9.]+(us|ms|s)$", run.lt_out, re.M)


def test_bad_sort_key_is_lightnings_error():
    r = subprocess.run([LTRACE, "--pid", "1", "--report", "ops", "--sort-by", "wall"], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.startswith("ltrace-bpf: Found sort_by_key: wall. Should be within {")
    assert len(r.stderr.strip().splitlines()) == 1


def test_ops_filter_and_no_match(attach):
    for how in ("observer", "probes"):
        run = attach([VENV_PY, TORCH_OPS, "--iters", "100"],
                     lt_args=["--report", "ops", "--ops", "aten::mm,aten::sig*", "--row-limit", "-1"]
                     + (["--no-inject"] if how == "probes" else []))
        assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
        rows = parse_ops_report(run.lt_out)["records"]
        assert set(rows) == {"aten::mm", "aten::sigmoid"}, (how, sorted(rows))
        probes = int(re.search(r"op probes: (\d+) in", run.lt_err).group(1))
        if how == "probes":
            assert 2 <= probes < 50  # mm, sigmoid and their overloads / out= variants, nothing else
        else:
            assert probes == 0
    target = subprocess.Popen([VENV_PY, TORCH_OPS, "--wait-file", "/nonexistent/never"], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert target.stdout.readline().startswith("READY")
        r = subprocess.run([LTRACE, "--pid", str(target.pid), "--ops", "aten::no_such_op"], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 2, r.stderr
        assert r.stderr.startswith("ltrace-bpf: --ops 'aten::no_such_op' matches none of the 3")
        assert target.poll() is None  # the target lives on
    finally:
        target.kill()


SAFETY_MODES = [["--report", "ops"],
                ["--report", "ops,advanced", "--off-cpu", "--rate", "4999"],
                ["record", "--report", "ops", "-o", "trace.ltrace"]]


RAISING_ARGS = ["--iters", "150", "--raising"]


@pytest.fixture(scope="module")
def raising_plain():
    """The raising workload's output without us: one run for every mode."""
    plain = subprocess.run([VENV_PY, TORCH_OPS] + RAISING_ARGS, capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr[-2000:]
    return plain


@pytest.mark.parametrize("mode", SAFETY_MODES, ids=["ops", "ops+stacks+offcpu", "record"])
def test_raising_ops_do_not_hurt_the_target(attach, raising_plain, mode):
    """Ops that throw (bad matmul shapes caught by the script, F.linear
    raising from nested ops, an error crossing the autograd engine in
    backward) under every probe: the target ends as it does without us."""
    args, plain = RAISING_ARGS, raising_plain
    if mode[0] == "record":  # a subcommand: it goes before --pid
        run = attach([VENV_PY, TORCH_OPS] + args, lt_args=mode[1:], subcommand="record")
    else:
        run = attach([VENV_PY, TORCH_OPS] + args, lt_args=mode)
    assert run.target_rc == 0, run.target_out[-2000:]
    assert result_line(run.target_out) == result_line(plain.stdout)
    assert "caught=450" in result_line(run.target_out)
    assert run.lt_rc == 0, run.lt_err


def test_offline_report_is_identical(attach):
    run = attach([VENV_PY, TORCH_OPS, "--iters", "150"],
                 lt_args=["--report", "ops", "--row-limit", "-1", "-o", "t.ltrace", "--chrome", "live.json",
                          "--html", "page.html"])
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    r = subprocess.run([LTRACE, "report", str(run.tmp / "t.ltrace"), "--report", "ops", "--row-limit", "-1"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout == run.lt_out
    # the Chrome trace carries every op call as a kineto cpu_op slice
    trace = json.loads((run.tmp / "live.json").read_text())
    ops = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"]
    calls = sum(row["calls"] for row in parse_ops_report(run.lt_out)["records"].values())
    assert len(ops) >= calls  # the table merges torch's same-name children; the timeline keeps them
    # every call the op observer saw: aten ops, autograd nodes, record_function scopes
    assert all(e["ph"] == "X" and e["dur"] >= 0 and e["name"] for e in ops)
    assert {e["name"] for e in ops} >= {"aten::mm", "aten::sigmoid", "MmBackward0"}
    assert {e["args"]["External id"] for e in ops} == set(range(1, len(ops) + 1))
    page = (run.tmp / "page.html").read_text()
    assert "<h3>Operators: records</h3>" in page and "<td>aten::mm</td>" in page
    # The dashboard's op times are the text table's: measured by the op
    # observer (they read the samples alone, zero with the observer, before).
    assert "CPU times exact: each call timed by the op observer" in page, page[:3000]
    m = re.search(r"<tr><td>aten::mm</td><td>[0-9.]+%</td><td>([0-9.]+)</td><td>([0-9.]+)</td>", page)
    assert m, page[-3000:]
    mm = parse_ops_report(run.lt_out)["records"]["aten::mm"]
    for cell, us in ((m.group(1), mm["self_us"]), (m.group(2), mm["total_us"])):
        # the text rounds to torch's 3 decimals of its unit
        assert us > 0 and abs(float(cell) * 1e3 - us) <= max(0.01 * us, 1.0), (cell, mm)


def test_attach_and_detach_mid_run(tmp_path):
    """Two attaches of 1 s each while the target computes, then it runs on
    alone: same result as never attached, exit code 0."""
    args = ["--iters", "100", "--repeat", "25"]
    plain = subprocess.run([VENV_PY, TORCH_OPS] + args, capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr[-2000:]
    target = subprocess.Popen([VENV_PY, TORCH_OPS] + args, stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout.readline().startswith("READY")
        for _ in range(2):
            r = subprocess.run([LTRACE, "--pid", str(target.pid), "--report", "ops", "-d", "1"], capture_output=True,
                               text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            assert "Profile stats for: records" in r.stdout
            assert target.poll() is None
        out, _ = target.communicate(timeout=300)
    finally:
        target.kill()
    assert target.returncode == 0
    assert result_line(out) == result_line(plain.stdout)


def test_dataloader_workers_with_children(attach):
    """--children: each DataLoader worker (forked after attach) is its own
    table of the ops it ran (collate's aten::stack)."""
    run = attach([VENV_PY, TRAIN, "--workers", "2", "--epochs", "1"],
                 lt_args=["--children", "--report", "ops", "--row-limit", "-1"])
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    sections = run.lt_out.split("==> pid ")[1:]
    assert len(sections) == 3, run.lt_out[:3000]  # the trainer and two workers
    workers = [s for s in sections if "Profile stats for: records" in s]
    assert len(workers) == 2
    for w in workers:
        assert "aten::stack" in w
    trainer = [s for s in sections if "training_step" in s]
    assert len(trainer) == 1 and "aten::addmm" in trainer[0]


def test_process_without_torch(attach):
    """A Python process that never imports torch: no op table, a note, exit 0."""
    run = attach([VENV_PY, os.path.join(WORKLOADS, "cpu_shares.py"), "--seconds", "1"], lt_args=["--report", "ops"])
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    assert run.lt_out == ""
    assert "no aten op calls in the window" in run.lt_err


def test_chrome_trace_with_ops_loads_in_hta(attach, tmp_path):
    """Lightning actions and op calls in one kineto-style trace: op slices
    nest properly per thread, and HTA loads every slice."""
    run = attach([VENV_PY, TRAIN, "--epochs", "1", "--batches", "8"],
                 lt_args=["--report", "ops", "--chrome", "run.json"])
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    # Decimal: wall-clock microseconds (~1.8e15) lose sub-us digits as floats
    events = json.loads((run.tmp / "run.json").read_text(), parse_float=Decimal)["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    ops = [e for e in slices if e["cat"] == "cpu_op"]
    assert ops and any(e["cat"] == "user_annotation" for e in slices)
    by_tid = {}
    for e in ops:
        by_tid.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_tid.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for b, end in spans:
            while stack and stack[-1] <= b:
                stack.pop()
            assert not stack or end <= stack[-1], (b, end, stack[-1])
            stack.append(end)
    trace_dir = tmp_path / "hta"
    trace_dir.mkdir()
    (trace_dir / "rank-0.json").write_text((run.tmp / "run.json").read_text())
    code = ("from hta.trace_analysis import TraceAnalysis\n"
            f"a = TraceAnalysis(trace_dir={str(trace_dir)!r})\n"
            "t = a.t.get_trace(0)\n"
            "print('ROWS', len(t)); print('MM', 'aten::addmm' in set(a.t.symbol_table.sym_table))\n")
    r = subprocess.run([VENV_PY, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"ROWS {len(slices)}" in r.stdout and "MM True" in r.stdout


STAGE_OPS = os.path.join(WORKLOADS, "stage_ops.py")
STEP_TABLES = {"train": "[Strategy]SingleDeviceStrategy.training_step",
               "validation": "[Strategy]SingleDeviceStrategy.validation_step",
               "test": "[Strategy]SingleDeviceStrategy.test_step"}


@pytest.mark.parametrize("python", [pytest.param(VENV_PY, id="pypi-torch"),
                                    pytest.param(TORCH113_PY, id="pypi-torch-1.13")])
def test_each_step_table_holds_only_its_stages_batches(tmp_path, python):
    """A real fit with validation inside the epoch and gradient accumulation,
    then a test run: the validation and test tables hold no backward and no
    optimizer update of a training batch, and every stage's op counts are
    torch.profiler's in the same process over the same batches (its
    record_function scopes around each batch are the reference).  `run`
    adopts the CPython before torch loads: the op probes count from the
    load, the op observer takes over once the load is over, so the step
    tables' times are measured (no "~") and only the set-up's calls before
    the switch are the probes' (each call counted by one side only: the
    counts below would show a call counted twice or missed)."""
    need_torch113(python)
    plain = subprocess.run([python, STAGE_OPS], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr[-3000:]
    ref = tmp_path / "ref.json"
    r = subprocess.run([LTRACE, "run", "--no-gpu", "--report", "ops", "--row-limit", "-1", "--", python, STAGE_OPS,
                        "--out", str(ref)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert result_line(r.stdout) == result_line(plain.stdout)  # the target computed the same
    data = json.loads(ref.read_text())
    tables = parse_ops_report(r.stdout)
    assert set(STEP_TABLES.values()) <= set(tables), list(tables)
    assert not estimated_tables(r.stdout) & set(STEP_TABLES.values()), (estimated_tables(r.stdout), r.stderr[-3000:])
    assert "op observer not used" not in r.stderr, r.stderr[-3000:]
    for stage in ("validation", "test"):
        rows = tables[STEP_TABLES[stage]]
        assert not [n for n in rows if "backward" in n.lower()], (stage, sorted(rows))
        assert "aten::add_" not in rows and "aten::_foreach_add_" not in rows, (stage, sorted(rows))
    for stage, title in STEP_TABLES.items():
        # The reference counts aten ops: not Lightning's [pl][profile] action
        # rows, nor the backward functions and user scopes the op observer
        # records as torch.profiler does.
        ours = {n: r for n, r in tables[title].items() if n.startswith("aten::")}
        merged_ref, raw_ref = data["merged"][stage], data["raw"][stage]
        assert set(ours) == set(merged_ref), (stage, set(ours) ^ set(merged_ref))
        for name, n in merged_ref.items():
            if raw_ref.get(name) == n:
                assert ours[name]["calls"] == n, (stage, name, ours[name]["calls"], n)
            else:  # torch merged calls into a same-named parent: see check_calls
                assert_merged_calls((stage, name), ours[name]["calls"], data["exact_merged"][stage].get(name, 0),
                                    data["merge_ties"].get(stage, {}).get(name, 0), raw_ref[name])
    # The rest (optimizer set-up, epoch ends) is in a table of its own, and
    # holds at least what torch.profiler saw outside every batch (we also
    # see the ops before its profile began).
    outside = tables["outside step functions"]
    for name, n in data["raw"]["outside"].items():
        assert outside.get(name, {"calls": 0})["calls"] >= min(n, data["merged"]["outside"].get(name, 0)), name
