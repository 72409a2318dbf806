"""Every CPython 3.8-3.13 on the machine, both layouts (libpython3.X.so from
pyenv, and Debian's python3.11 with the interpreter in the executable), running
Lightning's real Profiler.profile generator: concurrent threads, actions left
by an exception, a custom Profiler subclass, direct start()/stop()."""
import json
import os
import tempfile

import pytest

from conftest import WORKLOADS, parse_simple_report, pyenv_python
import lightning_site

CASES = [(m, pyenv_python(m)) for m in range(8, 14)] + [(11, "/usr/bin/python3.11")]


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    base = tmp_path_factory.mktemp("sites")
    # 2.6.x no longer runs on 3.8; 2.3.3 is the last release that does.
    return {
        "2.3.3": lightning_site.build(str(base / "pl233"), "2.3.3"),
        "2.6.6": lightning_site.build(str(base / "pl266"), "2.6.6"),
        "lightning-2.6.6": lightning_site.build(str(base / "l266"), "2.6.6", wheel="lightning"),
    }


@pytest.mark.parametrize("minor,python", CASES, ids=[f"3.{m}-{'exe' if p and p.startswith('/usr') else 'lib'}"
                                                     for m, p in CASES])
def test_actions_every_cpython(attach, sites, minor, python):
    if python is None or not os.path.exists(python):
        pytest.fail(f"CPython 3.{minor} is not installed at the expected place")
    site = sites["2.3.3" if minor == 8 else "2.6.6"]
    run = attach([python, os.path.join(WORKLOADS, "profiler_actions.py")], env={"PYTHONPATH": site})
    assert run.target_rc == 0, run.target_out
    assert run.lt_rc == 0, run.lt_err
    result = json.loads(run.target_out.split("RESULT ", 1)[1])
    rows = parse_simple_report(run.lt_out)
    expected = dict(result["counts"])
    # A direct start()/stop() pair from Python code is a plain Python call:
    # no C entry point sees it (CPython 3.11+ even inlines it), so it is not
    # reported.  Lightning's own direct calls (the dataloader fetches) are
    # caught through next(CombinedLoader) instead: see test_lightning.py and
    # docs/design-actions.md.
    expected.pop("direct")
    assert "direct" not in rows
    for name, count in expected.items():
        assert name in rows, f"{name} missing from report:\n{run.lt_out}"
        assert int(rows[name][1]) == count, (name, rows[name])
        # Our window starts when the generator starts (before start()) and
        # ends when it resumes (before stop()): it covers the body plus the
        # `with` plumbing, and lies inside the whole `with` statement as the
        # workload timed it (the same clock), however long a busy machine
        # kept the thread off its CPU in the plumbing.  The table rounds to
        # 5 significant digits.
        total = float(rows[name][2])
        body, span = result["body"][name], result["span"][name]
        assert body * 0.98 <= total <= span * 1.0001 + 1e-5 * count, (name, total, body, span)
    assert "action(s) still open" not in run.lt_err


def test_lightning_wheel_layout(attach, sites):
    """The `lightning` wheel keeps the profilers in lightning/pytorch/profilers/."""
    run = attach(["/root/.pyenv/versions/3.12.1/bin/python3.12", os.path.join(WORKLOADS, "profiler_actions.py")],
                 env={"PYTHONPATH": sites["lightning-2.6.6"], "LT_LIGHTNING_WHEEL": "lightning"})
    assert run.target_rc == 0 and run.lt_rc == 0, run.target_out + run.lt_err
    rows = parse_simple_report(run.lt_out)
    assert rows["outer"][1] == "20" and rows["raises"][1] == "5"


@pytest.mark.parametrize("minor", [8, 10, 11, 12, 13])
def test_eval_frame_fallback(tmp_path, sites, minor):
    """The probe path used when a PGO build inlined builtins.next: an entry
    probe on _PyEval_EvalFrameDefault (forced here on builds that do not need it)."""
    import subprocess
    from conftest import LTRACE, wait_for
    python = pyenv_python(minor)
    go, log, err = tmp_path / "go", tmp_path / "w.out", tmp_path / "lt.err"
    env = dict(os.environ, PYTHONPATH=sites["2.3.3" if minor == 8 else "2.6.6"], PYTHONIOENCODING="utf-8")
    with open(log, "w") as f:
        w = subprocess.Popen([python, os.path.join(WORKLOADS, "profiler_actions.py"), "--wait-file", str(go)],
                             stdout=f, env=env)
    wait_for(str(log), "READY", 120, w)
    lt = subprocess.Popen([LTRACE, "--pid", str(w.pid), "-v"], stdout=subprocess.PIPE, stderr=open(err, "w"),
                          text=True, env=dict(os.environ, LTRACE_BPF_FORCE_EVAL_PROBE="1"))
    wait_for(str(err), "attached", 120, lt)
    assert "_PyEval_EvalFrameDefault" in err.read_text()
    go.touch()
    assert w.wait(60) == 0
    out, _ = lt.communicate(timeout=60)
    rows = parse_simple_report(out)
    assert rows["outer"][1] == "20" and rows["inner"][1] == "20" and rows["thread_action"][1] == "15"
    assert rows["raises"][1] == "5" and rows["custom"][1] == "3"


@pytest.mark.parametrize("minor", [8, 12])
def test_module_names_eval_probe_keeps_action_counts(tmp_path, sites, minor):
    """--module-names attaches the eval loop's entry probe also on builds
    whose resumes come from builtin_next / gen_throw: every action is still
    counted once (the eval probe leaves those targets' resumes alone)."""
    import subprocess
    from conftest import LTRACE, wait_for
    python = pyenv_python(minor)
    go, log, err, trace = tmp_path / "go", tmp_path / "w.out", tmp_path / "lt.err", tmp_path / "t.ltrace"
    env = dict(os.environ, PYTHONPATH=sites["2.3.3" if minor == 8 else "2.6.6"], PYTHONIOENCODING="utf-8")
    with open(log, "w") as f:
        w = subprocess.Popen([python, os.path.join(WORKLOADS, "profiler_actions.py"), "--wait-file", str(go)],
                             stdout=f, env=env)
    wait_for(str(log), "READY", 120, w)
    lt = subprocess.Popen([LTRACE, "--pid", str(w.pid), "-v", "--module-names", "-o", str(trace)],
                          stdout=subprocess.PIPE, stderr=open(err, "w"), text=True)
    wait_for(str(err), "attached", 120, lt)
    probes = [l for l in err.read_text().splitlines() if "probes:" in l]
    assert probes and "_PyEval_EvalFrameDefault" in probes[0] and "builtin_next" in probes[0], probes
    go.touch()
    assert w.wait(60) == 0
    lt.communicate(timeout=60)
    r = subprocess.run([LTRACE, "report", str(trace), "--report", "simple"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    rows = parse_simple_report(r.stdout)
    assert rows["outer"][1] == "20" and rows["inner"][1] == "20" and rows["thread_action"][1] == "15"
    assert rows["raises"][1] == "5" and rows["custom"][1] == "3"
