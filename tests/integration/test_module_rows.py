"""[pl][profile] rows of the op table (--report ops) against Lightning's own
PyTorchProfiler on the same fit: the same action rows, the same calls, and
CPU totals that are the actions' measured durations."""
import json
import os
import subprocess

import pytest

from conftest import VENV_PY, WORKLOADS
from ops_table import merged, parse_ops_report
from test_ops import TORCH113_PY, need_torch113

MODULE_FIT = os.path.join(WORKLOADS, "module_fit.py")
NAME_WIDTH = 55  # torch's table cuts names of 52 characters or more to 52 and "..."


def cut(name):
    return name if len(name) < NAME_WIDTH - 3 else name[:NAME_WIDTH - 3] + "..."


def reference(tmp_path, python):
    out = tmp_path / "reference.json"
    r = subprocess.run([python, MODULE_FIT, "--reference", str(out)], capture_output=True, text=True, timeout=600,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(out.read_text()), r.stdout


def profile_rows(rows, prefix="[pl][profile]"):
    """{cut name: calls} of the [pl][profile] (or other prefix's) rows, names
    cut as the table cuts them (cut names that collide are summed)."""
    out = {}
    for name, calls in rows.items():
        if name.startswith(prefix):
            out[cut(name)] = out.get(cut(name), 0) + calls
    return out


@pytest.mark.parametrize("python", [pytest.param(VENV_PY, id="venv"),
                                    pytest.param(TORCH113_PY, id="torch-1.13-py3.10")])
def test_profile_rows_match_lightnings_pytorch_profiler(attach, tmp_path, python):
    need_torch113(python)
    theirs, ref_out = reference(tmp_path, python)
    run = attach([python, MODULE_FIT], lt_args=["--report", "ops", "--row-limit", "-1"])
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    # Same fit (same weights), so the same actions ran.
    assert [l for l in run.target_out.splitlines() if l.startswith("RESULT")] == \
        [l for l in ref_out.splitlines() if l.startswith("RESULT")]
    tables = parse_ops_report(run.lt_out)
    ours = merged(tables)
    want = profile_rows(theirs)
    assert len(want) > 30, want
    got = {name: r["calls"] for name, r in ours.items() if name.startswith("[pl][profile]")}
    assert got == want
    # A step function's action is charged to its own table.
    train = tables["[Strategy]SingleDeviceStrategy.training_step"]
    assert train[cut("[pl][profile][Strategy]SingleDeviceStrategy.training_step")]["calls"] == 12
    # CPU total is the measured duration: an enclosing action takes at
    # least as long as the actions inside it, and self never exceeds total.
    epoch = ours["[pl][profile]run_training_epoch"]
    batch = ours["[pl][profile]run_training_batch"]
    step = ours[cut("[pl][profile][Strategy]SingleDeviceStrategy.training_step")]
    assert epoch["total_us"] >= batch["total_us"] >= step["total_us"] > 0
    for name, r in ours.items():
        if name.startswith("[pl][profile]"):
            assert 0 <= r["self_us"] <= r["total_us"] * 1.001 + 0.01, (name, r)
    # run_training_batch's self leaves out the actions it runs (training
    # step, backward, optimizer step: measured), so it is well below its total.
    assert batch["self_us"] < 0.9 * batch["total_us"], batch


def recorded_module_calls(dump_path):
    """{"[pl][module]{type}: {name}": calls} from the recorded MODULE_CALL and
    MODULE_NAME records themselves (--module-names; the op tables' rows are
    checked apart).  Calls of modules with no name (the root, modules outside the tree)
    are left out, as Lightning leaves them out."""
    names, calls = {}, {}
    for line in open(dump_path, encoding="utf-8"):
        f = line.split()
        if len(f) > 3 and f[2] == "module_name":
            kv = dict(x.split("=", 1) for x in f[3:])
            names[kv["module"]] = (kv["type"], kv["name"])
        elif len(f) > 3 and f[2] == "module_call":
            addr = f[3][len("self="):]
            calls[addr] = calls.get(addr, 0) + 1
    out = {}
    for addr, n in calls.items():
        if addr in names and names[addr][1]:
            key = "[pl][module]%s: %s" % names[addr]
            out[key] = out.get(key, 0) + n
    return out, len(names)


@pytest.mark.parametrize("python", [pytest.param(VENV_PY, id="venv"),
                                    pytest.param(TORCH113_PY, id="torch-1.13-py3.10")])
def test_module_calls_and_names_match_lightnings_pytorch_profiler(attach, tmp_path, python):
    """--module-names records one MODULE_CALL per nn.Module call and the
    LightningModule's tree as MODULE_NAMEs: the same module names (types
    included) and call counts as Lightning's PyTorchProfiler
    (record_module_names=True) on the same fit."""
    need_torch113(python)
    theirs, ref_out = reference(tmp_path, python)
    run = attach([python, MODULE_FIT], lt_args=["--module-names", "--row-limit", "-1", "--dump", "dump.txt"])
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    assert [l for l in run.target_out.splitlines() if l.startswith("RESULT")] == \
        [l for l in ref_out.splitlines() if l.startswith("RESULT")]
    want = {name: calls for name, calls in theirs.items() if name.startswith("[pl][module]")}
    assert len(want) >= 6 and any(name.endswith(": block.act") for name in want), want
    got, named = recorded_module_calls(run.tmp / "dump.txt")
    assert got == want
    assert named >= len(want) + 1  # the root too; `unused` is named but never called
    # The op tables' [pl][module] rows: the same calls (summed over the
    # step-function tables; names cut at 52 characters, as torch cuts them).
    ours = merged(parse_ops_report(run.lt_out))
    rows = {name: r["calls"] for name, r in ours.items() if name.startswith("[pl][module]")}
    assert rows == profile_rows(want, "[pl][module]")
    for name, r in ours.items():
        if name.startswith("[pl][module]"):
            assert 0 <= r["self_us"] <= r["total_us"] * 1.001 + 0.01, (name, r)
