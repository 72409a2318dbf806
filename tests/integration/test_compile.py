"""torch.compile-aware op report (docs/design-compile.md): a compiled MLP
(inductor on CPU, compiled before we attach) under --report ops, against
torch.profiler on the same steps: compiled-region rows and inductor's fused
kernels with exact calls, the table's Self CPU total near the profiler's,
and a recompile forced while attached (a new input shape)."""
import glob
import json
import math
import os
import re
import subprocess

import pytest

from conftest import LTRACE, VENV_PY, WORKLOADS, findings_past_load, logged_run, wait_for
from ops_table import merged, parse_ops_report

COMPILED_MLP = os.path.join(WORKLOADS, "compiled_mlp.py")
ITERS = 200


@pytest.fixture(scope="module")
def inductor_cache(tmp_path_factory):
    """One inductor cache for the module, warmed by the reference run: the
    runs under test load the kernels without compiling them again (g++ on a
    busy machine takes a minute), and the generated modules are there to read."""
    cache = tmp_path_factory.mktemp("inductor")
    out = cache / "prof.json"
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache))
    r = subprocess.run([VENV_PY, COMPILED_MLP, "--profile", str(out), "--iters", str(ITERS)], capture_output=True,
                       text=True, timeout=600, cwd=cache, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return cache, json.loads(out.read_text()), r.stdout


def kernel_call_sites(cache):
    """cpp_fused_* -> calls per graph run, from the generated module's call()."""
    sites = {}
    for path in glob.glob(os.path.join(cache, "*", "*.py")):
        text = open(path).read()
        if "cpp_pybinding" not in text or "def call(" not in text:
            continue
        body = text[text.index("def call("):]
        for name in re.findall(r"^\s+(cpp_fused_\w+)\(", body, re.M):
            sites[name] = sites.get(name, 0) + 1
    return sites


def forward_line():
    """The line of MLP.forward's `def` in the workload (the line reports give)."""
    with open(COMPILED_MLP) as f:
        return next(i for i, line in enumerate(f, 1) if line.startswith("    def forward("))


def result_line(out):
    return next(line for line in out.splitlines() if line.startswith("RESULT"))


def seconds(out, what="SECONDS"):
    return float(next(line for line in out.splitlines() if line.startswith(what + " ")).split()[1])


def self_cpu_total_us(text):
    m = re.search(r"Self CPU time total~?: ([0-9.]+)(us|ms|s)", text)
    assert m, text[-1500:]
    return float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[m.group(2)]


def test_compiled_regions_and_kernels_match_torch_profiler(attach, inductor_cache):
    cache, prof, prof_out = inductor_cache
    theirs = prof["ops"]
    env = {"TORCHINDUCTOR_CACHE_DIR": str(cache)}
    run = attach([VENV_PY, COMPILED_MLP, "--iters", str(ITERS)],
                 lt_args=["--report", "ops", "--row-limit", "-1"], env=env)
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    assert result_line(run.target_out) == result_line(prof_out)  # same work, same outputs
    ours = merged(parse_ops_report(run.lt_out))
    # The compiled region: named and counted as torch.profiler does.
    region = "Torch-Compiled Region: 0/0"
    assert theirs[region]["count"] == ITERS
    assert ours.get(region, {}).get("calls") == theirs[region]["count"], (ours.get(region), run.lt_out[-3000:])
    # Inductor's kernels: each called once per call site per graph run (this
    # torch cannot profile CPU kernels itself: kernel profiling fails to
    # load; the graph runs are torch.profiler's `## Call CompiledFxGraph` count).
    graph_runs = sum(v["count"] for k, v in theirs.items() if k.startswith("## Call CompiledFxGraph"))
    assert graph_runs == ITERS
    sites = kernel_call_sites(str(cache))
    assert sites, "no generated module with cpp_fused kernels in the cache"
    for name, n in sites.items():
        assert ours.get(name, {}).get("calls") == n * graph_runs, (name, ours.get(name), run.lt_out[-3000:])
    # The aten ops inside the graph: exact as before.
    assert ours["aten::addmm"]["calls"] == theirs["aten::addmm"]["count"]
    # The table's Self CPU total accounts for the compiled work. Two runs'
    # absolute times differ by more than any fixed slack (0.29 s vs 0.35 s
    # for the same steps, idle machine), so compare within each run: our
    # total is sampled on-CPU time of the steps, so it is compared with the
    # CPU time the target measured over them (CPU_SECONDS, every thread):
    # at most that (+10 % and 5 ms for the sampler's edges) and at least
    # 40 % of it (the rest: the Python loop around the graph).  Wall time
    # is no reference: a busy machine stretched it past 2.5x (CI).
    ours_total = self_cpu_total_us(run.lt_out)
    steps_us = seconds(run.target_out, "CPU_SECONDS") * 1e6
    assert 0.4 * steps_us <= ours_total <= 1.1 * steps_us + 5000, (ours_total, steps_us, run.lt_out[-3000:])
    # Where the time went, as shares of each table's own total: inductor's
    # kernels (which torch.profiler cannot see into) hold what its
    # `## Call CompiledFxGraph` row keeps as self time, and aten::addmm the
    # same share in both.  Ours is a share of n samples: 4 binomial sigmas
    # of it, plus 5 points for what differs between the two runs (their wall
    # time against our CPU time, the profiler's own cost per call).  A fixed
    # 12 points failed CI at 13.5 on ~230 samples, where 4 sigmas alone
    # are ~9.
    their_total = self_cpu_total_us(prof["table"])
    kernel_share = sum(ours[n]["self_us"] for n in sites) / ours_total
    graph_share = sum(v["self_cpu_time_total"] for k, v in theirs.items()
                      if k.startswith("## Call CompiledFxGraph")) / their_total
    # (Kernels must have samples at all; an absolute floor on a sampled share
    # failed once in CI at 0.046 against torch's 0.084.)
    n = ours_total / 1001  # samples of 1.001 ms (999 Hz)

    def bound(p):
        return 4 * math.sqrt(max(p * (1 - p), 0.01) / n) + 0.05

    assert abs(kernel_share - graph_share) <= bound(graph_share), (kernel_share, graph_share, n, run.lt_out[-3000:])
    # Kernels must have samples at all, where that is near certain: with
    # half torch's share expected (ours has been as low as 0.046 against its
    # 0.084), P(none) = e^-expected.  CI once took 93 samples (a busy
    # machine: 93 ms of CPU), expecting ~4: none was a 1-in-70 draw.
    expected = n * graph_share / 2
    if expected >= 9:  # P(none) <= 1.2e-4
        assert kernel_share > 0, (graph_share, n, run.lt_out[-3000:])
    addmm_share = ours["aten::addmm"]["self_us"] / ours_total
    their_addmm_share = theirs["aten::addmm"]["self_cpu_time_total"] / their_total
    assert abs(addmm_share - their_addmm_share) <= bound(their_addmm_share), (
        addmm_share, their_addmm_share, n, run.lt_out[-3000:])
    print(f"shares on {n:.0f} samples: kernels {kernel_share:.3f} / {graph_share:.3f}, "
          f"addmm {addmm_share:.3f} / {their_addmm_share:.3f}; bound {bound(their_addmm_share):.3f}")
    assert "Recompilations seen while attached: 0" in run.lt_out


def test_recompile_while_attached_is_reported(attach, inductor_cache):
    cache, _, _ = inductor_cache
    env = {"TORCHINDUCTOR_CACHE_DIR": str(cache)}
    args = ["--iters", "20", "--recompile", "20", "--linger", "1"]
    base = subprocess.run([VENV_PY, COMPILED_MLP] + args, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, **env))
    assert base.returncode == 0, base.stderr[-2000:]
    run = attach([VENV_PY, COMPILED_MLP] + args, lt_args=["--report", "ops", "--row-limit", "-1"], env=env)
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    assert result_line(run.target_out) == result_line(base.stdout)
    out = run.lt_out
    assert "Recompilations seen while attached: 1" in out, out[-3000:]
    # when, which function (the user's, by file:line), which graphs, and the
    # guard that failed, as Dynamo recorded it in the target (read from outside)
    assert re.search((r"\+[0-9.]+ s  frame 0 \(MLP\.forward \(\S*compiled_mlp\.py:%d\)\) recompiled: "
                      r"graph 0/1 first ran after graph 0/0\n"
                      r"    reason \(Dynamo's recompile_reason\): 0/0: tensor 'x' size mismatch at index 0\. "
                      r"expected 64, actual 48\n    the compile took [0-9.]+ s\n") % forward_line(), out), out[-3000:]
    # Dynamo's own list: 0/0 compiled before the attach (a negative start), 0/1 after.
    assert re.search(r"  0/0 +-[0-9.]+ s +[0-9.]+ s +\S+  forward \(\S*compiled_mlp\.py:%d\)\n +first compile of this"
                     % forward_line(), out), out[-3000:]
    assert re.search(r"  0/1 +\+[0-9.]+ s +[0-9.]+ s +\S+  forward \(\S*compiled_mlp\.py:%d\)\n +recompiled: 0/0: "
                     r"tensor 'x' size mismatch" % forward_line(), out), out[-3000:]
    ours = merged(parse_ops_report(out))
    assert ours["Torch-Compiled Region: 0/0"]["calls"] == 20
    assert ours["Torch-Compiled Region: 0/1"]["calls"] == 20


