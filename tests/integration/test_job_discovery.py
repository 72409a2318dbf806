"""Job identity of each process (PROC_ENV): a torchrun-like launcher in a
"Slurm job" starts two ranks after the attach; the trace says who each rank
is (rank, world size, job id, master, host), live and from the trace file."""
import os
import random
import re
import socket
import subprocess

from conftest import LTRACE, WORKLOADS, wait_for

PY = "/usr/bin/python3.11"


def proc_env_lines(text):
    """pid -> fields of its last proc_env line (a forked child is announced
    again after its exec)."""
    last = {}
    for line in text.splitlines():
        parts = line.split(" ")
        if len(parts) < 3 or parts[2] != "proc_env":
            continue
        pid = int(parts[1].split("/")[0])
        last[pid] = dict(kv.split("=", 1) for kv in parts[3:])
    return last


def test_proc_env_of_launcher_and_ranks(attach):
    token = str(random.randrange(10**9))
    job_id = "999" + token
    env = {"LTRACE_TEST_JOB": token, "SLURM_JOB_ID": job_id, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29555"}
    rank_cmd = [PY, "-c", "import time; time.sleep(1.5)"]
    run = attach([PY, os.path.join(WORKLOADS, "launcher.py"), "--nproc", "2", "--"] + rank_cmd,
                 lt_args=["--children", "-o", "trace.ltrace", "--dump", "events.txt"], env=env)
    assert run.target_rc == 0, run.target_out
    assert run.lt_rc == 0, run.lt_err
    launcher_pid = int(re.search(r"READY (\d+)", run.target_out).group(1))

    live = (run.tmp / "events.txt").read_text()
    envs = proc_env_lines(live)
    host = socket.gethostname()
    ranks = {int(f["rank"]): pid for pid, f in envs.items() if f["rank"] != "-1"}
    assert sorted(ranks) == [0, 1], live
    for rank, pid in ranks.items():
        f = envs[pid]
        assert f["local_rank"] == str(rank) and f["world_size"] == "2", f
        assert f["slurm_job_id"] == job_id, f
        assert f["master_addr"] == "127.0.0.1" and f["master_port"] == "29555", f
        assert f["hostname"] == host, f
        # Right after the process's own PROC_INFO, which has the same labels.
        info = [l for l in live.splitlines() if l.split(" ")[1] == f"{pid}/{pid}" and " proc_info " in l]
        assert info and f"rank={rank} local_rank={rank} world_size=2" in info[-1], info
    # The launcher is in the job too, without a rank.
    assert envs[launcher_pid]["rank"] == "-1" and envs[launcher_pid]["slurm_job_id"] == job_id, envs
    assert envs[launcher_pid]["hostname"] == host
    # Each proc_env line follows a proc_info line of the same process.
    lines = live.splitlines()
    for i, l in enumerate(lines):
        if " proc_env " in l:
            prev = lines[i - 1].split(" ")
            assert prev[2] == "proc_info" and prev[1] == l.split(" ")[1] and prev[0] == l.split(" ")[0], (lines[i - 1], l)

    # The records survive the trace file.
    rep = subprocess.run([LTRACE, "report", "trace.ltrace", "--dump", "replay.txt"], cwd=run.tmp, capture_output=True,
                         text=True, timeout=60)
    assert rep.returncode == 0, rep.stderr
    replay = (run.tmp / "replay.txt").read_text()
    assert [l for l in replay.splitlines() if " proc_env " in l] == [l for l in lines if " proc_env " in l]
    assert proc_env_lines(replay) == envs


def test_job_env_finds_the_job_without_pids(tmp_path):
    """--job-env: the node agent's way in. Every process of the job on this
    machine is found by its environment and followed with its children."""
    token = str(random.randrange(10**9))
    env = dict(os.environ, LTRACE_TEST_JOB=token, RANK="0", WORLD_SIZE="1")
    # The job lives until told to stop (not a fixed 3 s, which a busy
    # machine's attach can outlast).
    stop = tmp_path / "stop"
    script = ("import os, sys, time; print('READY', os.getpid(), flush=True)\n"
              "while not os.path.exists(sys.argv[1]): time.sleep(0.02)")
    out = tmp_path / "job.out"
    job = subprocess.Popen([PY, "-c", script, str(stop)], env=env, stdout=open(out, "w"), stderr=subprocess.STDOUT)
    try:
        wait_for(str(out), "READY", 120, job)
        r = subprocess.run([LTRACE, "--job-env", f"LTRACE_TEST_JOB={token}", "--duration", "1", "--dump",
                            str(tmp_path / "ev.txt"), "-v"], capture_output=True, text=True, timeout=60)
    finally:
        stop.touch()
        job.wait(timeout=30)
    assert r.returncode == 0, r.stderr
    assert "--job-env: 1 process(es) of the job here" in r.stderr
    envs = proc_env_lines((tmp_path / "ev.txt").read_text())
    assert list(envs) == [job.pid] and envs[job.pid]["rank"] == "0", envs
    # Nothing matches: a clear error, exit 3.
    r = subprocess.run([LTRACE, "--job-env", f"LTRACE_TEST_JOB=none-{token}", "--duration", "1"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 3 and "--job-env" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
