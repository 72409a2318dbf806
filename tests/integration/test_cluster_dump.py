"""`ltrace-bpf cluster --slurm-job N dump` against a real Slurm (Debian's
slurmctld, slurmd and munge, started here) with four simulated nodes
(tests/integration/slurm_sim.py), each running one rank of a real
torch.distributed job on gloo (tests/workloads/allreduce_hang.py: the ranks
loop all_reduce).

Runs, on one job, in order:
  1. while the ranks loop: exit 0, "no hang found", every rank's stack;
  2. rank 3 blocks in its own load_batch (a read of a FIFO) before an
     all_reduce; the others wait in all_reduce: exit 15 (hang), the verdict
     names ranks 0-2 waiting in all_reduce and rank 3 with its file:line,
     function and system call; the same in --json;
  3. rank 3 let go: exit 0 again, no verdict left over.
Each command's time from start is printed (-s); the issue asks <= 10 s with
4 nodes, which bench/cluster_dump_time.py measures (not asserted here: the
machine is shared).
"""
import json
import os
import re
import subprocess
import time

import pytest

from conftest import LTRACE, VENV_PY, WORKLOADS, wait_for
from slurm_sim import SlurmSim, slurm_available

ok, why = slurm_available()
pytestmark = [
    pytest.mark.skipif(not ok, reason=f"no simulated Slurm here: {why}"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, reading other processes)"),
]

NODES = ("node1", "node2", "node3", "node4")
HANG_RANK = 3
HANG_EXIT = 15
JOB_PY = os.path.join(WORKLOADS, "allreduce_hang.py")


def cluster_dump(job, *extra):
    t0 = time.perf_counter()
    r = subprocess.run([LTRACE, "cluster", "--slurm-job", str(job["id"]), "dump", *extra], env=job["sim"].env,
                       capture_output=True, text=True, timeout=120)
    took = time.perf_counter() - t0
    print(f"\ncluster dump {' '.join(extra)}: exit {r.returncode} in {took:.2f} s (issue's goal: <= 10 s)")
    return r, took


def let_go(ctl):
    """A byte into the FIFO rank 3 reads (it holds it open, so this open does not block)."""
    try:
        fd = os.open(os.path.join(ctl, "feed"), os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return
    try:
        os.write(fd, b"x")
    finally:
        os.close(fd)


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cdump")
    ctl = tmp / "ctl"
    ctl.mkdir()
    os.mkfifo(ctl / "feed")
    sim = SlurmSim(tmp / "slurm", nodes=NODES, cpus_per_node=2, subnet_index=23)
    sim.start()
    out = {"tmp": tmp, "ctl": str(ctl), "sim": sim}
    try:
        script = (f"#!/bin/sh\nexport MASTER_ADDR={sim.node_ip('node1')} MASTER_PORT=29571 GLOO_SOCKET_IFNAME=eth0 "
                  f"PYTHONIOENCODING=utf-8\nexec srun --output={tmp}/rank%t.out {VENV_PY} {JOB_PY} {ctl}\n")
        out["id"] = sim.sbatch(script, nodes=len(NODES), ntasks_per_node=1)
        sim.wait_state(out["id"], "RUNNING", 60)
        for r in range(len(NODES)):
            wait_for(str(tmp / f"rank{r}.out"), "READY", 600)
        yield out
    finally:
        (ctl / "stop").touch()
        let_go(str(ctl))
        if "id" in out:
            sim.cancel(out["id"])
        sim.stop()


def test_looping_ranks_are_no_hang(job):
    r, _ = cluster_dump(job)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert "no hang found" in r.stdout, r.stdout[-3000:]
    for rank in range(len(NODES)):
        assert f"=== Rank {rank} (node" in r.stdout, r.stdout[:3000]
    # Every rank's main thread is in the job's loop.
    assert r.stdout.count("(" + JOB_PY + ":") >= len(NODES), r.stdout[:3000]


def test_a_blocked_rank_is_named_and_the_others_wait_in_all_reduce(job):
    open(os.path.join(job["ctl"], "hang"), "w").write(str(HANG_RANK))
    text = wait_for(str(job["tmp"] / f"rank{HANG_RANK}.out"), "BLOCKING", 120)
    line = int(re.search(r"BLOCKING \d+ (\d+)", text).group(1))
    for rank in range(len(NODES)):  # the others are at (microseconds from) their waiting all_reduce
        if rank != HANG_RANK:
            wait_for(str(job["tmp"] / f"rank{rank}.out"), "WAITING", 120)
    r, took = cluster_dump(job)
    assert r.returncode == HANG_EXIT, r.stdout[-4000:] + r.stderr
    verdict = r.stdout[r.stdout.index("Verdict:"):]
    print(verdict)
    assert re.search(r"hang: ranks 0-2 wait in all_reduce \(process group and sequence number not known\) for at "
                     r"least \d+\.\d s", verdict), verdict
    assert f"rank 3 has not entered it: it is in {JOB_PY}:{line} (load_batch), blocked in read for at least" \
        in verdict, verdict
    assert "Not known:" in r.stdout and "sequence number" in r.stdout
    job["hang_text_s"] = took

    j, took_json = cluster_dump(job, "--json")
    assert j.returncode == HANG_EXIT, j.stderr
    doc = json.loads(j.stdout)
    v = doc["verdict"]
    assert v["hang"] is True and v["collective"] == "all_reduce", v
    assert [p["rank"] for p in v["waiting"]] == [0, 1, 2], v
    assert v["waited_at_least_s"] >= 0.9, v  # the agents' reads are 1 s apart
    (late,) = v["not_waiting"]
    assert late["rank"] == HANG_RANK and late["collective"] is None, late
    assert late["frame"] == {"function": "load_batch", "file": JOB_PY, "line": line}, late
    assert late["syscall"] == "read" and late["blocked_at_least_s"] >= 0.9, late
    assert v["unread"] == [], v
    assert sorted(rk["rank"] for rk in doc["ranks"]) == [0, 1, 2, 3], doc["ranks"]
    assert all(n["ok"] for n in doc["nodes"]), doc["nodes"]
    # The waiting ranks' main threads: the all_reduce frame of c10d, above the job's own line.
    for rk in doc["ranks"]:
        main = next(t for t in rk["process"]["threads"] if t["tid"] == rk["process"]["pid"])
        funcs = [(f or {}).get("function") for f in main["frames"]]
        if rk["rank"] == HANG_RANK:
            assert "load_batch" in funcs and "all_reduce" not in funcs, funcs
        else:
            assert "all_reduce" in funcs, funcs
            assert main["blocked_at_least_s"] and main["blocked_at_least_s"] >= 0.9, main


def test_once_let_go_there_is_no_hang_left(job):
    let_go(job["ctl"])
    for rank in range(len(NODES)):  # rank 3 goes on, the all_reduce completes, the loop runs again
        wait_for(str(job["tmp"] / f"rank{rank}.out"), "PASSED", 120)
    r, _ = cluster_dump(job)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert "no hang found" in r.stdout
