"""Ranks that loop all_reduce (torch.distributed, gloo, CPU) until told to
stop; on request one rank blocks in its own code before the next
all_reduce, and the others wait for it there: the hang `cluster ... dump`
must name.

usage: allreduce_hang.py CTL_DIR
Ranks from SLURM_PROCID/SLURM_NTASKS (srun) or RANK/WORLD_SIZE; MASTER_ADDR
and MASTER_PORT from the environment.  Prints "READY <rank> <pid>" after the
first all_reduce.  Files in CTL_DIR:
  hang    written by the test: its text is the rank that blocks; that rank
          then reads CTL_DIR/feed (a FIFO, opened read-write so the open
          does not block: the read does) in load_batch, printing
          "BLOCKING <rank> <line> <step>" first; every other rank prints
          "WAITING <rank> <step>" just before the all_reduce that waits for
          it; a byte written there lets it go on, and each rank prints
          "PASSED <rank> <step>" once that all_reduce completes;
  stop    every rank leaves the loop at the next all_reduce and exits.
"""
import os
import sys
import time

import torch
import torch.distributed as dist

ctl = sys.argv[1]
rank = int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0")))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("SLURM_NTASKS", "1")))
dist.init_process_group("gloo", rank=rank, world_size=world)
torch.set_num_threads(1)


def load_batch(feed):
    fd = os.open(feed, os.O_RDWR)
    try:
        return os.read(fd, 1)  # READ_LINE: blocks until the test writes a byte
    finally:
        os.close(fd)


def hang_rank():
    try:
        return int(open(os.path.join(ctl, "hang")).read().strip())
    except (OSError, ValueError):
        return -1


READ_LINE = next(i for i, l in enumerate(open(__file__), 1) if "# READ_LINE" in l)
t = torch.ones(16)
step = 0
blocked = False
waiting_said = passed_said = False
while True:
    # Every rank sees the stop and the hang request at the same step: the
    # flags are reduced with MAX (no request: -1 everywhere).
    flags = torch.tensor([float(os.path.exists(os.path.join(ctl, "stop"))), float(hang_rank())])
    dist.all_reduce(flags, op=dist.ReduceOp.MAX)
    if flags[0].item() > 0:
        break
    hang = int(flags[1].item())
    if not blocked and hang == rank:
        blocked = True
        print("BLOCKING", rank, READ_LINE, step, flush=True)
        load_batch(os.path.join(ctl, "feed"))
    elif hang >= 0 and not waiting_said:
        # the test waits for this line: the next call waits for the blocked rank
        waiting_said = True
        print("WAITING", rank, step, flush=True)
    dist.all_reduce(t)
    if hang >= 0 and not passed_said:
        # once the blocked rank is let go, every rank gets past that step
        passed_said = True
        print("PASSED", rank, step, flush=True)
    t.fill_(1)
    if step == 0:
        print("READY", rank, os.getpid(), flush=True)
    step += 1
    time.sleep(0.005)
print("DONE", rank, step, flush=True)
dist.destroy_process_group()
