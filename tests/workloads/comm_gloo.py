"""A 2-rank gloo job on this machine issuing a known set of c10d calls.

usage: comm_gloo.py GO_FILE ROUNDS OUT_DIR [--profile]
The launcher (this script without RANK in its environment) starts two ranks
as its children (RANK=0/1, tcp://127.0.0.1) and waits for them.  Each rank
creates its process group, prints "READY <rank> <pid>", waits for GO_FILE,
then issues per round, in this order:
  all_reduce   float32 [1000]         (4000 B)
  all_reduce   float32 []  (0-dim)    (4 B)
  broadcast    int64   [16], src 0    (128 B)
  all_gather   float64 [256] input    (2048 B)
  barrier
  send (rank 0) / recv (rank 1) int32 [10] (40 B)
and writes OUT_DIR/rank<r>.txt: a checksum of every result (the job's
results must not change under tracing) and, with --profile, how many of
each c10d op torch.profiler recorded.  Prints "DONE <rank>".
Env SLEEP_RANK, SLEEP_S: that rank sleeps SLEEP_S seconds before the first
all_reduce of every round, so the other rank blocks in it that long.
"""
import os
import socket
import subprocess
import sys
import time

go, rounds, out_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
profile = "--profile" in sys.argv[4:]
sleep_rank, sleep_s = int(os.environ.get("SLEEP_RANK", "-1")), float(os.environ.get("SLEEP_S", "0"))

if "RANK" not in os.environ:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ranks = [subprocess.Popen([sys.executable] + sys.argv,
                              env=dict(os.environ, RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                                       MASTER_PORT=str(port))) for r in range(2)]
    sys.exit(max(p.wait() for p in ranks))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

rank = int(os.environ["RANK"])
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['MASTER_PORT']}", rank=rank,
                        world_size=2)
# One write per line: both ranks share the log, and under python -u (or
# PYTHONUNBUFFERED) print() writes each piece apart, so lines interleave.
sys.stdout.write(f"READY {rank} {os.getpid()}\n")
sys.stdout.flush()
while not os.path.exists(go):
    time.sleep(0.01)


def one_round(i):
    g = torch.Generator().manual_seed(1000 * i + rank)
    a = torch.rand(1000, generator=g)
    if rank == sleep_rank:
        time.sleep(sleep_s)
    dist.all_reduce(a)
    s = torch.tensor(float(rank + i))
    dist.all_reduce(s)
    b = torch.arange(16, dtype=torch.int64) * (i + 1) if rank == 0 else torch.zeros(16, dtype=torch.int64)
    dist.broadcast(b, src=0)
    x = torch.rand(256, dtype=torch.float64, generator=g)
    parts = [torch.empty(256, dtype=torch.float64) for _ in range(2)]
    dist.all_gather(parts, x)
    dist.barrier()
    p = torch.arange(10, dtype=torch.int32) + i if rank == 0 else torch.zeros(10, dtype=torch.int32)
    if rank == 0:
        dist.send(p, dst=1)
    else:
        dist.recv(p, src=0)
    return float(a.double().sum() + s.double() + b.double().sum() + sum(t.sum() for t in parts) + p.double().sum())


counts = {}
if profile:
    from torch.profiler import ProfilerActivity
    with torch.profiler.profile(activities=[ProfilerActivity.CPU]) as prof:
        checksum = sum(one_round(i) for i in range(rounds))
    for e in prof.events():
        if e.name.startswith("c10d::"):
            counts[e.name] = counts.get(e.name, 0) + 1
else:
    checksum = sum(one_round(i) for i in range(rounds))
with open(os.path.join(out_dir, f"rank{rank}.txt"), "w") as f:
    f.write(f"checksum {checksum!r}\n")
    for name, n in sorted(counts.items()):
        f.write(f"{name} {n}\n")
dist.destroy_process_group()
sys.stdout.write(f"DONE {rank}\n")
sys.stdout.flush()
