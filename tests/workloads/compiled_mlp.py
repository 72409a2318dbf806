"""A torch.compile'd MLP (inductor on CPU) for the compile-aware op report.

Compiles (and warms) the model before printing READY, so a tracer attaches
to an already-compiled job, then runs --iters forward steps (no_grad: the
inference graph, one compiled region and its fused kernels per step).
--recompile N: after the steps, N more steps with a new batch size, which
fails Dynamo's shape guard and recompiles while the tracer is attached
(dynamic=False, so the new shape gets its own graph).
--linger SECS: go on (idle) that long before exiting, as a job goes on
after a recompile (what Dynamo recorded is read from the live process).
--graph-break: forward breaks the graph after fc1 (torch._dynamo.graph_break),
so Dynamo runs the rest as a resume function, frame 1.

--profile FILE: run the same steps under torch.profiler (CPU) and write
its key_averages (name -> count, cpu_time_total, self_cpu_time_total in
us) and table as JSON.  Prints a RESULT line (checksum) that must be
identical with and without ltrace-bpf attached.
"""
import argparse
import json
import os
import sys
import time

import torch

GRAPH_BREAK = False


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(256, 512)
        self.fc2 = torch.nn.Linear(512, 256)
        self.fc3 = torch.nn.Linear(256, 64)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        if GRAPH_BREAK:
            torch._dynamo.graph_break()  # the rest runs in a resume function: its own frame and graph
        h = torch.tanh(self.fc2(h)) * 0.5 + h[:, :256].sigmoid()
        return torch.log_softmax(self.fc3(h), dim=1)


def steps(model, x, n):
    acc = 0.0
    with torch.no_grad():
        for _ in range(n):
            acc += float(model(x).sum())
    return acc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wait-file")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--recompile", type=int, default=0)
    ap.add_argument("--profile")
    ap.add_argument("--graph-break", action="store_true")
    ap.add_argument("--linger", type=float, default=0.0)
    ap.add_argument("--start-file", help="wait for this file before anything compiles")
    a = ap.parse_args()
    global GRAPH_BREAK
    GRAPH_BREAK = a.graph_break
    torch.set_num_threads(1)
    torch.manual_seed(1234)
    model = torch.compile(MLP(), dynamic=False)
    x = torch.randn(64, 256)
    x2 = torch.randn(48, 256)
    if a.start_file:
        while not os.path.exists(a.start_file):
            time.sleep(0.01)
    steps(model, x, 2)  # compile graph 0/0 before anyone attaches
    print("READY", os.getpid(), flush=True)
    if a.wait_file:
        while not os.path.exists(a.wait_file):
            time.sleep(0.01)
    t0, c0 = time.perf_counter(), time.process_time()
    if a.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            acc = steps(model, x, a.iters)
        rows = {
            e.key: {"count": e.count, "cpu_time_total": e.cpu_time_total, "self_cpu_time_total": e.self_cpu_time_total}
            for e in prof.key_averages()
        }
        with open(a.profile, "w") as f:
            json.dump({"ops": rows, "table": prof.key_averages().table(sort_by="cpu_time_total", row_limit=-1)}, f)
    else:
        acc = steps(model, x, a.iters)
    acc2 = steps(model, x2, a.recompile) if a.recompile else 0.0
    print("RESULT acc=%.6e acc2=%.6e" % (acc, acc2), flush=True)
    print("SECONDS %.3f" % (time.perf_counter() - t0), flush=True)
    print("CPU_SECONDS %.3f" % (time.process_time() - c0), flush=True)  # every thread's
    time.sleep(a.linger)
    sys.exit(0)


if __name__ == "__main__":
    main()
