"""Twenty Lightning actions in the first milliseconds of a process: a job
that `run`, --all and --children must see from its first instruction.
Runs PassThroughProfiler.profile("PREFIX_NN") for NN in 00..19 as soon as
Lightning's profiler module is imported, then exits (PREFIX: $EARLY_PREFIX,
else "early").  Needs no torch
(tests/integration/lightning_site.py builds the site for PYTHONPATH)."""
import os

if os.environ.get("LT_LIGHTNING_WHEEL") == "lightning":
    from lightning.pytorch.profilers.base import PassThroughProfiler
else:
    from pytorch_lightning.profilers.base import PassThroughProfiler

prof = PassThroughProfiler()
prefix = os.environ.get("EARLY_PREFIX", "early")
for i in range(20):
    with prof.profile("%s_%02d" % (prefix, i)):
        pass
print("EARLY_DONE", os.getpid(), flush=True)
