"""GPU-machine check for issue 22's CUDA parts (not part of CI: CI has no GPU).

Written 2026-12-02 without a GPU; first run on an H200 on 2026-12-04
(docs/benchmarks.md). Run it through the device tool when a task has one:
    here:   make static bridge     (build/ltrace-bpf-static, build/libltrace-bridge.so)
    there:  python3 tests/gpu/compile_check.py     (LT=path, PY=python)

A CUDA job compiles an MLP with torch.compile(mode="reduce-overhead")
(inductor with cudagraph trees: after a few warm-up runs each step replays
a CUDA graph inside the compiled region), warms it before a start file,
and then runs STEPS steps; ltrace-bpf attaches before the start with
`--report ops` and is stopped (Ctrl-C) when the job says the steps are
done. Then, in a second phase of the same process, the job runs STEPS more
steps under torch.profiler (CPU + CUDA), which counts its cudaGraphLaunch
calls and its GPU kernels. Checks:
  the region row's calls           = STEPS
  CUDA graph replays in the region = the profiler's cudaGraphLaunch count
  kernels of those replays         = the profiler's CUDA kernel events less
                                     its kernels launched one by one
and that no replay is outside the region. Prints one line per check and a
verdict line: COMPILE_CHECK ok=<n>/<n>.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LT = os.environ.get("LT", os.path.join(ROOT, "build", "ltrace-bpf-static"))
PY = os.environ.get("PY", sys.executable)
STEPS = int(os.environ.get("STEPS", "50"))

JOB = r"""
import json, os, sys, time, torch
go, go2, out, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
dev = torch.device("cuda", 0)
net = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 64)).to(dev)
model = torch.compile(net, mode="reduce-overhead")
x = torch.randn(64, 256, device=dev)
with torch.no_grad():
    for _ in range(5):                      # compile, warm-up, record the graph
        model(x)
torch.cuda.synchronize()
print("READY", os.getpid(), flush=True)
while not os.path.exists(go):
    time.sleep(0.01)
acc = 0.0
with torch.no_grad():
    for _ in range(steps):
        acc += float(model(x).sum())
torch.cuda.synchronize()
print("STEPS_DONE", flush=True)
while not os.path.exists(go2):              # the tracer has detached: CUPTI is free
    time.sleep(0.01)
# The same steps under torch.profiler: its own count of replays and kernels.
from torch.profiler import ProfilerActivity, profile

from gpu_check_common import wait_for
with torch.no_grad(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for _ in range(steps):
        model(x)
    torch.cuda.synchronize()
launches = sum(e.count for e in prof.key_averages() if e.key.startswith("cudaGraphLaunch"))
kernels = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
              and "memcpy" not in e.name.lower() and "memset" not in e.name.lower())
# Kernels launched one by one (the region's copy of its inputs into the
# graph's static buffers, outside the replay) are not the replays' kernels.
single = sum(e.count for e in prof.key_averages() if e.key.startswith(("cudaLaunchKernel", "cuLaunchKernel")))
json.dump({"graph_launches": launches, "gpu_events": kernels - single, "all_kernels": kernels,
           "single_launches": single}, open(out, "w"))
print("DONE", acc, flush=True)
"""


def main():
    work = tempfile.mkdtemp(prefix="lt-gpu-compile-")
    go, go2, ref, log = (os.path.join(work, n) for n in ("go", "go2", "ref.json", "job.log"))
    with open(log, "w") as f:
        job = subprocess.Popen([PY, "-c", JOB, go, go2, ref, str(STEPS)], stdout=f, stderr=subprocess.STDOUT)
    if not wait_for(log, "READY", job, 600):
        print("job did not start:", open(log).read()[-3000:])
        return 1
    lt_out, lt_err = os.path.join(work, "lt.out"), os.path.join(work, "lt.err")
    with open(lt_out, "w") as o, open(lt_err, "w") as e:
        lt = subprocess.Popen([LT, "--pid", str(job.pid), "-v", "--report", "ops", "--row-limit", "30", "-o",
                               os.path.join(work, "compile.ltrace")],
                              stdout=o, stderr=e)
    if not wait_for(lt_err, "attached", lt, 120):
        print("ltrace-bpf did not attach:", open(lt_err).read()[-2000:])
        job.kill()
        return 1
    open(go, "w").close()
    if not wait_for(log, "STEPS_DONE", job, 600):
        print("job did not finish its steps:", open(log).read()[-3000:])
        lt.kill()
        return 1
    lt.send_signal(signal.SIGINT)  # detach and report; then the job's profiler phase
    print("ltrace-bpf rc", lt.wait(300))
    open(go2, "w").close()
    print("job rc", job.wait(900))
    text = open(lt_out).read()
    print(text[-6000:])
    print(open(lt_err).read()[-2000:])
    dump = os.path.join(work, "compile.dump")
    subprocess.run([LT, "report", os.path.join(work, "compile.ltrace"), "--dump", dump], capture_output=True)
    if os.path.exists(dump):
        kinds = {}
        for line in open(dump, errors="replace"):
            cells = line.split()
            if len(cells) > 2:
                kinds[cells[2]] = kinds.get(cells[2], 0) + 1
        print("records by kind:", kinds)
    want = json.load(open(ref))
    ok = total = 0

    def check(name, good, detail):
        nonlocal ok, total
        total += 1
        ok += bool(good)
        print(f"{'OK  ' if good else 'DIFF'} {name}: {detail}")

    region = re.search(r"Torch-Compiled Region: 0/0 +(\d+)  ", text)
    check("region calls", region and int(region.group(1)) == STEPS, f"ours {region and region.group(1)}, {STEPS}")
    replays = re.search(r"  Torch-Compiled Region: 0/0 +(\d+) +(\d+)  ([0-9.]+) ms", text)
    check("CUDA graph replays in the region", replays and int(replays.group(1)) == want["graph_launches"],
          f"ours {replays and replays.group(1)}, torch.profiler's cudaGraphLaunch {want['graph_launches']}")
    check("kernels of the replays", replays and int(replays.group(2)) == want["gpu_events"],
          f"ours {replays and replays.group(2)}, torch.profiler's CUDA kernels {want['all_kernels']} less its "
          f"{want['single_launches']} single launches: {want['gpu_events']}")
    check("no replay outside the region", "outside compiled regions" not in text, "")
    print(f"COMPILE_CHECK ok={ok}/{total} (work dir {work})")
    return 0 if ok == total else 1


if __name__ == "__main__":
    sys.exit(main())