def test_run_of_a_job_that_compiles_later_goes_back_to_the_probes(inductor_cache, tmp_path):
    """`run` switches to the op observer once torch loaded, before the job
    compiles; when its first compiled region runs, the op probes take over
    again (inductor's kernels are no RecordFunction calls): each region
    call is counted once (the observer's or the probes')."""
    cache, _, _ = inductor_cache
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache))
    # The job compiles only once the observer took over (its start file).
    start = tmp_path / "start"
    with logged_run([LTRACE, "run", "-v", "--no-gpu", "--report", "ops", "--row-limit", "-1", "--", VENV_PY,
                     COMPILED_MLP, "--iters", "20", "--recompile", "20", "--start-file", str(start)],
                    tmp_path, cwd=tmp_path, env=env) as (p, out, err):
        wait_for(str(err), "the op observer measures every call from here on", 300, p)
        start.touch()
        p.wait(timeout=600)
    r = subprocess.CompletedProcess(p.args, p.returncode, out.read_text(), err.read_text())
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ops: torch.compile began: back to the op probes" in r.stderr, r.stderr[-3000:]
    ours = merged(parse_ops_report(r.stdout))
    # run sees the whole job: its 2 warm-up calls of graph 0/0 too.
    assert ours["Torch-Compiled Region: 0/0"]["calls"] == 22, r.stdout[-3000:]
    assert ours["Torch-Compiled Region: 0/1"]["calls"] == 20, r.stdout[-3000:]
    # Not asserted, since they depend on how soon the hand-over and the
    # 200 ms kernel scan come against the job's few ms of calls per graph
    # (docs/design-op-observer.md): the fused kernels' rows and the compile
    # section's regions and Dynamo record (CI 65 had no kernel rows, a busy
    # local run no compile section; quiet local runs had both).


