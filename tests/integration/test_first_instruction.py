"""`run` and `--all` see a job from its first instruction (issue 32): every
exec of a CPython under `run` (and, with --all, anywhere) is held until its
probes are in, so a job whose 20
Lightning actions all happen in its first milliseconds
(tests/workloads/early_actions.py) is counted 20 of 20, every time: both
layouts (the interpreter in the executable, in libpython3.X.so), CPython
3.8-3.13 and the sid container's 3.13-3.15, through a shell, `env` in a
shebang, `exec`, `python -m`, and torchrun's ranks.  One `run` per test
starts each variant 10 times, so each process is a separate exec to hold
and the attach is paid once.

Not a CPython (bash, env, sh, unshare) is never held: the -v lines name
exactly the CPython execs."""
import os
import re
import signal
import subprocess
import time

import pytest

import containers
import lightning_site
from conftest import LTRACE, UNIT_TESTS, VENV_PY, WORKLOADS, logged_run, parse_simple_report, pyenv_python, wait_for

EARLY = os.path.join(WORKLOADS, "early_actions.py")
RUNS = 10


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    base = tmp_path_factory.mktemp("sites")
    # 2.6.x no longer runs on 3.8; 2.3.3 is the last release that does.
    return {"2.3.3": lightning_site.build(str(base / "pl233"), "2.3.3"),
            "2.6.6": lightning_site.build(str(base / "pl266"), "2.6.6")}


def run_lt(argv, tmp_path, env=None, timeout=600):
    r = subprocess.run([LTRACE, "run", "-v", "--report", "simple", "--"] + argv, capture_output=True, text=True,
                       env=dict(os.environ, **(env or {})), cwd=tmp_path, timeout=timeout)
    (tmp_path / "lt.out").write_text(r.stdout)
    (tmp_path / "lt.err").write_text(r.stderr)
    return r


def summed_calls(text):
    """{action: calls} over the report of every process ("==> pid N ...: COMMAND <==" sections)."""
    calls = {}
    for section in re.split(r"^==> .* <==$", text, flags=re.M):
        for name, cells in parse_simple_report(section).items():
            if name != "Total":
                calls[name] = calls.get(name, 0) + int(cells[1])
    return calls


def check_counts(r, variants, runs):
    """Every action of every variant counted once per run; every CPython
    held (and nothing else)."""
    assert r.returncode == 0, r.stderr[-3000:]
    rows = summed_calls(r.stdout)
    wrong = {}
    for v in variants:
        for i in range(20):
            name = f"{v}_{i:02d}"
            calls = rows.get(name, 0)
            if calls != runs:
                wrong[name] = calls
    assert not wrong, (wrong, r.stderr[-3000:])
    done = [line for line in r.stdout.splitlines() if line.startswith("EARLY_DONE")]
    assert len(done) == runs * len(variants), r.stdout[-2000:]
    held = re.findall(r"pid (\d+): exec'd a CPython; held until its probes are in", r.stderr)
    released = re.findall(r"pid (\d+): probes in; released after ([0-9.]+) ms held", r.stderr)
    # What the tracer said of the processes it did not hold (the whole
    # stderr is too long for an assertion message; EARLY_DONE's pids are a
    # container's own).
    not_held = [line for line in r.stderr.splitlines() if "not held" in line]
    assert len(held) == len(done) and len(released) == len(done), (len(held), len(released), len(done),
                                                                   not_held[:8])
    return [float(ms) for _, ms in released]


