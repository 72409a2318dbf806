"""`ltrace-bpf cluster --slurm-job N dump` on a real Lightning DDP fit
(gloo, CPU) on a real Slurm with four simulated nodes, one rank each
(tests/workloads/ddp_straggler.py): rank 3 sleeps in its training_step for
an hour, so the others finish their backward's gradient all-reduce launch
and wait for it inside backward() -- DDP's reducer, which has no c10d
Python frame.  The verdict must say ranks 0-2 wait in backward and name
rank 3 at its training_step's line, blocked in clock_nanosleep; exit 15.
"""
import json
import os
import re
import time

import pytest

from conftest import LTRACE, VENV_PY, WORKLOADS, wait_for
from slurm_sim import SlurmSim, slurm_available
import subprocess

ok, why = slurm_available()
pytestmark = [
    pytest.mark.skipif(not ok, reason=f"no simulated Slurm here: {why}"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, reading other processes)"),
]

NODES = ("node1", "node2", "node3", "node4")
JOB_PY = os.path.join(WORKLOADS, "ddp_straggler.py")
SLEEP_LINE = next(i for i, l in enumerate(open(JOB_PY), 1) if "time.sleep(slow_s)" in l)


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cdump_ddp")
    go = tmp / "go"
    sim = SlurmSim(tmp / "slurm", nodes=NODES, cpus_per_node=2, subnet_index=25)
    sim.start()
    out = {"tmp": tmp, "sim": sim}
    try:
        script = (f"#!/bin/sh\nexport MASTER_ADDR={sim.node_ip('node1')} MASTER_PORT=29573 GLOO_SOCKET_IFNAME=eth0 "
                  f"SLOW_RANK=3 SLOW_S=3600 PYTHONIOENCODING=utf-8\n"
                  f"exec srun --output={tmp}/rank%t.out {VENV_PY} {JOB_PY} {go} 50 1 {len(NODES)}\n")
        out["id"] = sim.sbatch(script, nodes=len(NODES), ntasks_per_node=1)
        sim.wait_state(out["id"], "RUNNING", 60)
        for r in range(len(NODES)):
            wait_for(str(tmp / f"rank{r}.out"), "READY", 600)
        go.touch()
        yield out
    finally:
        if "id" in out:
            sim.cancel(out["id"])
        sim.stop()


def test_ddp_ranks_wait_in_backward_for_the_rank_in_its_training_step(job):
    # The fit starts (process group, DDP wrap, first batch): until the ranks
    # reach the first step, the dump finds no hang (exit 0); then 15.  A rank
    # that reaches backward as we read is "in backward too, but not blocked
    # there in both reads" (a busy machine spreads the ranks' arrivals over
    # seconds): read again until every rank has settled.
    deadline = time.time() + 240
    runs = []
    while True:
        t0 = time.perf_counter()
        r = subprocess.run([LTRACE, "cluster", "--slurm-job", str(job["id"]), "dump", "--json"], env=job["sim"].env,
                           capture_output=True, text=True, timeout=120)
        runs.append((r.returncode, time.perf_counter() - t0))
        if time.time() > deadline:
            break
        if r.returncode == 15:
            v = json.loads(r.stdout)["verdict"]
            if not any(p["collective"] == v["collective"] for p in v["not_waiting"]):
                break
        elif r.returncode != 0:
            break
        time.sleep(1)
    print(f"\ncluster dump --json runs (exit, seconds): {[(c, round(s, 2)) for c, s in runs]}")
    assert r.returncode == 15, r.stdout[-4000:] + r.stderr
    v = json.loads(r.stdout)["verdict"]
    print("\n".join(v["text"]))
    assert v["hang"] and v["collective"] == "backward", v["text"]
    assert [p["rank"] for p in v["waiting"]] == [0, 1, 2], v["text"]
    (late,) = v["not_waiting"]
    assert late["rank"] == 3 and late["syscall"] == "clock_nanosleep", late
    assert late["frame"] == {"function": "Model.training_step", "file": JOB_PY, "line": SLEEP_LINE} or \
        late["frame"] == {"function": "training_step", "file": JOB_PY, "line": SLEEP_LINE}, late
    assert any("wait in backward (DDP's gradient all-reduce, most likely" in t for t in v["text"]), v["text"]
    assert any(re.search(r"rank 3 has not entered it: it is in .*ddp_straggler\.py:\d+ \(.*training_step\), "
                         r"blocked in clock_nanosleep", t) for t in v["text"]), v["text"]
