"""A Lightning DDP fit on CPU (gloo) with one deliberately slow rank: the
straggler the cluster summary must name.

usage: ddp_straggler.py GO_FILE STEPS DEVICES NUM_NODES
Env: SLOW_RANK, SLOW_S (the slow rank sleeps SLOW_S in every training_step),
SLOW_FROM (from that batch index on; default 0: every step); HANG_AT, HANG_S
(the slow rank also sleeps HANG_S once, in held_back(), at that batch
index: the whole job stalls at the next gradient all-reduce).
Ranks come from the environment as Lightning reads it (RANK/WORLD_SIZE for
the plain launcher, SLURM_PROCID/SLURM_NTASKS under srun).  Prints
"READY <rank> <pid>", waits for GO_FILE, trains, prints "FIT_DONE <rank>".
"""
import os
import sys
import time

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

go, steps, devices, num_nodes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
slow_rank, slow_s = int(os.environ["SLOW_RANK"]), float(os.environ["SLOW_S"])
slow_from = int(os.environ.get("SLOW_FROM", "0"))
hang_at, hang_s = int(os.environ.get("HANG_AT", "-1")), float(os.environ.get("HANG_S", "0"))
rank = os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0"))


def held_back(seconds):
    time.sleep(seconds)  # every other rank waits for this one in the next all-reduce


class Model(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(32, 2)

    def training_step(self, batch, batch_idx):
        if self.global_rank == slow_rank and batch_idx >= slow_from:
            time.sleep(slow_s)  # the straggler: everyone else waits at the all-reduce
        if self.global_rank == slow_rank and batch_idx == hang_at:
            held_back(hang_s)
        return self.net(batch[0]).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


torch.manual_seed(0)
torch.set_num_threads(1)
data = DataLoader(TensorDataset(torch.randn(8 * steps, 32)), batch_size=8)
print("READY", rank, os.getpid(), flush=True)
while not os.path.exists(go):
    time.sleep(0.01)
trainer = pl.Trainer(accelerator="cpu", devices=devices, num_nodes=num_nodes, strategy="ddp", max_epochs=1,
                     logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                     use_distributed_sampler=False)
trainer.fit(Model(), data)
print("FIT_DONE", rank, flush=True)
# As torch asks: without it, gloo's worker threads can still hold work at
# interpreter shutdown and the process may abort with "terminate called
# without an active exception" (pytorch/pytorch#190489), with or without a
# tracer attached: seen once here in the Slurm test, after FIT_DONE.
if torch.distributed.is_initialized():
    torch.distributed.destroy_process_group()
