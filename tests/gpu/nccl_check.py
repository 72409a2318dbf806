"""GPU-machine check for issue 16's NCCL parts (not part of CI: CI has no GPU).

Written 2026-12-02 without a GPU; first run on an H200 on 2026-12-04
(docs/benchmarks.md). Run it through the device tool when a task has one:
    here:   make static bridge     (build/ltrace-bpf-static, build/libltrace-bridge.so)
    there:  python3 tests/gpu/nccl_check.py     (LT=path, PY=python)

A running job with a world-size-1 NCCL process group (one GPU) issues, from a
start file, ROUNDS of: dist.all_reduce of float32 [1 Mi] (4 MiB), dist.broadcast
of bfloat16 [4096], dist.all_gather_into_tensor of float16 [8192].  ltrace-bpf
attaches before the start (`--report comm`, the bridge injected by ptrace for
CUPTI) and must show:
  c10d: all_reduce / broadcast / all_gather_into_tensor, ROUNDS calls each,
        bytes exact (ProcessGroupNCCL's methods in libtorch_cuda);
  NCCL: ncclAllReduce / ncclBroadcast / ncclAllGather, ROUNDS calls each, counts
        and types exact (an in-place broadcast is ncclBcast); the communicator's
        size 1 (the job creates it lazily, at the first collective after the
        start), kept past destroy_process_group();
  kernels: every kernel joined to an NCCL call is named nccl*.
What a single GPU cannot show: with one rank, NCCL moves no data between
devices, and for an in-place collective it launches no kernel at all (one
rank's all-reduce is the identity), so GPU times, algbw and busbw may stay
'-'; the script reports how many calls were timed but does not require any.
Nor can one GPU show a straggler or a hang across ranks (the gloo tests do).
Prints one line per check and a verdict line: NCCL_CHECK ok=<n>/<n>.
"""
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LT = os.environ.get("LT", os.path.join(ROOT, "build", "ltrace-bpf-static"))
PY = os.environ.get("PY", sys.executable)
ROUNDS = 50

JOB = r"""
import os, sys, time, torch, torch.distributed as dist
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("PORT", "29561"))
torch.cuda.set_device(0)
# no device_id: the communicator is then made lazily, at the first collective, after the attach
dist.init_process_group("nccl", rank=0, world_size=1)
a = torch.ones(1 << 20, device="cuda")
b = torch.ones(4096, device="cuda", dtype=torch.bfloat16)
g_in = torch.ones(8192, device="cuda", dtype=torch.float16)
g_out = torch.empty(8192, device="cuda", dtype=torch.float16)
print("READY", os.getpid(), flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
for _ in range(int(sys.argv[2])):
    dist.all_reduce(a)
    dist.broadcast(b, 0)
    dist.all_gather_into_tensor(g_out, g_in)
torch.cuda.synchronize()
print("SUM", float(a.sum()), float(b.float().sum()), float(g_out.float().sum()), flush=True)
dist.destroy_process_group()
print("DONE", flush=True)
"""