COMPILED_FIT = os.path.join(WORKLOADS, "compiled_fit.py")


def dynamo_lines(out):
    """The target's own account: compile id -> first recompile reason (or "")."""
    ids = {}
    for line in out.splitlines():
        if line.startswith("DYNAMO\t"):
            _, cid, reason = line.split("\t", 2)
            ids.setdefault(cid, reason)
            if reason:
                ids[cid] = reason
    return ids


def test_compiled_lightning_fit_regions_and_recompiles_per_action(attach, tmp_path):
    """A real Lightning fit of a compiled network, attached after its first
    graph was compiled: the region rows' calls equal torch.profiler's in a
    reference run of the same fit; the two recompiles the fit makes while
    attached (validation's no_grad fails the grad-mode guard; the epoch's
    smaller last batch fails the shape guard) are each reported with the
    reason Dynamo recorded in the process (its own DYNAMO lines), charged to
    the Lightning action that ran them; the fused kernels have rows."""
    cache = tmp_path / "inductor"
    env = {"TORCHINDUCTOR_CACHE_DIR": str(cache)}
    prof = tmp_path / "prof.json"
    ref = subprocess.run([VENV_PY, COMPILED_FIT, "--profile", str(prof)], capture_output=True, text=True,
                         timeout=900, env=dict(os.environ, **env), cwd=tmp_path)
    assert ref.returncode == 0, ref.stdout[-2000:] + ref.stderr[-2000:]
    regions = {k: v for k, v in json.loads(prof.read_text()).items() if k.startswith("Torch-Compiled Region")}
    run = attach([VENV_PY, COMPILED_FIT, "--linger", "1"], lt_args=["--report", "ops,verdict", "--row-limit", "-1"],
                 env=env)
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    assert result_line(run.target_out) == result_line(ref.stdout)
    out = run.lt_out
    ours = merged(parse_ops_report(out))
    assert regions and {k: ours.get(k, {}).get("calls") for k in regions} == regions, (regions, out[-4000:])
    assert any(k.startswith("cpp_fused_") and v["calls"] > 0 for k, v in ours.items()), out[-4000:]
    dyn = dynamo_lines(run.target_out)
    recompiled = sorted(cid for cid in dyn if cid != "0/0")
    assert len(recompiled) == 2, dyn
    assert "Recompilations seen while attached: 2" in out, out[-4000:]
    for cid in recompiled:
        m = re.search(r"recompiled in (\S+): graph %s first ran after graph 0/\d\n"
                      r"    reason \(Dynamo's recompile_reason\): (.*)\n" % re.escape(cid), out)
        assert m, (cid, out[-4000:])
        assert m.group(2).strip() == dyn[cid].strip(), (m.group(2), dyn[cid])
        # grad mode changed in validation; the smaller batch came in training
        want = "validation_step" if "grad_mode" in dyn[cid] else "training_step"
        assert m.group(1).endswith(want), (m.group(1), dyn[cid])
    assert re.search(r"Recompilations per Lightning action: .*training_step 1;.*validation_step 1\n", out), \
        out[-4000:]
    # The verdict: the two recompiles (one in a train step, one in a
    # validation step) are the first finding, at their durations (Dynamo's,
    # as the job printed them) per train step; not also validation's.
    us = {cid: int(v) for cid, v in re.findall(r"^DYNAMO_US\t(\S+)\t(\d+)$", run.target_out, re.M)}
    ranked = findings_past_load(out)
    assert ranked and ranked[0][1] == "recompiles", out[:3000]
    m = re.search(rf"^  {ranked[0][0]}\. recompiles \(pid \d+\): ([0-9.]+) ms per train step at stake\n"
                  r"     2 recompile\(s\) inside the train and validation steps took", out, re.M)
    assert m, out[:3000]
    train_steps = 2 * (10 + 1)  # two epochs of 10 full batches and a half one
    want = sum(us[cid] for cid in recompiled) / 1e3 / train_steps
    assert abs(float(m.group(1)) - want) <= 0.01 * want + 0.01, (m.group(1), us, out[:3000])


