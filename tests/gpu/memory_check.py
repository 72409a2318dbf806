"""GPU-machine check for issue 15's CUDA parts (not part of CI: CI has no GPU).

Written 2026-12-02 without a GPU; first run on an H200 on 2026-12-04
(docs/benchmarks.md). Run it through the device tool when a task has one:
    here:   make static            (build/ltrace-bpf-static)
    there:  python3 tests/gpu/memory_check.py     (LT=path, PY=python)

A CUDA job with known allocations (no autograd, one stream) runs from a
start file; ltrace-bpf attaches before the start with
`--profile-memory --report ops,memory --device-stats` and detaches
(SIGINT) once the job has measured, before its exit frees everything. The
job itself records torch.cuda.memory_stats() at the start (after
reset_peak_memory_stats) and at the end. Compared, per key, with what
ltrace-bpf derives from the caching allocator's records (docs/design-memory.md):
  allocated_bytes.all.current  = the job's end value
  allocated_bytes.all.allocated / freed, allocation.all.allocated / freed
                               = end - start (what happened while attached)
  allocated_bytes.all.peak     = the job's peak since the reset (at the start)
  reserved_bytes.all.current   = the job's end value
and the op table's Self CUDA Mem of aten::empty against the bytes the job
allocated with torch.empty (plus the 1 MiB aten::empty inside torch.ones). Prints one line per
check and a verdict line: MEMORY_CHECK ok=<n>/<n>.
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
KEYS = ["allocated_bytes.all.current", "allocated_bytes.all.peak", "allocated_bytes.all.allocated",
        "allocated_bytes.all.freed", "allocation.all.allocated", "allocation.all.freed",
        "reserved_bytes.all.current"]
MIB = 1 << 20

JOB = r"""
import json, os, sys, time, torch

from gpu_check_common import wait_for
go, go2, out = sys.argv[1], sys.argv[2], sys.argv[3]
dev = torch.device("cuda", 0)
torch.empty(1, device=dev)  # CUDA context and allocator up before anyone attaches
torch.cuda.synchronize()
print("READY", os.getpid(), flush=True)
while not os.path.exists(go):
    time.sleep(0.01)
