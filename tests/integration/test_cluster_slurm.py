"""`ltrace-bpf cluster --slurm-job N` against a real Slurm (Debian's
slurmctld, slurmd and munge, started here) with two nodes simulated on this
machine (network + UTS namespaces: their own hostnames and addresses;
tests/integration/slurm_sim.py), running a real Lightning DDP job on CPU
(gloo): 2 nodes x 2 ranks, launched by srun, ranks found by Lightning's own
SLURMEnvironment.

node2's tasks see their wall clock 3.7 ms ahead (an LD_PRELOAD shim that the
cluster's TaskProlog exports there, as an unsynchronised node would be): the
agents' round trips to the coordinator must measure it to within the bound
they state, and within the issue's 100 us.  Rank 3 sleeps 30 ms per step:
the merge must name it the straggler.

Runs, on one job:
  W. while the job waits: `cluster ... watch` (a watcher on each node),
     a capture asked of node2's, then a stop;
  A. while the job waits: `cluster --gather stream`, with node2's agent
     killed after attaching: node1's trace still comes back (through srun's
     stdout), the manifest and the merge say node2 failed, exit code 11;
  B. a second `cluster` on the same job, over the whole fit, traces written
     to the shared directory; beside it a single-rank `record --pid` of
     every rank: each rank's report must match its own from the cluster run.
"""
import glob
import json
import os
import re
import signal
import subprocess
import time

import pytest

from clock_shift import build_shift_shim
from conftest import LTRACE, ROOT, VENV_PY, WORKLOADS, chromium, parse_simple_report, wait_for
from busy import wait_until
from slurm_sim import SlurmSim, slurm_available