def test_fused_kernels_are_named_leaves_of_sampled_stacks(attach, inductor_cache, tmp_path):
    """Flame graphs / Advanced stacks of a compiled model: a sample in one of
    inductor's kernel libraries ends in the kernel's name (cpp_fused_*, as
    the op table names it), under the user's forward, not in the library's
    anonymous `kernel` symbol."""
    cache, _, _ = inductor_cache
    out = tmp_path / "stacks.txt"
    run = attach([VENV_PY, COMPILED_MLP, "--iters", "4000"], lt_args=["--rate", "999", "--collapsed", str(out)],
                 env={"TORCHINDUCTOR_CACHE_DIR": str(cache)})
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    sites = kernel_call_sites(str(cache))
    in_graph = kernel = 0
    for line in out.read_text(encoding="utf-8").splitlines():
        stack, n = line.rsplit(" ", 1)
        frames = stack.split(";")
        leaf = frames[-1]
        assert not (leaf.startswith("kernel (") and ".main.so)" in leaf), line
        if not any(f.startswith("MLP.forward (") and "compiled_mlp.py:" in f for f in frames):
            continue
        in_graph += int(n)
        if leaf.split(" (")[0] in sites:
            kernel += int(n)
    # The kernels' own code (not the libm calls they make, which are leaves
    # of their own) held about 4% of the compiled steps' samples on an idle
    # machine, 0.95% once on a loaded CI machine (4 of 422).  Samples come
    # per ms of the thread's CPU time, so their number is set by the
    # iterations, not by load: with >= 1,000 in the graph, a share of even
    # 0.95% gives ~9.5 kernel samples, and none at all has a chance below
    # 1e-4 (Poisson): a miss is a defect, not luck.
    assert in_graph >= 1000, f"only {in_graph} samples in the compiled graph: too few to judge"
    assert kernel > 0, (kernel, in_graph)


