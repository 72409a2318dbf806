"""--profile-memory: the op table's memory columns from entry probes on
torch's allocator hooks, on real torch (2.x and 1.13.1), compared byte for
byte with what the workload knows it allocated (tests/workloads/mem_ops.py
writes the truth); the memory sort keys; a target whose allocation fails
(a huge tensor caught by the script) runs as without us; a real Lightning
fit with the columns."""
import json
import os
import re
import subprocess

import pytest

from conftest import LTRACE, ROOT, VENV_PY, WORKLOADS

MEM_OPS = os.path.join(WORKLOADS, "mem_ops.py")
TRAIN = os.path.join(WORKLOADS, "train_lightning.py")
TORCH113_PY = os.path.join(ROOT, ".venv-torch113", "bin", "python")
MEM_ARGS = ["--profile-memory", "--memory-bytes", "--row-limit", "-1"]


def mem_tables(text):
    """-> {title: {name: (calls, cpu_mem, self_cpu_mem)}} from a --memory-bytes table."""
    tables, current, cols = {}, None, None
    for line in text.splitlines():
        if line.startswith("Profile stats for: "):
            current = tables.setdefault(line[len("Profile stats for: "):], {})
            continue
        cells = re.split(r"\s{2,}", line.strip())
        if current is None or set(line.strip()) <= {"-", " "} or line.startswith("Self "):
            continue
        if cells[0] == "Name":
            cols = cells
            continue
        row = dict(zip(cols, cells))
        current[row["Name"]] = (int(row["# of Calls"]), int(row["CPU Mem"]), int(row["Self CPU Mem"]))
    return tables


def names_in_order(text):
    return [re.split(r"\s{2,}", line.strip())[0] for line in text.splitlines()
            if re.match(r"\s+(aten::|\[memory\])", line)]


def result_line(out):
    return next(line for line in out.splitlines() if line.startswith("RESULT"))


PYTHONS = [pytest.param(VENV_PY, id="pypi-torch"), pytest.param(TORCH113_PY, id="pypi-torch-1.13")]


@pytest.mark.parametrize("how", ["observer", "probes"])
@pytest.mark.parametrize("python", PYTHONS)
def test_memory_columns_equal_the_truth(attach, tmp_path, python, how):
    """Each allocation charged to the calls around it: by time to the op
    observer's measured calls, or by the op probes' op stack in BPF."""
    if not os.path.exists(python):
        pytest.fail(f"{python} missing: run `make deps`")
    truth_path = tmp_path / "truth.json"
    run = attach([python, MEM_OPS, "--iters", "60", "--truth", str(truth_path)],
                 lt_args=["--report", "ops"] + MEM_ARGS + ["--sort-by", "self_cpu_memory_usage"]
                 + (["--no-inject"] if how == "probes" else []))
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    assert ("timed on its thread by the op observer" in run.lt_err) == (how == "observer"), run.lt_err
    truth = json.loads(truth_path.read_text())
    tables = mem_tables(run.lt_out)
    assert list(tables) == ["records"], run.lt_out[:1000]
    rows = tables["records"]
    # torch 1.13's median frees its copy after its child aten::empty
    # returned, from a deeper frame that leaves empty's return-address slot
    # intact: the caller-frame check (docs/design-ops.md, check 4) must see
    # that empty returned, or the free is charged to empty.
    for name, (total, self_) in truth.items():
        assert name in rows, (name, sorted(rows))
        assert rows[name][1:] == (total, self_), (name, rows[name], (total, self_), run.lt_out)
    # Everything the loop allocated it freed: self memory sums to zero.
    assert sum(r[2] for r in rows.values()) == 0, run.lt_out
    # Ops that allocate nothing are charged nothing (torch.profiler's
    # timestamp attribution gave aten::fill_ megabytes on 1.13).
    for name in ("aten::fill_", "aten::zero_"):
        if name in rows:
            assert rows[name][1:] == (0, 0), (name, rows[name])
    # Sorted by self CPU memory: the biggest allocator first.
    order = names_in_order(run.lt_out)
    assert order[0] == "aten::empty", order
    selfs = [rows[n][2] for n in order]
    assert selfs == sorted(selfs, reverse=True), order


def test_sort_by_cpu_memory_and_text_format(attach):
    """Without --memory-bytes: torch's units; cpu_memory_usage sorts by total."""
    run = attach([VENV_PY, MEM_OPS, "--iters", "30"],
                 lt_args=["--report", "ops", "--profile-memory", "--row-limit", "-1", "--sort-by", "cpu_memory_usage"])
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    header = next(line for line in run.lt_out.splitlines() if line.strip().startswith("Name"))
    # The op observer measures the times (no "~"); allocations join its calls by time.
    assert re.search(r"CPU time avg\s+CPU Mem\s+Self CPU Mem\s+# of Calls", header), header
    assert "timed on its thread by the op observer" in run.lt_err
    order = names_in_order(run.lt_out)
    assert order[-1] == "[memory]", order  # the frees outside ops: the most negative
    # aten::empty allocates 4*(1000+2000+3000)+4 bytes per iteration: 30 of them
    empty = next(line for line in run.lt_out.splitlines() if line.strip().startswith("aten::empty "))
    assert f"{30 * 24004 / 1024:.2f} KB" in empty, empty


def test_failed_allocation_does_not_hurt_the_target(attach):
    """torch.empty(2**40) (4 TiB) fails in the CPU allocator (OutOfMemory, then a
    C++ exception caught as RuntimeError) under the probes: the target ends
    as it does without us, and the failures are reported."""
    args = ["--iters", "40", "--huge"]
    plain = subprocess.run([VENV_PY, MEM_OPS] + args, capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr
    run = attach([VENV_PY, MEM_OPS] + args, lt_args=["--report", "ops"] + MEM_ARGS)
    assert run.target_rc == 0, run.target_out[-2000:]
    assert result_line(run.target_out) == result_line(plain.stdout)
    assert "caught=40" in result_line(run.target_out)
    assert run.lt_rc == 0, run.lt_err
    m = re.search(r"(\d+) out-of-memory event\(s\)", run.lt_err)
    assert m and int(m.group(1)) == 40, run.lt_err


def test_offline_report_is_identical(attach):
    run = attach([VENV_PY, MEM_OPS, "--iters", "20"], lt_args=["--report", "ops", "-o", "t.ltrace"] + MEM_ARGS)
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    r = subprocess.run([LTRACE, "report", str(run.tmp / "t.ltrace"), "--report", "ops"] + MEM_ARGS,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout == run.lt_out


def test_lightning_fit_with_memory_columns(attach):
    """A short real fit: the columns are there in every step table, each
    training step allocates (activations, gradients), and what the ops
    allocated minus freed stays within what the process holds."""
    run = attach([VENV_PY, TRAIN, "--epochs", "1", "--batches", "8"],
                 lt_args=["--report", "ops"] + MEM_ARGS)
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    tables = mem_tables(run.lt_out)
    train = tables["[Strategy]SingleDeviceStrategy.training_step"]
    # Known to the byte: 8 steps of a batch of 8 through Linear(32, 32) and
    # Linear(32, 2) (train_lightning.py's defaults): two addmm per step whose
    # outputs are 8x32 and 8x2 float32, and addmm allocates nothing else.
    batches, batch, hidden, out = 8, 8, 32, 2
    per_step = 4 * batch * (hidden + out)
    assert train["aten::addmm"] == (2 * batches, batches * per_step, batches * per_step), train["aten::addmm"]
    assert any(r[2] < 0 for r in train.values())  # and frees (temporaries, last step's gradients)