def test_run_holds_every_cpython_exec(tmp_path, sites):
    """Host interpreters, both layouts, every version, each way in, 10 times
    each, in one `run` of a shell loop."""
    py311 = "/usr/bin/python3.11"  # Debian's: the interpreter in the executable
    shebang = tmp_path / "job"
    shebang.write_text("#!/usr/bin/env python3.11\n"
                       f"import runpy\nrunpy.run_path({EARLY!r}, run_name='__main__')\n")
    shebang.chmod(0o755)
    site = sites["2.6.6"]
    lines = []
    variants = []

    def add(name, command, pythonpath=site):
        variants.append(name)
        lines.append(f"for i in $(seq {RUNS}); do EARLY_PREFIX={name} PYTHONPATH={pythonpath} {command}; done")

    add("exe311", f"{py311} {EARLY}")
    for minor in (8, 9, 10, 11, 12, 13):
        python = pyenv_python(minor)
        assert python, f"pyenv CPython 3.{minor} missing"
        add(f"lib3{minor}", f"{python} {EARLY}", sites["2.3.3"] if minor == 8 else site)
    add("shebang", str(shebang))
    add("shexec", f"sh -c 'exec {py311} {EARLY}'")
    add("module", f"{py311} -m early_actions", f"{site}:{WORKLOADS}")
    r = run_lt(["bash", "-c", "\n".join(lines)], tmp_path)
    held_ms = check_counts(r, variants, RUNS)
    print(f"held: {len(held_ms)} execs, median {sorted(held_ms)[len(held_ms) // 2]:.1f} ms, max {max(held_ms):.1f} ms")


@pytest.mark.parametrize("python", ["/usr/bin/python3.11", "pyenv-3.11"])
def test_run_of_a_cpython_itself(tmp_path, sites, python):
    """`run`'s own child execs the CPython: held like any other."""
    if python.startswith("pyenv"):
        python = pyenv_python(11)
    r = run_lt([python, EARLY], tmp_path, env={"PYTHONPATH": sites["2.6.6"], "EARLY_PREFIX": "direct"})
    check_counts(r, ["direct"], 1)
    # Its own command before the exec is no launcher to note.
    assert "is not a CPython process" not in r.stderr, r.stderr


def test_torchrun_ranks(tmp_path):
    """torchrun (itself a CPython, held) starts 2 ranks by fork and exec:
    each held, each counted from its first action."""
    torchrun = os.path.join(os.path.dirname(VENV_PY), "torchrun")
    # The venv's own Lightning (the test site's stand-ins would shadow what torch imports).
    r = run_lt([VENV_PY, torchrun, "--standalone", "--nproc-per-node", "2", EARLY], tmp_path,
               env={"EARLY_PREFIX": "rank"})
    assert r.returncode == 0, r.stderr[-3000:]
    rows = summed_calls(r.stdout)
    wrong = {f"rank_{i:02d}": rows.get(f"rank_{i:02d}") for i in range(20) if rows.get(f"rank_{i:02d}") != 2}
    assert not wrong, (wrong, r.stderr[-3000:])
    held = re.findall(r"pid (\d+): exec'd a CPython; held until its probes are in", r.stderr)
    assert len(held) >= 3, r.stderr[-3000:]  # torchrun and its 2 ranks (torch may start helpers too)


def test_sid_container_interpreters(tmp_path):
    """CPython 3.13-3.15 of a Debian sid container (own pid and mount
    namespaces, pivot_root), both layouts: `run` of the container's start."""
    root = containers.root_path("sid")
    box = containers.Box(root)
    try:
        early = box.put(EARLY)
        lightning_site.build(box.host(box.inside + "/site"), "2.6.6")
        lines, variants = [], []
        for v in ("3.13", "3.14", "3.15"):
            for layout, python in (("exe", f"/usr/bin/python{v}"), ("lib", f"/usr/local/bin/python{v}-shared")):
                name = f"sid{v.replace('.', '')}{layout}"
                variants.append(name)
                lines.append(f"for i in $(seq {RUNS}); do EARLY_PREFIX={name} PYTHONPATH={box.inside}/site "
                             f"{python} {early}; done")
        argv = box.argv(["/bin/sh", "-c", "\n".join(lines)])
        r = run_lt(argv, tmp_path)
        check_counts(r, variants, RUNS)
    finally:
        box.stop()