def test_graph_break_resume_shows_the_users_function(attach, inductor_cache, tmp_path):
    """A graph break inside forward: Dynamo runs the rest as a resume
    function (`torch_dynamo_resume_in_forward_at_N`), a frame of its own with
    its own compiled region. The region rows count both graphs per step; the
    compile section and the sampled stacks show the resume function as the
    user's `MLP.forward [after graph break]`, on the user's file."""
    cache, _, _ = inductor_cache
    env = {"TORCHINDUCTOR_CACHE_DIR": str(cache)}
    iters = 400
    base = subprocess.run([VENV_PY, COMPILED_MLP, "--graph-break", "--iters", str(iters)], capture_output=True,
                          text=True, timeout=600, env=dict(os.environ, **env))
    assert base.returncode == 0, base.stderr[-2000:]
    out = tmp_path / "stacks.txt"
    run = attach([VENV_PY, COMPILED_MLP, "--graph-break", "--iters", str(iters)],
                 lt_args=["--report", "ops", "--row-limit", "-1", "--rate", "999", "--collapsed", str(out)], env=env)
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    assert result_line(run.target_out) == result_line(base.stdout)
    ours = merged(parse_ops_report(run.lt_out))
    assert ours["Torch-Compiled Region: 0/0"]["calls"] == iters, run.lt_out[-3000:]
    assert ours["Torch-Compiled Region: 1/0"]["calls"] == iters, run.lt_out[-3000:]
    assert re.search(r"Torch-Compiled Region: 1/0 +%d .*MLP\.forward \[after graph break\] \(\S*compiled_mlp\.py:\d+\)"
                     % iters, run.lt_out), run.lt_out[-3000:]
    assert re.search(r"Graph breaks seen \(a frame resuming a function after a break\): 1\n"
                     r"  frame 1: MLP\.forward \[after graph break\] \(\S*compiled_mlp\.py:\d+\)", run.lt_out), \
        run.lt_out[-3000:]
    # the break's reason, as Dynamo counted it in the target
    assert re.search(r"Graph breaks Dynamo met \(.*\): 1\n +[1-9]\d*  Call to `torch\._dynamo\.graph_break\(\)` -- ",
                     run.lt_out), run.lt_out[-3000:]
    text = out.read_text(encoding="utf-8")
    assert "torch_dynamo_resume_in_" not in text
    resumed = sum(int(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                  if re.search(r";MLP\.forward \[after graph break\] \(\S*compiled_mlp\.py:\d+\)", line))
    assert resumed > 0, text[-3000:]


GRAPH_BREAK_FIT = os.path.join(WORKLOADS, "graph_break_fit.py")


def test_a_graph_break_is_its_own_finding_at_its_eager_time(attach):
    """A compiled forward that breaks its graph to run ~5 ms of Python on
    the host each step (a torch.compiler.disable'd call), then 8 layers in
    its second graph (about as long): the verdict's first finding is
    graph_breaks, at the CPU time the job measured in that call per train
    step (not its graphs' time: counted, it would be over the bound), at
    the line of the call, with Dynamo's reason. The same fit without the
    break has no such finding. Backend "eager": no inductor build."""
    run = attach([VENV_PY, GRAPH_BREAK_FIT], lt_args=["--report", "ops,verdict"])
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    result = json.loads(run.target_out.split("RESULT ", 1)[1].splitlines()[0])
    assert result["graph_breaks"] >= 1, result
    ranked = findings_past_load(run.lt_out)
    assert ranked and ranked[0][1] == "graph_breaks", run.lt_out[:3000]
    m = re.search(rf"^  {ranked[0][0]}\. graph_breaks \(pid \d+\): ([0-9.]+) ms per train step at stake\n"
                  r"     Python ran eagerly between the compiled graphs for an estimated ([0-9.]+) ms .*; (\d+) stack "
                  r"samples inside the compiled functions and outside their graphs\), most at Net\.forward "
                  r"\(\S*graph_break_fit\.py:(\d+)\) .*Dynamo met \d+ graph break\(s\): Skip calling", run.lt_out, re.M)
    assert m, run.lt_out[:3000]
    src = open(GRAPH_BREAK_FIT).read().splitlines()
    assert "host_work(h)" in src[int(m.group(4)) - 1], (m.group(4), run.lt_out[:3000])
    # Samples at 999 Hz (the op report's rate): 3 standard deviations of
    # the count and of the per-step boundaries' rounding.
    period_ms, measured_ms = 1000 / 999, result["host_cpu_s"] * 1e3
    slack = period_ms * (3 * math.sqrt(measured_ms / period_ms) + 3 * math.sqrt(result["train_steps"]))
    assert abs(float(m.group(2)) - measured_ms) <= slack, (m.group(2), measured_ms, slack, run.lt_out[:3000])
    assert abs(float(m.group(1)) - measured_ms / result["train_steps"]) <= slack / result["train_steps"] + 0.01
    healthy = attach([VENV_PY, GRAPH_BREAK_FIT, "--no-break"], lt_args=["--report", "ops,verdict"])
    assert healthy.target_rc == 0 and healthy.lt_rc == 0, healthy.lt_err
    assert '"graph_breaks": 0' in healthy.target_out, healthy.target_out
    assert "graph_breaks (pid" not in healthy.lt_out, healthy.lt_out[:3000]
