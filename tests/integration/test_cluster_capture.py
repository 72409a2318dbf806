"""`ltrace-bpf cluster --slurm-job N capture` for the job's owner, without
sudo (issue 33): a real Slurm (tests/integration/slurm_sim.py) with two
simulated nodes, a job submitted by an unprivileged user (nobody) with one
plain CPython rank per node, and root's watcher on each node (as the
ltrace-bpf-watch service runs there). The owner asks every node's
watcher through its socket: each rank is captured on its node, and the
captures hold the owner's processes and are theirs; with -o each comes
back to the owner's directory, through srun. Another user is refused before
any step starts: one line, exit 18.
"""
import glob
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from conftest import LTRACE, wait_for
from slurm_sim import SlurmSim, slurm_available

ok, why = slurm_available()
pytestmark = [
    pytest.mark.skipif(not ok, reason=f"no simulated Slurm here: {why}"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, the watchers)"),
]

NOBODY, OTHER = 65534, 65533
NODES = ("node1", "node2")
LOOP = ("import os, time\n"
        "def ranks_loop():\n"
        "    while True:\n"
        "        time.sleep(0.02)\n"
        "print('READY', os.environ.get('SLURM_PROCID'), os.getpid(), flush=True)\n"
        "ranks_loop()\n")


def as_user(uid):
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]