def sweep_hold(tmp_path, python, library=None):
    """Runs the hold, SIGKILLing the holder at its step 1, then 2, ... until
    one run completes; each killed run's child must finish by itself.  With
    a library, the steps counted are those of the hold at its load alone.
    Returns the step at which the hold completed."""
    step = 0
    while True:
        step += 1
        assert step < 2000, "the hold never completed"
        marker = tmp_path / f"ran{library or ''}{step}"
        env = dict(os.environ, LT_EXEC_HOLD_PYTHON=python, LT_EXEC_HOLD_MARKER=str(marker))
        if library:
            env.update(LT_EXEC_HOLD_LIBRARY=library, LT_EXEC_HOLD_DIE_AT_LIB_STEP=str(step))
        else:
            env.update(LT_EXEC_HOLD_DIE_AT_STEP=str(step))
        r = subprocess.run([UNIT_TESTS, "--gtest_filter=ExecHoldCli.FromEnvironment"], env=env, capture_output=True,
                           text=True, timeout=120)
        child = re.search(r"EXEC_HOLD_CHILD (\d+)", r.stdout)
        assert child, (step, r.returncode, r.stdout[-2000:])
        if "EXEC_HOLD_RESULT released" in r.stdout:
            assert r.returncode == 0, r.stdout[-2000:]
            return step
        assert r.returncode == -9, (step, r.returncode, r.stdout[-2000:])
        # Orphaned, the child belongs to init now: it must finish by itself.
        pid = int(child.group(1))
        wait_for_condition(lambda: marker.exists(), f"step {step}: the child never ran Python (pid {pid}, "
                                                     f"state {state_of(pid)})", 30)


def test_tracer_killed_at_each_step_of_a_hold(tmp_path):
    """The holder SIGKILLed at every step of an exec hold (the seize, each
    stop on the way to libpython, each resume, the release): the CPython
    always runs on and finishes, never left stopped (the kernel detaches a
    dead tracer's tracees; we never set PTRACE_O_EXITKILL).  Then the same
    for the hold that goes on, seized, until a library loads (ctypes loads
    libzstd): killed at each of its steps (letting it run seized, each load
    stop with our SIGURG pending, each resume, the release), the child
    finishes too -- a SIGURG left pending is ignored."""
    python = pyenv_python(11)  # the libpython layout: the longest hold
    completed = sweep_hold(tmp_path, python)
    assert completed > 60, completed  # the sweep went through the whole hold (the loader's ~60 system calls)
    print(f"hold completed at step {completed}; killed at each of steps 1-{completed - 1}")
    at_load = sweep_hold(tmp_path, python, "libzstd.so.1")
    # Letting it run, one stop and resume per load before libzstd's (ctypes'
    # own), the stop at libzstd's, the release.
    assert at_load > 4, at_load
    print(f"hold at the library load completed at its step {at_load}; killed at each of steps 1-{at_load - 1}")