def main():
    results = []

    def check(name, ok, detail=""):
        results.append(ok)
        print(("OK   " if ok else "FAIL ") + name + (": " + detail if detail else ""), flush=True)

    tmp = tempfile.mkdtemp(prefix="nccl-check-")
    prog, go = os.path.join(tmp, "job.py"), os.path.join(tmp, "go")
    open(prog, "w").write(JOB)
    log = open(os.path.join(tmp, "job.log"), "w")
    job = subprocess.Popen([PY, prog, go, str(ROUNDS)], stdout=log, stderr=subprocess.STDOUT)
    for _ in range(1200):
        if "READY" in open(os.path.join(tmp, "job.log")).read():
            break
        time.sleep(0.1)
    lt_err = open(os.path.join(tmp, "lt.err"), "w")
    trace = os.path.join(tmp, "comm.ltrace")
    lt = subprocess.Popen([LT, "--pid", str(job.pid), "-v", "--report", "comm,gpu", "-o", trace], stdout=subprocess.PIPE,
                          stderr=lt_err, text=True)
    for _ in range(600):
        if "NCCL API functions" in open(os.path.join(tmp, "lt.err")).read():
            break
        time.sleep(0.1)
    time.sleep(2)  # the injected bridge subscribes to CUPTI within ~100 ms
    open(go, "w").close()
    rc = job.wait(timeout=300)
    out, _ = lt.communicate(timeout=120)
    print(out)
    print(open(os.path.join(tmp, "lt.err")).read()[-3000:])
    print(open(os.path.join(tmp, "job.log")).read()[-2000:])
    # For diagnosis: the records by kind, and the first NCCL ones.
    dump = os.path.join(tmp, "comm.dump")
    subprocess.run([LT, "report", trace, "--dump", dump], capture_output=True)
    if os.path.exists(dump):
        lines = open(dump, errors="replace").read().splitlines()
        kinds = {}
        for line in lines:
            cells = line.split()
            if len(cells) > 2:
                kinds[cells[2]] = kinds.get(cells[2], 0) + 1
        print("records by kind:", kinds)
        print("\n".join([line for line in lines if " nccl" in line][:12]))
    check("job finished", rc == 0, f"rc {rc}")
    check("ltrace-bpf finished", lt.returncode == 0, f"rc {lt.returncode}")

    c10d = {}
    for line in out.split("NCCL calls (", 1)[0].splitlines():
        cells = line.split()
        if len(cells) >= 6 and cells[0] in ("all_reduce", "broadcast", "all_gather_into_tensor"):
            c10d[cells[0]] = (cells[1], cells[4])
    check("c10d all_reduce", c10d.get("all_reduce") == (str(4 << 20), str(ROUNDS)), str(c10d))
    check("c10d broadcast", c10d.get("broadcast") == ("8192", str(ROUNDS)), str(c10d))
    check("c10d all_gather_into_tensor", c10d.get("all_gather_into_tensor") == ("16384", str(ROUNDS)), str(c10d))

    nccl = {}
    section = out.split("NCCL calls (", 1)[1] if "NCCL calls (" in out else ""
    for line in section.splitlines():
        cells = line.split()
        if len(cells) == 11 and cells[0].startswith("nccl") and cells[1].isdigit():
            nccl[cells[0]] = cells[1:]
    # an in-place broadcast is ncclBcast (torch 2.x) or ncclBroadcast
    want = {"ncclAllReduce": (str(4 << 20), str(1 << 20), "float32"), "ncclBroadcast": ("8192", "4096", "bfloat16"),
            "ncclAllGather": ("16384", "8192", "float16")}
    for fn, (size, count, dtype) in want.items():
        row = nccl.get(fn) or (nccl.get("ncclBcast") if fn == "ncclBroadcast" else None)
        check(fn, bool(row) and row[:3] == [size, count, dtype] and row[3] == str(ROUNDS), str(row))
    timed = {fn: row[5] for fn, row in nccl.items()}
    print("calls timed by their NCCL kernels (not required with one rank):", timed)
    # The job makes its communicator at the first collective, after the
    # attach: its size is seen (and kept past destroy_process_group()).
    m = re.search(r"comm 0: \d+ calls, (\d+) ranks?", section)
    check("communicator size", bool(m) and m.group(1) == "1", m.group(0) if m else "size not seen")
    # If NCCL ran kernels at all (the GPU tables list nccl* kernels), the
    # ungrouped calls must have been joined to them.
    ran = "ncclDevKernel" in out or "ncclKernel" in out
    check("NCCL kernels joined to their calls", not ran or any(t != "0" for t in timed.values()),
          f"nccl kernels ran: {ran}; timed: {timed}")
    print(f"NCCL_CHECK ok={sum(results)}/{len(results)}")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