torch.cuda.reset_peak_memory_stats(dev)
start = torch.cuda.memory_stats(dev)
keep = [torch.empty(%(n)d * %(mib)d // 4, dtype=torch.float32, device=dev) for _ in range(%(k)d)]
for i in range(0, len(keep), 2):
    keep[i] = None                       # half of them freed
a = torch.ones(512, 512, device=dev)
for _ in range(10):
    a = a @ a / 512                      # temporaries of 1 MiB each
total = float(a.sum())
torch.cuda.synchronize()
end = torch.cuda.memory_stats(dev)
json.dump({"start": start, "end": end, "empty_bytes": %(k)d * %(n)d * %(mib)d}, open(out, "w"))
print("MEASURED", flush=True)
# The tracer detaches here: what the process frees at its exit is not part
# of what torch.cuda.memory_stats() said at the end.
while not os.path.exists(go2):
    time.sleep(0.01)
print("DONE", total, flush=True)
"""


def ours_stats(text):
    """{key: int} from the --device-stats CUDA allocator block."""
    out = {}
    for key in KEYS:
        m = re.search(r"^\s+" + re.escape(key) + r"\s+(\d+)", text, re.M)
        if m:
            out[key] = int(m.group(1))
    return out


def self_cuda_mem(table, op):
    """Self CUDA Mem of `op` in the first op table that has the column, in bytes."""
    lines = table.splitlines()
    for i, line in enumerate(lines):
        if "Self CUDA Mem" in line and "Name" in line:
            header = re.split(r"\s{2,}", line.strip())
            col = header.index("Self CUDA Mem")
            for row in lines[i + 1:]:
                cells = re.split(r"\s{2,}", row.strip())
                if cells and cells[0] == op and len(cells) > col:
                    # torch 2.x units (B, KB, MB, GB; powers of 1024), torch 1.x's (b, Kb, Mb, Gb)
                    m = re.match(r"(-?[0-9.]+) ([KMG]?[Bb])$", cells[col])
                    if m:
                        return float(m.group(1)) * 1024 ** "BKMG".index(m.group(2)[0].upper())
    return None


def main():
    work = tempfile.mkdtemp(prefix="lt-gpu-mem-")
    go, go2, stats, log = (os.path.join(work, n) for n in ("go", "go2", "stats.json", "job.log"))
    job_src = JOB % {"n": 4, "mib": MIB, "k": 10}
    with open(log, "w") as f:
        job = subprocess.Popen([PY, "-c", job_src, go, go2, stats], stdout=f, stderr=subprocess.STDOUT)
    if not wait_for(log, "READY", job, 300):
        print("job did not start:", open(log).read()[-2000:])
        return 1
    lt_out, lt_err = os.path.join(work, "lt.out"), os.path.join(work, "lt.err")
    with open(lt_out, "w") as o, open(lt_err, "w") as e:
        lt = subprocess.Popen([LT, "--pid", str(job.pid), "-v", "--profile-memory", "--report", "ops,memory",
                               "--device-stats", "--sort-by", "self_cuda_memory_usage", "--row-limit", "20",
                               "-o", os.path.join(work, "mem.ltrace")],
                              stdout=o, stderr=e)
    if not wait_for(lt_err, "attached", lt, 120):
        print("ltrace-bpf did not attach:", open(lt_err).read()[-2000:])
        job.kill()
        return 1
    open(go, "w").close()
    if not wait_for(log, "MEASURED", job, 300):
        print("job did not finish:", open(log).read()[-2000:])
        lt.kill()
        return 1
    lt.send_signal(signal.SIGINT)
    print("ltrace-bpf rc", lt.wait(300))
    open(go2, "w").close()
    print("job rc", job.wait(300))
    text = open(lt_out).read()
    print(text[:6000])
    print(open(lt_err).read()[-2000:])
    ref = json.load(open(stats))
    s, e = ref["start"], ref["end"]
    want = {
        "allocated_bytes.all.current": e["allocated_bytes.all.current"],
        "allocated_bytes.all.peak": e["allocated_bytes.all.peak"],
        "allocated_bytes.all.allocated": e["allocated_bytes.all.allocated"] - s["allocated_bytes.all.allocated"],
        "allocated_bytes.all.freed": e["allocated_bytes.all.freed"] - s["allocated_bytes.all.freed"],
        "allocation.all.allocated": e["allocation.all.allocated"] - s["allocation.all.allocated"],
        "allocation.all.freed": e["allocation.all.freed"] - s["allocation.all.freed"],
        "reserved_bytes.all.current": e["reserved_bytes.all.current"],
    }
    got = ours_stats(text)
    dump = os.path.join(work, "mem.dump")
    subprocess.run([LT, "report", os.path.join(work, "mem.ltrace"), "--dump", dump], capture_output=True)
    if os.path.exists(dump):
        mem = [line for line in open(dump, errors="replace") if " mem " in line]
        print(f"{len(mem)} MEM records in the trace:")
        print("".join(mem[:80]))
    ok = total = 0
    for key in KEYS:
        total += 1
        good = got.get(key) == want[key]
        ok += good
        print(f"{'OK  ' if good else 'DIFF'} {key}: ours {got.get(key)} torch.cuda.memory_stats {want[key]}")
    total += 1
    empty = self_cuda_mem(text, "aten::empty")
    # The job's torch.empty calls, plus the aten::empty inside torch.ones
    # (1 MiB); the table prints 2 decimals of MB.
    lo, hi = ref["empty_bytes"], ref["empty_bytes"] + MIB
    good = empty is not None and lo - 0.01 * MIB <= empty <= hi + 0.01 * MIB
    ok += good
    print(f"{'OK  ' if good else 'DIFF'} aten::empty Self CUDA Mem: ours {empty}, the job's empties {lo} "
          f"(+ {MIB} from torch.ones' own)")
    print(f"MEMORY_CHECK ok={ok}/{total} (work dir {work})")
    return 0 if ok == total else 1


if __name__ == "__main__":
    sys.exit(main())