def state_of(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def wait_for_condition(cond, what, timeout):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


# --all adopts every torch process on the machine, other workers' jobs too
# (CI: it put the GPU bridge into test_bridge_reach's job): the serial pass.
@pytest.mark.serial
def test_all_holds_a_cpython_started_later(tmp_path, sites):
    """--all (no target at first): a CPython started after the attach is
    held at its exec and adopted provisionally, so a job whose actions all
    come in its first milliseconds is counted 20 of 20 (both layouts, 3
    runs each); a CPython that never shows torch or Lightning leaves no
    trace."""
    err_path = tmp_path / "lt.err"
    with open(tmp_path / "lt.out", "w") as out, open(err_path, "w") as err:
        lt = subprocess.Popen([LTRACE, "--all", "-v", "--report", "simple"], stdout=out, stderr=err, cwd=tmp_path)
    try:
        wait_for_condition(lambda: "attached:" in err_path.read_text(), "ltrace-bpf --all never attached", 120)
        env = dict(os.environ, PYTHONPATH=sites["2.6.6"])
        jobs, plain = [], []
        for name, python in (("allexe", "/usr/bin/python3.11"), ("alllib", pyenv_python(11))):
            for _ in range(3):
                r = subprocess.run([python, EARLY], env=dict(env, EARLY_PREFIX=name), capture_output=True, text=True,
                                   timeout=120)
                assert r.returncode == 0, r.stderr
                jobs.append(int(r.stdout.split()[-1]))
        r = subprocess.run(["/usr/bin/python3.11", "-c", "import os; print(os.getpid())"], capture_output=True,
                           text=True, timeout=60)
        plain.append(int(r.stdout.strip()))
    finally:
        lt.send_signal(signal.SIGINT)
        lt.wait(120)
    out, err = (tmp_path / "lt.out").read_text(), err_path.read_text()
    assert lt.returncode == 0, err[-3000:]
    sections = {int(m.group(1)): m.start() for m in re.finditer(r"^==> pid (\d+)\b.* <==$", out, flags=re.M)}
    for pid in jobs:
        assert pid in sections, (pid, out[-2000:])
        held = re.search(rf"pid {pid}: exec'd a CPython; held until its probes are in", err)
        assert held, err[-3000:]
    # Only our jobs' actions are counted here (other tests' processes may be adopted too).
    calls = {}
    for pid in jobs:
        start = out.index("\n", sections[pid])
        following = [s for s in sections.values() if s > sections[pid]]
        text = out[start:min(following) if following else len(out)]
        for name, cells in parse_simple_report(text).items():
            if name != "Total":
                calls[name] = calls.get(name, 0) + int(cells[1])
    for name in ("allexe", "alllib"):
        wrong = {f"{name}_{i:02d}": calls.get(f"{name}_{i:02d}") for i in range(20)
                 if calls.get(f"{name}_{i:02d}") != 3}
        assert not wrong, (wrong, err[-3000:])
    assert not any(pid in sections for pid in plain), out[-2000:]
    # (A note about another test's process, "pid N (...): not profiled: ...", is not about ours.)
    assert not any(re.search(rf"pid {pid}\b[^\n]*not profiled", err) for pid in plain), err[-3000:]


def test_run_holds_srun_tasks(tmp_path, sites):
    """`run -- srun ...` on a real Slurm: the tasks are started by slurmd,
    not by srun, so they are none of run's descendants; they carry run's
    mark in their environment (srun passes it on), and each CPython task is
    held at its exec and counted from its first action (2 tasks, 20 of 20)."""
    from slurm_sim import SlurmSim
    sim = SlurmSim(tmp_path / "slurm", nodes=("node1",), cpus_per_node=2, subnet_index=31)
    sim.start()
    try:
        env = dict(sim.env, PYTHONPATH=sites["2.6.6"], EARLY_PREFIX="task")
        r = run_lt(["srun", "-N1", "-n2", "/usr/bin/python3.11", EARLY], tmp_path, env=env, timeout=300)
    finally:
        sim.stop()
    assert r.returncode == 0, r.stderr[-3000:]
    calls = summed_calls(r.stdout)
    wrong = {f"task_{i:02d}": calls.get(f"task_{i:02d}") for i in range(20) if calls.get(f"task_{i:02d}") != 2}
    assert not wrong, (wrong, r.stdout[-2000:], r.stderr[-3000:])
    held = re.findall(r"pid (\d+): exec'd a CPython; held until its probes are in", r.stderr)
    assert len(held) == 2, r.stderr[-3000:]


def test_run_counts_the_first_ops_after_import_torch(tmp_path):
    """`run --report ops,memory` of a script whose only ops come right after
    `import torch`: each counted exactly once, with its allocation.  The
    retry poll for libraries is set to 10 minutes, so only the hold at the
    library load can have put the op and allocator probes in: the CPython
    runs on, seized, and stops at each dlopen until libtorch_cpu and libc10
    are mapped (user/sources/libload.h).  With the hold off, none of the
    three ops would be counted (measured: `no aten op calls`)."""
    env = dict(os.environ, LTRACE_BPF_PENDING_ATTACH_MS="600000")
    r = subprocess.run([LTRACE, "run", "-v", "--report", "ops,memory", "--row-limit", "-1", "--", VENV_PY,
                        os.path.join(WORKLOADS, "early_ops.py")], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "OPS_DONE 12.0" in r.stdout, r.stdout[-2000:]
    calls, mem = {}, {}
    for line in r.stdout.splitlines():
        cells = line.split()
        if cells and cells[0] in ("aten::ones", "aten::add", "aten::mul"):
            calls[cells[0]] = int(cells[-1])
            mem[cells[0]] = " ".join(cells[-5:-3])  # CPU Mem: what its calls allocated
    assert calls == {"aten::ones": 1, "aten::add": 1, "aten::mul": 1}, (calls, r.stdout[-3000:])
    # float32[3]: 12 bytes each, seen by the allocator probes.
    assert mem == {"aten::ones": "12 B", "aten::add": "12 B", "aten::mul": "12 B"}, (mem, r.stdout[-3000:])
    stops = re.search(r"done awaiting its libraries after [\d.]+ ms: stopped at (\d+) library loads, ([\d.]+) ms",
                      r.stderr)
    assert stops and int(stops.group(1)) >= 1, r.stderr[-3000:]
    print(f"held at {stops.group(1)} library loads, {stops.group(2)} ms in all")


def test_run_switches_from_the_op_probes_to_the_observer(tmp_path):
    """`run --report ops` of a CPython that imports torch after we attached:
    the op probes count from the load, the op observer takes over once the
    load is over.  Each call is counted once, by the side that saw it begin:
    the ops right after the import are the probes' (their times sampled,
    and said), the two after the switch the observer's, and of the negs
    that run every 0.5 ms through the switch none is lost or counted twice
    (the observer's calls that began before the switch are the probes').  The switch comes
    within a second of the load, before most jobs run an op; its gate file
    (LTRACE_BPF_LATE_OBSERVER_GATE) holds it back until the first ops ran."""
    gate, go = tmp_path / "gate", tmp_path / "go"
    with logged_run([LTRACE, "run", "-v", "--no-gpu", "--report", "ops", "--row-limit", "-1", "--", VENV_PY,
                     os.path.join(WORKLOADS, "early_ops.py"), "--then-wait-file", str(go)],
                    tmp_path, cwd=tmp_path, env=dict(os.environ, LTRACE_BPF_LATE_OBSERVER_GATE=str(gate))) as (p, out, err):
        wait_for(str(out), "OPS_DONE", 120, p)
        gate.touch()
        try:
            wait_for(str(err), "the op observer measures every call from here on", 120, p)
        except AssertionError as e:
            # What the tracer said instead, its notes at the end too (CI 109
            # and a landing CI: nothing in 120 s, and no op probes' line).
            go.touch()
            try:
                p.wait(timeout=120)
            except subprocess.TimeoutExpired:
                pass
            raise AssertionError(f"{e}\n--- ltrace-bpf stderr:\n{err.read_text()[-6000:]}") from None
        go.touch()
        p.wait(timeout=120)
    stdout, stderr = out.read_text(), err.read_text()
    assert p.returncode == 0, stderr[-3000:]
    assert "OPS_DONE 12.0" in stdout and "MORE_DONE 1.5" in stdout, stdout[-2000:]
    calls = {}
    for line in stdout.splitlines():
        cells = line.split()
        if cells and cells[0] in ("aten::ones", "aten::add", "aten::mul", "aten::neg", "aten::sub", "aten::div"):
            calls[cells[0]] = calls.get(cells[0], 0) + int(cells[-1])
    negs = int(re.search(r"LOOP_NEGS (\d+)", stdout).group(1))
    assert negs > 0
    # One neg at most may fall in the switch's own microsecond (the probe's
    # hit and torch's RecordFunction start straddling it: counted by
    # neither); without the hidden rule 3 or 4 were counted twice here.
    assert abs(calls.pop("aten::neg", 0) - negs) <= 1, (negs, stdout[-3000:])
    assert calls == {"aten::ones": 1, "aten::add": 1, "aten::mul": 1, "aten::sub": 1, "aten::div": 1}, (
        calls, stdout[-3000:])
    # One table over the whole run (no step function), part probes: its
    # times are marked as estimates, and stderr says how many calls were
    # the probes' (ones, its fill_, add, mul, sum, item...: those before the
    # gate; sub and div are not among them).
    assert "Self CPU~" in stdout, stdout[-3000:]
    m = re.search(r"(\d+) op call\(s\) counted by the op probes, not the op observer", stderr)
    assert m and int(m.group(1)) >= 4, stderr[-3000:]


def test_a_cpython_awaiting_its_libraries_is_held_at_its_exit(tmp_path):
    """`run --report ops,advanced` of a CPython that never imports torch: it
    runs seized, awaiting libtorch, to its end; that must not keep its exit
    from being held (a second ptrace seize of the thread would fail: its
    last samples would name <unknown> frames)."""
    r = subprocess.run([LTRACE, "run", "-v", "--report", "ops,advanced", "--", "/usr/bin/python3.11", "-c",
                        "x = sum(i * i for i in range(200000)); print('DONE', x > 0)"],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0 and "DONE True" in r.stdout, r.stderr[-3000:]
    assert "runs on until its libraries load" in r.stderr, r.stderr[-3000:]
    assert "its exit waits until its last samples are read" in r.stderr, r.stderr[-3000:]
    assert "not held at its exit" not in r.stderr, r.stderr[-3000:]


def section_of(out, pid):
    """The report of process `pid` in a multi-process output (the whole
    output when it is the only process)."""
    heads = [(int(m.group(1)), m.start(), m.end()) for m in re.finditer(r"^==> pid (\d+)\b.* <==$", out, flags=re.M)]
    if not heads:
        return out
    for i, (p, start, end) in enumerate(heads):
        if p == pid:
            return out[end:heads[i + 1][1] if i + 1 < len(heads) else len(out)]
    raise AssertionError(f"no report of pid {pid}:\n{out[-2000:]}")


# --all adopts every torch process on the machine, other workers' jobs too
# (CI: it put the GPU bridge into test_bridge_reach's job): the serial pass.
@pytest.mark.serial
def test_all_counts_a_lightning_fit_started_later(tmp_path):
    """--all, then a real Lightning fit (SimpleProfiler on, so that it writes
    its own report): every action and count of Lightning's own report is in
    ours, from its first action."""
    from test_lightning import ARGS
    err_path = tmp_path / "lt.err"
    with open(tmp_path / "lt.out", "w") as out, open(err_path, "w") as err:
        lt = subprocess.Popen([LTRACE, "--all", "-v", "--report", "simple"], stdout=out, stderr=err, cwd=tmp_path)
    try:
        wait_for_condition(lambda: "attached:" in err_path.read_text(), "ltrace-bpf --all never attached", 120)
        job = subprocess.run([VENV_PY, os.path.join(WORKLOADS, "train_lightning.py"), "--profiler", "simple",
                              "--dirpath", "ref", "--filename", "perf"] + ARGS,
                             capture_output=True, text=True, timeout=600, cwd=tmp_path)
        assert job.returncode == 0, job.stderr[-3000:]
    finally:
        lt.send_signal(signal.SIGINT)
        lt.wait(120)
    assert lt.returncode == 0, err_path.read_text()[-3000:]
    pid = int(re.search(r"^READY (\d+)", job.stdout, flags=re.M).group(1))
    theirs = parse_simple_report(open(next((tmp_path / "ref").glob("*.txt"))).read())
    ours = parse_simple_report(section_of((tmp_path / "lt.out").read_text(), pid))
    assert len(theirs) > 30
    assert {k: v[1] for k, v in ours.items()} == {k: v[1] for k, v in theirs.items()}
    assert re.search(rf"pid {pid}: exec'd a CPython; held until its probes are in", err_path.read_text())


def test_job_env_holds_a_rank_started_later(tmp_path, sites):
    """--job-env KEY=VALUE (the cluster agent's way in): a CPython of the
    job started after the attach, none of our targets' descendants (a
    restarted rank), is held at its exec by its environment and counted
    20 of 20; a CPython without the variable is not touched."""
    token = f"first-{os.getpid()}-{time.monotonic_ns()}"
    env = dict(os.environ, LTRACE_TEST_JOB=token, PYTHONPATH=sites["2.6.6"])
    # The job's first process: the attach needs one to start from.
    first = subprocess.Popen(["/usr/bin/python3.11", "-c", "import time; time.sleep(600)"], env=env)
    err_path = tmp_path / "lt.err"
    try:
        with open(tmp_path / "lt.out", "w") as out, open(err_path, "w") as err:
            lt = subprocess.Popen([LTRACE, "--job-env", f"LTRACE_TEST_JOB={token}", "-v", "--report", "simple"],
                                  stdout=out, stderr=err, cwd=tmp_path)
        try:
            wait_for_condition(lambda: "attached:" in err_path.read_text(), "ltrace-bpf never attached", 120)
            r = subprocess.run(["/usr/bin/python3.11", EARLY], env=dict(env, EARLY_PREFIX="late"), capture_output=True,
                               text=True, timeout=120)
            assert r.returncode == 0, r.stderr
            late = int(r.stdout.split()[-1])
            other = subprocess.run(["/usr/bin/python3.11", EARLY], capture_output=True, text=True, timeout=120,
                                   env=dict(os.environ, PYTHONPATH=sites["2.6.6"], EARLY_PREFIX="other"))
            assert other.returncode == 0, other.stderr
        finally:
            lt.send_signal(signal.SIGINT)
            lt.wait(120)
    finally:
        first.kill()
        first.wait()
    out, err = (tmp_path / "lt.out").read_text(), err_path.read_text()
    assert lt.returncode == 0, err[-3000:]
    assert re.search(rf"pid {late}: exec'd a CPython; held until its probes are in", err), err[-3000:]
    calls = summed_calls(section_of(out, late))
    assert {f"late_{i:02d}": 1 for i in range(20)} == {k: v for k, v in calls.items() if k.startswith("late_")}, out
    assert "other_" not in out, out[-2000:]


def test_stacks_of_a_cpython_whose_start_is_held_up(tmp_path):
    """A CPython held up for seconds between its exec and its interpreter's
    start (an LD_PRELOAD constructor sleeping 8 s; a busy machine did the
    same in an audit and in CI): its thread-state key is looked for until
    the interpreter has one, so its stacks are sampled. It was looked for
    ~250 drains (or once, when the exec hold came too late) and the whole
    run's stacks were missing."""
    lib = tmp_path / "slow_start.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(lib), os.path.join(WORKLOADS, "slow_start.c")],
                   check=True)
    script = tmp_path / "spin.py"
    script.write_text("import time\n\n\ndef spin_here():\n    t = time.process_time()\n"
                      "    while time.process_time() - t < 1.5:\n        pass\n\n\nspin_here()\n")
    r = subprocess.run([LTRACE, "run", "--report", "advanced", "--", "env", "LT_SLOW_START_MS=8000",
                        f"LD_PRELOAD={lib}", pyenv_python(11), str(script)],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "cannot sample Python stacks" not in r.stderr, r.stderr[-3000:]
    assert "spin_here" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