def test_the_jobs_owner_captures_every_rank_through_the_nodes_watchers():
    # Every directory the users touch must be theirs to reach (pytest's tmp
    # dirs are root's, 0700).
    base = tempfile.mkdtemp(prefix="ltb-ccap-")
    os.chmod(base, 0o755)
    jobs_dir = os.path.join(base, "job")
    os.mkdir(jobs_dir)
    os.chown(jobs_dir, NOBODY, NOBODY)
    script = os.path.join(jobs_dir, "job.sh")
    with open(script, "w") as f:
        f.write(f"#!/bin/sh\nexec srun --output={jobs_dir}/rank%t.out /usr/bin/python3.11 -c \"{LOOP}\"\n")
    os.chmod(script, 0o755)
    sim = SlurmSim(os.path.join(base, "slurm"), nodes=NODES, cpus_per_node=2, subnet_index=41)
    sim.start()
    wdir = os.path.join(base, "watch")
    ws, job = {}, None
    try:
        r = subprocess.run(as_user(NOBODY) + ["sbatch", "--parsable", "--nodes=2", "--ntasks-per-node=1",
                                              f"--chdir={jobs_dir}", f"--output={jobs_dir}/slurm-%j.out", script],
                           env=sim.env, capture_output=True, text=True, timeout=60, cwd=jobs_dir)
        assert r.returncode == 0, r.stderr
        job = int(r.stdout.strip().split(";")[0])
        sim.wait_state(job, "RUNNING", 60)
        for rank in range(2):
            wait_for(os.path.join(jobs_dir, f"rank{rank}.out"), "READY", 120)
        pids = {}
        for rank in range(2):
            words = open(os.path.join(jobs_dir, f"rank{rank}.out")).read().split()
            pids[int(words[words.index("READY") + 1])] = int(words[words.index("READY") + 2])

        # Root's watcher on each node, as the ltrace-bpf-watch service runs
        # there (not a step of the job: Slurm starts no step of root's in a
        # user's job), each on its node's ranks and its own DIR/NODE.
        for node in NODES:
            err = os.path.join(base, f"w-{node}.err")
            ws[node] = (subprocess.Popen([LTRACE, "watch", "-v", "--job-env", f"SLURM_JOB_ID={job}", "--job-env",
                                          f"SLURMD_NODENAME={node}", "--dir", os.path.join(wdir, node),
                                          "--triggers", "request", "--capture-before", "1s", "--capture-after", "1s"],
                                         stdout=subprocess.DEVNULL, stderr=open(err, "w")), err)
        for node, (proc, err) in ws.items():
            wait_for(err, "attached", 120, proc)

        # The owner, no sudo: every rank asked of its node's watcher, and
        # each capture brought back (-o) once its watcher wrote it.
        back = os.path.join(jobs_dir, "back")
        r = subprocess.run(as_user(NOBODY) + [LTRACE, "cluster", "--slurm-job", str(job), "capture", "--dir", wdir,
                                              "-o", back],
                           env=sim.env, capture_output=True, text=True, timeout=400, cwd="/")
        assert r.returncode == 0, (r.stdout, r.stderr)
        for rank, node in ((0, "node1"), (1, "node2")):
            # The capture the watcher took for it, by name.
            line = re.escape(f"{node}: rank {rank} (pid {pids[rank]}): a capture of pid {pids[rank]} is asked; it "
                             f"lands in {wdir}/{node}/captures/") + \
                rf"\S+-{pids[rank]}-r{rank}-request" + re.escape(" (your processes only, its files yours)")
            assert re.search(line, r.stdout), r.stdout
        # Each lands on its node, holds that rank, and is the owner's.
        for rank, node in ((0, "node1"), (1, "node2")):
            wait_for(ws[node][1], f"watch: wrote {wdir}/{node}/captures/", 120, ws[node][0])
        for rank, node in ((0, "node1"), (1, "node2")):
            caps = glob.glob(os.path.join(wdir, node, "captures", f"*-{pids[rank]}-r{rank}-request"))
            assert len(caps) == 1, os.listdir(os.path.join(wdir, node, "captures"))
            trace = os.path.join(caps[0], "trace.ltrace")
            assert os.lstat(trace).st_uid == NOBODY
            dumped = os.path.join(jobs_dir, f"dump{rank}.txt")
            d = subprocess.run(as_user(NOBODY) + [LTRACE, "report", trace, "--report", "simple", "--dump", dumped],
                               capture_output=True, text=True, timeout=120, cwd="/")
            assert d.returncode in (0, 13), d.stderr
            seen = {int(x.split()[1].split("/")[0]) for x in open(dumped) if len(x.split()) > 2}
            assert pids[rank] in seen and seen <= {0, pids[0], pids[1]}, seen
            # Brought back: the same bytes, in the owner's directory, theirs.
            name = f"{node}-{os.path.basename(caps[0])}.ltrace"
            copy = os.path.join(back, name)
            assert f"{node}: rank {rank} (pid {pids[rank]}): brought back to {copy}" in r.stdout, r.stdout
            assert os.lstat(copy).st_uid == NOBODY
            assert open(copy, "rb").read() == open(trace, "rb").read()
        assert sorted(os.listdir(back)) == sorted(
            f"{n}-{os.path.basename(glob.glob(os.path.join(wdir, n, 'captures', f'*-{pids[k]}-r{k}-request'))[0])}"
            ".ltrace" for k, n in ((0, "node1"), (1, "node2")))

        # Another user: refused before any step starts, one line.
        r = subprocess.run(as_user(OTHER) + [LTRACE, "cluster", "--slurm-job", str(job), "capture", "--dir", wdir],
                           env=sim.env, capture_output=True, text=True, timeout=120, cwd="/")
        assert r.returncode == 18, (r.returncode, r.stderr)
        assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert f"is uid {NOBODY}'s, you are uid {OTHER}" in r.stderr, r.stderr

        # Root asks too: its steps run as the job's owner (srun --uid), whose
        # requests the watchers answer. With --duration each capture holds
        # that long after the request (escalated), not --capture-after.
        r = subprocess.run([LTRACE, "cluster", "--slurm-job", str(job), "capture", "--dir", wdir, "--duration", "3"],
                           env=sim.env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and r.stdout.count(" is asked for the next 3 s; ") == 2, (r.stdout, r.stderr)
        for node, (proc, err) in ws.items():
            deadline = time.time() + 120
            while open(err).read().count("watch: wrote ") < 2 and time.time() < deadline:
                time.sleep(0.2)
            wrote = re.findall(r"watch: wrote \S+ \(\d+ records, (\d+) ms[;)]", open(err).read())
            assert len(wrote) == 2 and int(wrote[1]) >= 3900, (node, wrote)  # 1 s before, 3 s after

        # So does root's dump of the user's job (it was "Access/permission
        # denied" from Slurm): the owner's steps read the owner's processes.
        r = subprocess.run([LTRACE, "cluster", "--slurm-job", str(job), "dump", "--duration", "0.2"], env=sim.env,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and r.stdout.count("ranks_loop") >= 2, (r.stdout[-3000:], r.stderr)

        for node, (proc, err) in ws.items():
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=120) == 0, open(err).read()[-3000:]
    finally:
        for proc, _ in ws.values():
            if proc.poll() is None:
                proc.kill()
        if job:
            sim.cancel(job)
        sim.stop()
        shutil.rmtree(base, ignore_errors=True)