ok, why = slurm_available()
pytestmark = [
    pytest.mark.skipif(not ok, reason=f"no simulated Slurm here: {why}"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (BPF, namespaces)"),
]

STEPS = 120
SLOW_RANK = 3
SLOW_S = 0.03
SHIFT_NS = 3_700_000
CLOCK_GOAL_NS = 100_000

def run(cmd, sim, timeout=300, **kw):
    return subprocess.run(cmd, env=sim.env, capture_output=True, text=True, timeout=timeout, **kw)


def command_lines():
    """(pid, argv as bytes) of every process with a command line."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            cmd = open(f"/proc/{d}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        yield int(d), cmd


def srun_pid(node, job):
    """The srun that runs `node`'s agent of Slurm job `job`, while it runs
    (a zombie's command line is empty).  The job too: the other cluster
    tests' simulated clusters have a node2 as well, and run beside this one."""
    return next((pid for pid, cmd in command_lines()
                 if cmd[0].endswith(b"srun") and f"--nodelist={node}".encode() in cmd
                 and f"--jobid={job}".encode() in cmd), None)


def agent_pid(node, job):
    """The ltrace-bpf agent started on `node` for Slurm job `job` (its
    command line names both)."""
    return next((pid for pid, cmd in command_lines()
                 if len(cmd) > 1 and cmd[0].endswith(b"ltrace-bpf") and cmd[1] == b"agent"
                 and f"SLURMD_NODENAME={node}".encode() in cmd and f"SLURM_JOB_ID={job}".encode() in cmd), None)


def stop_watch(proc):
    """`cluster ... watch` stopped as a user would (SIGINT, passed on to
    every node's watcher); killed if it does not end. Its exit status."""
    try:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode


def manifest(dirpath):
    rows = {}
    for line in open(os.path.join(dirpath, "cluster-nodes.tsv")):
        if line.startswith("#"):
            continue
        c = line.rstrip("\n").split("\t")
        rows[c[0]] = c
    return rows


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cluster")
    shim = build_shift_shim(tmp)
    assert shim, "no C compiler for the clock-shift shim"
    prolog = tmp / "task_prolog.sh"
    prolog.write_text("#!/bin/sh\n"
                      f'if [ "$SLURMD_NODENAME" = node2 ]; then\n'
                      f'  echo "export LD_PRELOAD={shim}"\n'
                      f'  echo "export LT_TEST_REALTIME_SHIFT_NS={SHIFT_NS}"\n'
                      "fi\n")
    prolog.chmod(0o755)
    job_py = os.path.join(WORKLOADS, "ddp_straggler.py")
    go = tmp / "go"
    sim = SlurmSim(tmp / "slurm", nodes=("node1", "node2"), cpus_per_node=4, task_prolog=prolog, subnet_index=7)
    sim.start()
    out = {"tmp": tmp, "sim": sim}
    try:
        script = (f"#!/bin/sh\nexport MASTER_ADDR={sim.node_ip('node1')} MASTER_PORT=29533 GLOO_SOCKET_IFNAME=eth0 "
                  f"SLOW_RANK={SLOW_RANK} SLOW_S={SLOW_S} PYTHONIOENCODING=utf-8\n"
                  f"exec srun --output={tmp}/rank%t.out {VENV_PY} {job_py} {go} {STEPS} 2 2\n")
        job = sim.sbatch(script, nodes=2, ntasks_per_node=2)
        out["job"] = job
        sim.wait_state(job, "RUNNING", 60)
        for r in range(4):
            wait_for(str(tmp / f"rank{r}.out"), "READY", 600)
        pids = {}
        for r in range(4):
            m = re.search(r"READY (\d+) (\d+)", (tmp / f"rank{r}.out").read_text())
            pids[int(m.group(1))] = int(m.group(2))
        out["pids"] = pids

        # W: a watcher on every node while the job waits (the cheap tier):
        # both adopt their node's two ranks; a capture asked of node2's
        # watcher through its socket is written there and said back here;
        # a stop ends both cleanly.
        w_dir = tmp / "watch"
        w_err = open(tmp / "w.err", "w")
        w = subprocess.Popen([LTRACE, "cluster", "--slurm-job", str(job), "watch", "-v", "--dir", str(w_dir),
                              "--triggers", "request", "--capture-before", "5s", "--capture-after", "1s"],
                             env=sim.env, stdout=subprocess.DEVNULL, stderr=w_err, text=True)
        try:
            for node in ("node1", "node2"):
                wait_for(str(tmp / "w.err"), f"{node}: attached: 2 process(es)", 120, w)
            out["w_ask"] = run([LTRACE, "watch", "--capture-now", "--dir", str(w_dir / "node2")], sim, timeout=60)
            wait_for(str(tmp / "w.err"), "node2: watch: request: pid", 60, w)
            wait_until(lambda: glob.glob(str(w_dir / "node2" / "captures" / "*" / "*.ltrace")), 120,
                       "node2's capture to be written")
        finally:
            out["w_rc"] = stop_watch(w)
        out["w_err"] = (tmp / "w.err").read_text()
        out["w_dir"] = w_dir

        # A: stream the traces back; node2's agent dies after attaching.
        a_dir = tmp / "traces_a"
        a_err = open(tmp / "a.err", "w")
        a = subprocess.Popen([LTRACE, "cluster", "--slurm-job", str(job), "-o", str(a_dir), "--gather", "stream",
                              "--duration", "20"], env=sim.env, stdout=subprocess.PIPE, stderr=a_err, text=True)
        try:
            wait_for(str(tmp / "a.err"), "node(s) attached", 60, a)
            victim = agent_pid("node2", job)
            assert victim, "no agent process for node2"
            assert srun_pid("node2", job), "no srun for node2's agent"
            os.kill(victim, signal.SIGKILL)
            # Once node2's srun has ended, its status (the agent killed) is
            # fixed whenever the coordinator reaps it: only then end the
            # capture (a condition, not a guessed sleep).
            wait_until(lambda: srun_pid("node2", job) is None, 60, "node2's srun to end")
            a.send_signal(signal.SIGINT)  # ends the capture on node1 early
            out["a_stdout"], _ = a.communicate(timeout=60)
        finally:
            if a.poll() is None:
                a.kill()
        out["a_rc"] = a.returncode
        out["a_err"] = (tmp / "a.err").read_text()
        out["a_dir"] = a_dir

        # An agent that cannot run on the nodes: every node fails, cleanly.
        bad = subprocess.run([LTRACE, "cluster", "--slurm-job", str(job), "-o", str(tmp / "traces_bad"),
                              "--agent", "/nonexistent/ltrace-bpf", "--nodes", "node2"], env=sim.env,
                             capture_output=True, text=True, timeout=120)
        out["bad"] = bad

        # S: over the whole fit, a watcher on every node with the straggler
        # rule alone: the coordinator lines up all four ranks (each node's
        # arrivals on its clock made the coordinator's) and names rank 3 of
        # node2; node2's watcher captures it. --no-inject: its escalation
        # raises the stack rate only (B's recorders below use no op observer
        # either).
        s_dir = tmp / "swatch"
        s_err = open(tmp / "s.err", "w")
        s = subprocess.Popen([LTRACE, "cluster", "--slurm-job", str(job), "watch", "-v", "--dir", str(s_dir),
                              "--triggers", "straggler", "--no-inject", "--capture-before", "5s",
                              "--capture-after", "1s"], env=sim.env, stdout=subprocess.DEVNULL, stderr=s_err, text=True)
        out["s"] = s
        for node in ("node1", "node2"):
            wait_for(str(tmp / "s.err"), f"{node}: attached: 2 process(es)", 120, s)

        # B: the whole fit, into the shared directory, beside a single-rank
        # attach of every rank.
        b_dir = tmp / "traces_b"
        singles, recs = {}, []
        for rank, pid in sorted(pids.items()):
            singles[rank] = tmp / f"single{rank}.ltrace"
            # --report simple,comm, as the agents: the same probes on both sides
            recs.append(subprocess.Popen([LTRACE, "record", "--pid", str(pid), "-o", str(singles[rank]), "-v",
                                          "--report", "simple,comm"],
                                         stderr=open(tmp / f"single{rank}.err", "w"), stdout=subprocess.DEVNULL))
        b_err = open(tmp / "b.err", "w")
        t0 = time.time()
        # --report simple,comm: the agents record COMM records too (for who
        # arrived last), and must still finish within Slurm's KillWait (2 s
        # here) once the job ends: with one perf-event uprobe per c10d method
        # their detach took ~4 s and Slurm cut their traces short.
        b = subprocess.Popen([LTRACE, "cluster", "--slurm-job", str(job), "-o", str(b_dir), "--duration", "300",
                              "--report", "simple,comm"],
                             env=sim.env, stdout=subprocess.PIPE, stderr=b_err, text=True)
        try:
            for rank, rec in zip(sorted(pids), recs):
                wait_for(str(tmp / f"single{rank}.err"), "attached", 120, rec)
            wait_for(str(tmp / "b.err"), "node(s) attached", 120, b)
            out["b_attach_wall_s"] = time.time() - t0
            go.touch()
            out["b_stdout"], _ = b.communicate(timeout=400)
            for rec in recs:
                assert rec.wait(timeout=60) == 0
        finally:
            for p in [b] + recs:
                if p.poll() is None:
                    p.kill()
        out["b_rc"] = b.returncode
        out["b_err"] = (tmp / "b.err").read_text()
        # S: its straggler's capture, once written (at the latest when the
        # ranks are gone and the watchers end), then a stop.
        try:
            wait_until(lambda: glob.glob(str(s_dir / "node2" / "captures" / "*straggler*" / "*.ltrace"))
                       or s.poll() is not None, 120, "node2's straggler capture")
            wait_until(lambda: "node2: watch: summary: straggler" in (tmp / "s.err").read_text()
                       or s.poll() is not None, 120, "the capture's summary line")
        finally:
            out["s_rc"] = stop_watch(s)
        out["s_err"] = (tmp / "s.err").read_text()
        out["s_dir"] = s_dir
        out["b_dir"] = b_dir
        out["singles"] = singles
        sim.wait_state(job, "COMPLETED", 120)
        yield out
    finally:
        if "s" in out and out["s"].poll() is None:
            out["s"].kill()
        if "job" in out:
            sim.cancel(out["job"])
        sim.stop()


def test_a_watcher_on_every_node_captures_on_request_and_stops_cleanly(cluster):
    """`cluster --slurm-job N watch`: node1's and node2's watchers (their
    own recorders in DIR/NODE) each adopted their node's two ranks; the
    capture asked of node2's holds a trace there, and node1 has none; the
    stop passed on through srun ended both with exit 0."""
    err = cluster["w_err"]
    assert cluster["w_ask"].returncode == 0, cluster["w_ask"].stderr
    assert cluster["w_rc"] == 0, err[-4000:]
    for node in ("node1", "node2"):
        assert f"ltrace-bpf: {node}: watch: recording to {cluster['w_dir']}/{node}/ring" in err, err[-4000:]
        assert os.path.isdir(cluster["w_dir"] / node / "ring"), node
    assert glob.glob(str(cluster["w_dir"] / "node2" / "captures" / "*" / "*.ltrace")), err[-4000:]
    assert not glob.glob(str(cluster["w_dir"] / "node1" / "captures" / "*")), err[-4000:]
    assert "ended badly" not in err, err[-4000:]


def test_the_straggler_across_nodes_is_named_and_captured_on_its_node(cluster):
    """`cluster ... watch`'s straggler rule over every node's ranks: node2's
    rank 3, 30 ms late at every step, is named by the coordinator with all
    4 ranks of both nodes lined up (neither node's watcher sees more than
    its own 2), within 20 of its steps; node2's clock, 3.7 ms ahead, is
    measured; node2's watcher writes the straggler capture, node1's none."""
    err = cluster["s_err"]
    assert cluster["s_rc"] == 0, err[-4000:]
    m = re.search(r"ltrace-bpf: cluster: node2: clock ([-+][\d.]+) ms against this host's \(round trip ([\d.]+) ms\)",
                  err)
    assert m, err[-4000:]
    shift_ms, delay_ms = float(m.group(1)), float(m.group(2))
    assert abs(shift_ms - SHIFT_NS / 1e6) <= delay_ms / 2 + 0.1, (shift_ms, delay_ms)
    named = re.findall(r"ltrace-bpf: cluster: straggler: the straggler across nodes: rank (\d+) on (\w+), last to "
                       r"arrive at (\d+) of the last (\d+) \S+ collectives of (\d+) ranks on (\d+) nodes that kept "
                       r"others waiting \(([\d.]+) ms each, median\), named at its train step (\d+)", err)
    assert named, err[-4000:]
    rank, node, last, of, ranks, nodes, wait_ms, step = named[0]
    print(f"cluster watch: rank {rank} on {node} named at its train step {step}: last at {last} of {of}, "
          f"others waited {wait_ms} ms (median); node2's clock {shift_ms:+.3f} ms (round trip {delay_ms:.3f} ms)")
    assert (int(rank), node, int(ranks), int(nodes)) == (SLOW_RANK, "node2", 4, 2), named
    assert int(last) >= 12 and int(of) == 16, named
    assert int(step) <= 20, named  # slow from its first step: named within 20
    # The others waited for its sleep, less what they spent themselves (bound: SLOW_S).
    assert 0.25 * SLOW_S * 1e3 <= float(wait_ms) <= 1.2 * SLOW_S * 1e3, named
    assert len(named) == 1, named  # once while it stays the straggler
    caps = glob.glob(str(cluster["s_dir"] / "node2" / "captures" / "*straggler*" / "trace.ltrace"))
    assert len(caps) == 1, (caps, err[-4000:])
    assert not glob.glob(str(cluster["s_dir"] / "node1" / "captures" / "*")), err[-4000:]
    # node2's watcher's summary line gives the coordinator's reason (4 ranks:
    # more than its own node has).
    assert re.search(r"ltrace-bpf: node2: watch: straggler: .*of 4 ranks on 2 nodes", err), err[-4000:]
    assert "ended badly" not in err, err[-4000:]


def test_killed_agent_others_still_recorded_and_the_merge_says_what_is_missing(cluster):
    err = cluster["a_err"]
    assert cluster["a_rc"] == 11, err  # partial
    rows = manifest(cluster["a_dir"])
    assert rows["node1"][1] == "ok", rows
    assert rows["node2"][1] == "failed", rows
    assert any(w in rows["node2"][10].lower() for w in ("signal 9", "killed", "status 137")), rows
    assert "streamed back" in err, err
    # node1's trace came back through srun and is a whole trace file.
    r = subprocess.run([LTRACE, "report", str(cluster["a_dir"] / "node1.ltrace"), "--dump", "/dev/stdout"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert " host_info" in r.stdout and "clock_sync phase=0" in r.stdout and " window end" in r.stdout, r.stdout[:2000]
    m = subprocess.run([LTRACE, "report", str(cluster["a_dir"]), "--merge"], capture_output=True, text=True)
    assert m.returncode == 0, m.stderr
    assert "node node2: its agent failed" in m.stdout, m.stdout


def test_an_agent_that_cannot_start_fails_its_node_with_a_reason(cluster):
    bad = cluster["bad"]
    assert bad.returncode == 11, bad.stderr
    rows = manifest(cluster["tmp"] / "traces_bad")
    assert list(rows) == ["node2"], rows  # --nodes: only node2
    assert rows["node2"][1] == "failed" and "/nonexistent/ltrace-bpf" in rows["node2"][10], rows
    assert "node2: no complete trace" in bad.stderr, bad.stderr
    # A second run into the same directory is refused: runs never mix.
    again = subprocess.run([LTRACE, "cluster", "--slurm-job", str(cluster["job"]), "-o",
                            str(cluster["tmp"] / "traces_bad")], env=cluster["sim"].env, capture_output=True,
                           text=True, timeout=60)
    assert again.returncode in (2, 3), again.stderr  # 3 once the job has ended: checked first


def test_second_run_records_every_rank_on_both_nodes(cluster):
    err = cluster["b_err"]
    assert cluster["b_rc"] == 0, err
    rows = manifest(cluster["b_dir"])
    assert [rows[n][1] for n in ("node1", "node2")] == ["ok", "ok"], rows
    assert rows["node1"][2] == "node1" and rows["node2"][2] == "node2", rows
    m = re.search(r"2 of 2 node\(s\) attached; the last at ([\d.]+) s after start", err)
    assert m, err
    print(f"cluster: both nodes attached {m.group(1)} s after start")


@pytest.fixture(scope="module")
def merged(cluster):
    out = cluster["tmp"] / "merged"
    r = subprocess.run([LTRACE, "report", str(cluster["b_dir"]), "--merge", "--chrome", str(out / "merged.json"),
                        "--chrome-dir", str(out / "hta"), "--dirpath", str(out / "reports"), "--filename", "fit",
                        "--html", str(out / "merged.html")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return out, r


def test_summary_names_every_rank_and_the_straggler(merged):
    out, r = merged
    s = r.stdout
    assert "Ranks: 4 of world size 4, on 2 host(s)" in s, s
    assert "Missing: none" in s, s
    assert f"Straggler: rank {SLOW_RANK} (pid" in s, s


def arrival_rows(stdout):
    """The "Last to arrive at collectives" table: (rank, kind) -> its columns."""
    part = stdout.split("Last to arrive at collectives", 1)
    assert len(part) == 2, stdout
    rows = {}
    for line in part[1].splitlines()[1:]:
        m = re.match(r"\|\s*rank (\d+)\s*\|\s*(\w+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*([\d.]+)%\s*\|"
                     r"\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|", line)
        if m:
            rows[(int(m.group(1)), m.group(2))] = {"instances": int(m.group(3)), "last": int(m.group(4)),
                                                   "share": float(m.group(5)), "waited_for_s": float(m.group(6)),
                                                   "it_waited_s": float(m.group(8))}
    return rows


def test_slowed_rank_is_last_to_arrive_at_its_all_reduces(merged):
    # Measured from the COMM entry times: rank 3 sleeps SLOW_S before each
    # step's gradient all-reduce, so it must be the last to arrive at (nearly)
    # all of them.  Every rank sees every all-reduce of the fit (recorded
    # from before it began): one per training step, plus the few Lightning
    # issues itself (reduce_boolean_decision), on the same count on every rank.
    # The traces: the cluster agents' own (run B, with comm probes).
    out, r = merged
    rows = arrival_rows(r.stdout)
    print({k: v for k, v in rows.items()})
    counts = {rank: rows[(rank, "all_reduce")]["instances"] for rank in range(4)}
    assert len(set(counts.values())) == 1, counts
    n = counts[0]
    assert STEPS <= n <= STEPS + 4, counts
    slow = rows[(SLOW_RANK, "all_reduce")]
    assert slow["last"] >= 0.95 * n, (slow, n)
    assert slow["waited_for_s"] > 0
    # The merged trace names each all-reduce alike on every rank's row.
    events = json.load(open(out / "merged.json"))["traceEvents"]
    names = {}
    for e in events:
        if e.get("cat") == "collective" and e["name"].startswith("all_reduce #"):
            names.setdefault(e["pid"], set()).add(e["name"])
    assert sorted(names) == [0, 1, 2, 3], sorted(names)
    assert all(v == names[0] for v in names.values())
    assert len(names[0]) >= n
    # The merged page last: its failure must not hide the arrivals' above.
    check_merged_page(out, rows)


def own_picks():
    """How many steps a rank's timeline picks for itself at most: its slowest
    kTimelineSlowest, the median, the first and the last
    (reports/aggregate/step_slices.h, timeline_priority)."""
    header = open(os.path.join(ROOT, "reports", "aggregate", "step_slices.h")).read()
    return int(re.search(r"kTimelineSlowest = (\d+);", header).group(1)) + 3


def attrs(tag):
    return dict(re.findall(r'([\w-]+)="([^"]*)"', tag))


def check_merged_page(out, rows):
    """The merged page of the same traces, loaded in headless Chromium (script
    run): the waiting heat map's rows add up to the arrivals table's waits,
    the slowed rank is the highlighted straggler in both heat maps and is
    named in the finding, and every rank's step timeline draws the step the
    address chooses (one choice for all ranks)."""
    html = (out / "merged.html").read_text()
    # A step every rank's timeline embeds: #step=N chooses it on all of them.
    embedded = [set(s["i"] for s in json.loads(m)["steps"])
                for m in re.findall(r'<script type="application/json" class="tl-data">(.*?)</script>', html, re.S)]
    assert len(embedded) == 4, len(embedded)
    common = sorted(set.intersection(*embedded))
    # Each rank embeds the others' chosen steps too (small steps: the budget
    # holds them all): one set on every rank, more than one rank picks alone.
    assert all(e == embedded[0] for e in embedded), embedded
    assert len(common) > own_picks(), (len(common), own_picks())
    step = common[len(common) // 2]
    base = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + str(out / "prof")]
    dom = subprocess.run(base + ["--dump-dom", (out / "merged.html").as_uri() + f"#step={step}"],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    dom = dom.stdout
    shot = out / "merged.png"  # the artifact, under the pytest tmp dir: not checked, so a slow one is no failure
    try:
        subprocess.run(base + ["--window-size=1280,1400", "--screenshot=" + str(shot), (out / "merged.html").as_uri()],
                       capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        print("merged page screenshot: timed out after 120 s (an artifact only)")

    # Step numbers across ranks: every rank attached before the first step
    # (the job waits for `go`), so the collectives entered inside each
    # rank's steps measure the same numbering on all four (offsets 0).
    note = re.search(r'<p class="note" id="step-numbering" data-measured="(\d)" data-offsets="([^"]*)">([^<]*)</p>',
                     dom)
    assert note and note.group(1) == "1" and note.group(2) == "0,0,0,0", note and note.group(0)
    assert "every rank numbers the same step alike" in note.group(3), note.group(3)
    # Every heat-map cell gives its window of its rank's own trace.
    cells = [attrs(t) for t in re.findall(r'<rect class="cell"[^>]*>', dom)]
    assert cells and all(c.get("data-window") for c in cells)
    traces = json.loads(re.search(r'<script type="application/json" id="rank-traces">(.*?)</script>', dom).group(1))
    assert len(traces) == 4 and all(t.endswith(".ltrace") for t in traces.values()), traces
    # Both heat maps highlight the slowed rank.
    for cls in ("heatmap", "waitmap"):
        m = re.search(r'<svg class="chart %s"[^>]*>' % cls, dom)
        assert m, cls
        assert attrs(m.group(0))["data-straggler"] == str(SLOW_RANK), m.group(0)
    assert f"rank {SLOW_RANK} (last to arrive)" in dom
    # The waiting heat map's rows: cells add up to the in-step wait, and with
    # the waits outside steps to the arrivals table's "it waited" (all kinds).
    svg = re.search(r'<svg class="chart waitmap"[^>]*>(.*?)</svg>', dom, re.S).group(1)
    bucket = int(attrs(re.search(r'<svg class="chart waitmap"[^>]*>', dom).group(0))["data-bucket"])
    assert bucket == 1  # 120 steps: one cell each
    total = {}
    for g in re.finditer(r'<g class="wrow"([^>]*)>(.*?)</g>', svg, re.S):
        a = attrs(g.group(1))
        rank = int(a["data-rank"])
        cells = [int(attrs(c)["data-ns"]) for c in re.findall(r'<rect class="wcell"[^>]*>', g.group(2))]
        assert len(cells) >= STEPS - 2, (rank, len(cells))
        assert sum(cells) == int(a["data-in-steps-ns"]), rank
        total[rank] = (int(a["data-in-steps-ns"]) + int(a["data-outside-ns"])) / 1e9
        table = sum(v["it_waited_s"] for (rk, _), v in rows.items() if rk == rank)
        kinds = sum(1 for (rk, _) in rows if rk == rank)
        assert abs(total[rank] - table) <= 0.0005 * kinds + 1e-9, (rank, total[rank], table)
        assert int(a["data-last"]) == sum(v["last"] for (rk, _), v in rows.items() if rk == rank), rank
        # most of the waiting happens inside the training steps (at each step's all-reduce)
        if rank != SLOW_RANK:
            assert int(a["data-in-steps-ns"]) >= 0.5 * total[rank] * 1e9, (rank, a)
    assert sorted(total) == [0, 1, 2, 3], total
    # The slowed rank waits least: the others wait for it.
    assert total[SLOW_RANK] < min(v for k, v in total.items() if k != SLOW_RANK), total
    # The finding names it, links to the waiting heat map, and states the clock corrections.
    f = re.search(r'<li class="verdict" data-verdict="last_arrival"[^>]*><a href="([^"]*)">([^<]*)</a> '
                  r'<a class="clock-note" href="#hosts">([^<]*)</a>', dom)
    assert f, re.findall(r'<li class="verdict".*?</li>', dom, re.S)
    assert f.group(1) == "#waitmap"
    assert f.group(2).startswith(f"rank {SLOW_RANK} is last to arrive in ") and "all_reduces (pg " in f.group(2)
    share = float(re.search(r"in ([\d.]+)% of", f.group(2)).group(1))
    assert share >= 95.0, f.group(2)
    assert "clock corrections:" in f.group(3)
    assert 'id="hosts"' in dom and 'id="waitmap"' in dom
    # Every rank's step timeline, all on the chosen step.
    drawn = re.findall(r'<section class="steptl"[^>]*data-drawn="([^"]*)"', dom)
    assert drawn == [str(step)] * 4, (drawn, step)
    # ...each with its rank's c10d calls in that step: DDP's gradient all_reduce
    # (one a step, in backward) as a tick at its entry.
    sections = re.findall(r'<section class="steptl".*?</section>', dom, re.S)
    assert len(sections) == 4
    for sec in sections:
        kinds = [attrs(t)["data-kind"] for t in re.findall(r'<rect class="comm"[^>]*>', sec)]
        assert kinds.count("all_reduce") >= 1, kinds


def test_hta_loads_the_cluster_run_as_four_ranks(merged):
    out, r = merged
    code = ("from hta.trace_analysis import TraceAnalysis\n"
            f"a = TraceAnalysis(trace_dir={str(out / 'hta')!r})\n"
            "print('RANKS', a.t.get_ranks())\n")
    h = subprocess.run([VENV_PY, "-c", code], capture_output=True, text=True, timeout=300, cwd=out)
    assert h.returncode == 0, h.stderr[-3000:]
    assert "RANKS [0, 1, 2, 3]" in h.stdout, h.stdout


def test_measured_clock_correction_is_within_its_bound_and_the_goal(merged):
    out, r = merged
    meta = json.load(open(out / "merged.json"))["ltrace_bpf"]["common_clock"]
    hosts = {h["host"]: h for h in meta["hosts"]}
    assert set(hosts) == {"node1", "node2"}, meta
    assert "measured against" in r.stdout, r.stdout
    # Both measured against the coordinator (this machine's unshifted clock):
    # node2's correction must undo the +3.7 ms its tasks see.
    n1, n2 = hosts["node1"], hosts["node2"]
    error = (n2["clock_offset_ns"] - n1["clock_offset_ns"]) + SHIFT_NS
    bound = n1["residual_ns"] + n2["residual_ns"]
    print(f"node2 vs node1: injected +{SHIFT_NS} ns; corrected by {n2['clock_offset_ns'] - n1['clock_offset_ns']} ns: "
          f"error {error} ns; stated bound {bound} ns")
    assert 0 <= n1["residual_ns"] and 0 <= n2["residual_ns"]
    assert abs(error) <= bound, (error, bound)
    assert abs(error) <= CLOCK_GOAL_NS, error
    assert bound <= CLOCK_GOAL_NS, bound


@pytest.mark.parametrize("rank", range(4))
def test_each_rank_report_matches_a_single_rank_attach(cluster, merged, rank):
    out, r = merged
    single_dir = cluster["tmp"] / f"single_reports{rank}"
    s = subprocess.run([LTRACE, "report", str(cluster["singles"][rank]), "--dirpath", str(single_dir), "--filename",
                        "fit"], capture_output=True, text=True)
    assert s.returncode == 0, s.stderr
    # Ranks 0-1 are node1's local ranks 0-1, ranks 2-3 node2's: Lightning's
    # per-rank file names, one directory per host.
    mine = out / "reports" / f"node{rank // 2 + 1}" / f"fit-fit-{rank % 2}.txt"
    theirs = single_dir / f"fit-fit-{rank % 2}.txt"
    assert mine.exists() and theirs.exists(), (list((out / "reports").rglob("*")), list(single_dir.rglob("*")))
    a, b = parse_simple_report(mine.read_text()), parse_simple_report(theirs.read_text())
    assert "run_training_batch" in a, mine.read_text()
    # The same actions, called as often; times of the same calls within 5%.
    # Two tracers' probes on one process fire one after the other, so each
    # call one tracer measures holds the other's probe work at its ends:
    # measured up to 27 us a call on the loaded CI machine (a hook of 16 us
    # a call read 44 us by the other tracer; CI run 11). Times are compared
    # where a call takes 1 ms or more, where that is under 3%; a clock or
    # merge error (node2's 3.7 ms shift a call) is far past 5% there.
    assert set(a) == set(b), (sorted(set(a) ^ set(b)))
    compared = 0
    for name in a:
        if name == "Total":
            continue
        assert a[name][1] == b[name][1], (name, a[name], b[name])
        ta, tb = float(a[name][2]), float(b[name][2])
        if max(ta, tb) / int(a[name][1]) < 0.001:
            continue
        compared += 1
        assert abs(ta - tb) <= 0.05 * max(ta, tb) + 0.002, (name, a[name], b[name])
    assert compared >= 3, a


def test_the_job_was_not_disturbed(cluster):
    # Two cluster runs (one agent killed mid-capture) and a single-rank
    # attach: every rank still finished its fit, and the job completed.
    for r in range(4):
        text = (cluster["tmp"] / f"rank{r}.out").read_text()
        assert f"FIT_DONE {r}" in text, text[-2000:]
    assert cluster["sim"].job_state(cluster["job"]) == "COMPLETED"


def test_a_job_that_is_not_running_is_a_clear_error(cluster):
    sim = cluster["sim"]
    done = subprocess.run([LTRACE, "cluster", "--slurm-job", str(cluster["job"]), "-o", str(cluster["tmp"] / "x")],
                          env=sim.env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("\n") == 1 and "is COMPLETED, not RUNNING" in done.stderr, done.stderr
    none = subprocess.run([LTRACE, "cluster", "--slurm-job", "987654", "-o", str(cluster["tmp"] / "y")],
                          env=sim.env, capture_output=True, text=True, timeout=60)
    assert none.returncode == 3, none.stderr
    assert "does not exist" in none.stderr and none.stderr.count("\n") == 1, none.stderr
    env = dict(sim.env, PATH="/nonexistent")
    noslurm = subprocess.run([LTRACE, "cluster", "--slurm-job", "1", "-o", str(cluster["tmp"] / "z")], env=env,
                             capture_output=True, text=True, timeout=60)
    assert noslurm.returncode == 12, noslurm.stderr
    assert "scontrol" in noslurm.stderr and noslurm.stderr.count("\n") == 1, noslurm.stderr
