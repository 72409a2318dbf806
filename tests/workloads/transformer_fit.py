"""A small Transformer (pytorch_lightning.demos) fitted on random tokens, for
comparing our Advanced report with Lightning's AdvancedProfiler in the same
process.  No download: WikiText2 is replaced by random token blocks.

Usage: python transformer_fit.py [--wait-file PATH] [--steps N]
       [--profiler advanced --dirpath D --filename F]
Prints READY once imports are done, then waits for --wait-file.
"""
import argparse
import os
import time

try:
    import lightning.pytorch as pl
    from lightning.pytorch.demos import LightningTransformer
    from lightning.pytorch.profilers import AdvancedProfiler
except ImportError:  # the pytorch-lightning wheel
    import pytorch_lightning as pl
    from pytorch_lightning.demos import LightningTransformer
    from pytorch_lightning.profilers import AdvancedProfiler
import torch
from torch.utils.data import DataLoader, TensorDataset

VOCAB = 512
BLOCK = 32


class RandomTokens(LightningTransformer):
    def __init__(self, blocks):
        super().__init__(vocab_size=VOCAB)
        g = torch.Generator().manual_seed(0)
        data = torch.randint(0, VOCAB, (blocks, BLOCK + 1), generator=g)
        self.data = TensorDataset(data[:, :-1], data[:, 1:])

    def prepare_data(self):
        pass  # nothing to download

    def train_dataloader(self):
        return DataLoader(self.data, batch_size=8)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wait-file")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--profiler", default="none", choices=["none", "advanced"])
    ap.add_argument("--dirpath")
    ap.add_argument("--filename")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    profiler = AdvancedProfiler(dirpath=args.dirpath, filename=args.filename) if args.profiler == "advanced" else None
    model = RandomTokens(args.steps * 8)
    print("READY", os.getpid(), flush=True)
    if args.wait_file:
        while not os.path.exists(args.wait_file):
            time.sleep(0.01)
    trainer = pl.Trainer(max_epochs=1, accelerator="cpu", devices=1, profiler=profiler, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         num_sanity_val_steps=0, limit_val_batches=0)
    t0 = time.perf_counter()
    trainer.fit(model)
    print(f"FIT_DONE steps={trainer.global_step} seconds={time.perf_counter() - t0:.3f}", flush=True)


if __name__ == "__main__":
    main()
