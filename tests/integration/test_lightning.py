"""Real torch + real Lightning: ltrace-bpf attached from before Trainer.fit,
compared with Lightning's own SimpleProfiler in the same process."""
import glob
import os
import re

import pytest

from conftest import SITE_PACKAGES, WORKLOADS, parse_simple_report, pyenv_python

TRAIN = os.path.join(WORKLOADS, "train_lightning.py")
ARGS = ["--epochs", "2", "--batches", "16", "--val"]
FETCH_ACTIONS = ("train_dataloader_next", "val_next", "test_next", "predict_next")
COLD_CALL_S = 150e-6  # see check_against_simple


def lightning_report(run):
    files = glob.glob(str(run.tmp / "ref" / "*.txt"))
    assert len(files) == 1, files
    return open(files[0]).read()


def run_delay(run):
    """Seconds the target's main thread waited for a CPU during its fit(s)."""
    return sum(float(x) for x in re.findall(r"^RUN_DELAY fit=([\d.]+)$", run.target_out, re.M))


def check_against_simple(ours, theirs, py_minor, waited=0.0):
    """Same actions, same counts; totals within tolerance.

    Tolerance: our window for a generator action opens when Lightning's
    generator starts (just before SimpleProfiler.start reads the clock) and
    closes when it resumes (just before stop reads it), so ours exceeds
    Lightning's by the cost of start() itself: ~1 us per call plus probe
    jitter.  We allow 2% + 30 us per call, and once per row COLD_CALL_S for
    a call made cold: the fit's first actions (configure_callbacks, setup)
    run Lightning's profile()/start() for the first time, on a CPU that has
    just sat idle, and the target's own work before Lightning's clock read
    (generator, start() call, dict lookups) then takes 21-34 us with nothing
    attached, 58-70 us with our two probe hits run cold (measured: four
    actions 50 ms apart in one process); ours - theirs for
    configure_callbacks was 31-106 us in 14 fits on an idle machine (both
    layouts), past 30 us in at least 11 of them.  On CPython >= 3.11 the *_next
    fetch windows end at the next action (an estimate, see
    docs/design-actions.md): not below Lightning's (but for the thread's waits
    for a CPU, below), at most 300 us per call above.

    On a busy machine the thread is sometimes preempted inside those few
    microseconds between our probe and Lightning's clock read, which moves
    one call by a whole wait for a CPU (1.2 ms per call over one row's 42
    calls, measured beside two CPU hogs).  Such hits are rare events, so a
    few rows (at most max(2, 10 %)) may miss the tight bound, each by no
    more than the time the thread waited for a CPU in all (`waited`, from
    its schedstat: near 0 on an idle machine, where every row must hold).
    """
    assert set(ours) == set(theirs), (set(ours) ^ set(theirs))
    loose = []
    for name, cells in theirs.items():
        assert ours[name][1] == cells[1], (name, ours[name], cells)
        if name == "Total":
            continue
        calls = int(cells[1])
        a, b = float(ours[name][2]), float(cells[2])
        if name.endswith(FETCH_ACTIONS) and py_minor >= 11:
            # Ours begins at the fetch's next(), after Lightning's clock
            # read: a preemption between the two shortens ours by its wait
            # (CI 146, a loaded run: 2.86 ms against 5.09 ms over the fetches).
            assert b * 0.95 - waited <= a, (name, a, b, f"waited {waited:.6f} s")
            excess = a - (b + 300e-6 * calls)
        else:
            excess = abs(a - b) - (0.02 * b + 30e-6 * calls + COLD_CALL_S)
        if excess > 0:
            assert excess <= waited, (name, a, b, f"beyond the tight bound by {excess:.6f} s; waited {waited:.6f} s")
            loose.append((name, a, b))
    assert len(loose) <= max(2, len(theirs) // 10), (f"{len(loose)} rows off; waited {waited:.6f} s", loose)


@pytest.mark.parametrize("layout", ["exe", "lib"])
def test_matches_simple_profiler(attach, lightning_python, layout):
    python = lightning_python
    env = {}
    if layout == "lib":
        # Same site-packages, pyenv's 3.11 with the interpreter in libpython3.11.so
        python = pyenv_python(11)
        env = {"PYTHONPATH": SITE_PACKAGES[0]}
    run = attach([python, TRAIN, "--profiler", "simple", "--dirpath", "ref", "--filename", "perf"] + ARGS, env=env)
    assert run.target_rc == 0, run.target_out
    assert run.lt_rc == 0, run.lt_err
    theirs = parse_simple_report(lightning_report(run))
    ours = parse_simple_report(run.lt_out)
    assert len(theirs) > 30
    check_against_simple(ours, theirs, 11, run_delay(run))
    assert run.lt_out.startswith("FIT Profiler Report\n\n")
    assert "[_TrainingEpochLoop].train_dataloader_next" in ours
    assert "[_EvaluationLoop].val_next" in ours


def test_passthrough_counts_match_simple(attach, lightning_python):
    """Default Trainer (PassThroughProfiler): same actions and counts as the
    SimpleProfiler run of the same deterministic job."""
    simple = attach([lightning_python, TRAIN, "--profiler", "simple", "--dirpath", "ref", "--filename", "p"] + ARGS)
    passthrough = attach([lightning_python, TRAIN, "--profiler", "none"] + ARGS)
    assert passthrough.target_rc == 0 and passthrough.lt_rc == 0, passthrough.lt_err
    a = {k: v[1] for k, v in parse_simple_report(simple.lt_out).items()}
    b = {k: v[1] for k, v in parse_simple_report(passthrough.lt_out).items()}
    assert a == b
    assert int(b["Total"]) > 600


def test_fit_then_test_stage_and_files(attach, lightning_python):
    """fit then test on one Trainer: the title follows the last stage run,
    test fetches are named test_next, and --dirpath/--filename write
    Lightning's file name."""
    out_dir = "reports"
    run = attach([lightning_python, TRAIN, "--profiler", "none", "--test"] + ARGS,
                 lt_args=["--dirpath", out_dir, "--filename", "lt"])
    assert run.lt_rc == 0, run.lt_err
    path = run.tmp / out_dir / "test-lt.txt"
    text = path.read_text()
    assert text.startswith("TEST Profiler Report\n\n")
    rows = parse_simple_report(text)
    assert rows["[_EvaluationLoop].test_next"][1] == "4"
    assert rows["[_EvaluationLoop].val_next"][1] == "10"  # 2 sanity + 2 epochs x 4
    assert rows["[Strategy]SingleDeviceStrategy.test_step"][1] == "4"


def test_no_extended_layout(attach, lightning_python):
    run = attach([lightning_python, TRAIN, "--profiler", "none", "--epochs", "1", "--batches", "4"],
                 lt_args=["--no-extended"])
    assert run.lt_rc == 0
    header = run.lt_out.splitlines()[3]
    assert header.startswith("|  Action") and "Num calls" not in header and "Percentage" not in header


def test_attach_to_running_fit(tmp_path, lightning_python):
    """The headline use: the job is already training when we attach; we
    detach after --duration while it keeps going; the job is unaffected."""
    import subprocess
    from conftest import LTRACE, wait_for

    log = tmp_path / "job.log"
    stop = tmp_path / "stop"
    args = ["--epochs", "2", "--batches", "200"]
    with open(log, "w") as f:
        job = subprocess.Popen([lightning_python, TRAIN, "--profiler", "none", "--until-file", str(stop)] + args,
                               stdout=f, stderr=subprocess.STDOUT)
    try:
        # Mid-fit: after its first fit (not a fixed sleep, which a busy
        # machine can spend importing), which also measures its speed; attach
        # for long enough to see ~40 steps at that speed (1 s when idle).
        text = wait_for(str(log), "FIT_DONE", 600, job)
        steps_per_s = float(re.search(r"steps_per_s=([\d.]+)", text).group(1))
        duration = min(30.0, max(1.0, 40 / steps_per_s))
        assert job.poll() is None, "job finished before we could attach: make it longer"
        r = subprocess.run([LTRACE, "--pid", str(job.pid), "--duration", f"{duration:.2f}"], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        rows = parse_simple_report(r.stdout)
        assert r.stdout.startswith("FIT Profiler Report\n\n")
        assert int(rows["run_training_batch"][1]) > 10
        assert int(rows["[_TrainingEpochLoop].train_dataloader_next"][1]) > 10
        assert job.poll() is None
        stop.touch()
        assert job.wait(120) == 0
    finally:
        if job.poll() is None:
            job.kill()
    ref = subprocess.run([lightning_python, TRAIN, "--profiler", "none"] + args, capture_output=True, text=True,
                         timeout=120)
    sums = {l.split("weight_sum=")[1] for l in log.read_text().splitlines() if l.startswith("FIT_DONE")}
    ref_sums = {l.split("weight_sum=")[1] for l in ref.stdout.splitlines() if l.startswith("FIT_DONE")}
    assert sums == ref_sums


def test_manual_optimization_optimizer_step(attach, lightning_python):
    """Manual optimization: Lightning times `optimizer_step` with bare
    start()/stop() calls; ltrace-bpf infers it from the on_before_optimizer_step
    hooks that always run inside it.  Exact count; the duration is an
    estimate (stated on stderr), checked against what its window must cover.

    Our window opens at the first on_before_optimizer_step hook and closes at
    the next action event, the end of the Strategy's training_step that
    holds it; Lightning's opens before the optimizer's dispatch and closes
    after its update, inside that training_step too.  So both lie within
    the training_step's total and both hold the hooks' totals: ours is at
    least the hooks' time and at most the training_step's, and the two
    differ by at most the training_step's time outside the hooks."""
    run = attach([lightning_python, TRAIN, "--manual", "--profiler", "simple", "--dirpath", "ref", "--filename", "m",
                  "--epochs", "1", "--batches", "16"])
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    theirs = parse_simple_report(lightning_report(run))
    ours = parse_simple_report(run.lt_out)
    assert {k: v[1] for k, v in ours.items()} == {k: v[1] for k, v in theirs.items()}
    assert ours["optimizer_step"][1] == "16"
    a, b = float(ours["optimizer_step"][2]), float(theirs["optimizer_step"][2])
    def hooks(rows):
        return sum(float(v[2]) for k, v in rows.items() if k.endswith(".on_before_optimizer_step"))

    (step_name,) = [k for k in ours if k.startswith("[Strategy]") and k.endswith(".training_step")]
    assert 0 < hooks(ours) <= a <= float(ours[step_name][2]), (hooks(ours), a, ours[step_name])
    # Lightning's rows are its own clock reads, ours ours: take the wider of each.
    inside = min(hooks(ours), hooks(theirs))
    step = max(float(ours[step_name][2]), float(theirs[step_name][2]))
    assert abs(a - b) <= step - inside, (a, b, step, inside)
    assert "manual optimizer_step are estimates" in run.lt_err
