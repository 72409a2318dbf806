"""A process making a known set of NCCL API calls, without a GPU.

usage: nccl_api.py GO_FILE ROUNDS OUT_FILE
Imports torch (its CUDA build maps libtorch_cuda and the libnccl of PyPI's
nvidia-nccl wheel, as a CUDA job does), opens that same libnccl (found in
/proc/self/maps), prints "READY <pid>", waits for GO_FILE, then calls per
round, in this order:
  ncclCommInitRank(&comm, 4, id, 3)          (fails: no CUDA device)
  ncclAllReduce       1000 float32  sum      (4000 B), stream 0x5151 (its 7th argument: on the stack)
  ncclGroupStart; ncclSend 10 int32 peer 1; ncclRecv 10 int32 peer 1; ncclGroupEnd
  ncclReduceScatter    256 bfloat16 max      (512 B)
  ncclAllGather        128 float64           (1024 B)
  ncclBcast             16 int64  root 0     (128 B)
  ncclReduce            33 float16 min root 1 (66 B), stream 0x5252 (its 8th argument)
With no communicator (NULL), NCCL refuses each data call with
ncclInvalidArgument (4) before touching the device or the stream: these are real entries
of the real library, the only thing a CPU-only machine can make of them.
Writes OUT_FILE: the return codes seen (must be the same traced or not).
"""
import collections
import ctypes
import os
import sys
import time

import torch  # noqa: F401  (maps libnccl)

go, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
path = next(line.split()[-1] for line in open("/proc/self/maps") if "/libnccl.so" in line)
lib = ctypes.CDLL(path)
P, S, I = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def fn(name, *args):
    f = getattr(lib, name)
    f.argtypes, f.restype = list(args), ctypes.c_int
    return f


init = fn("ncclCommInitRank", P, I, UniqueId, I)
all_reduce = fn("ncclAllReduce", P, P, S, I, I, P, P)
send = fn("ncclSend", P, S, I, I, P, P)
recv = fn("ncclRecv", P, S, I, I, P, P)
reduce_scatter = fn("ncclReduceScatter", P, P, S, I, I, P, P)
all_gather = fn("ncclAllGather", P, P, S, I, P, P)
bcast = fn("ncclBcast", P, S, I, I, P, P)
reduce = fn("ncclReduce", P, P, S, I, I, I, P, P)
group_start, group_end = fn("ncclGroupStart"), fn("ncclGroupEnd")

print("READY", os.getpid(), flush=True)
while not os.path.exists(go):
    time.sleep(0.01)
codes = collections.Counter()
comm = P(0)
for _ in range(rounds):
    codes["init", init(ctypes.byref(comm), 4, UniqueId(), 3)] += 1
    codes["all_reduce", all_reduce(None, None, 1000, 7, 0, None, P(0x5151))] += 1
    group_start()
    codes["send", send(None, 10, 2, 1, None, None)] += 1
    codes["recv", recv(None, 10, 2, 1, None, None)] += 1
    group_end()
    codes["reduce_scatter", reduce_scatter(None, None, 256, 9, 2, None, None)] += 1
    codes["all_gather", all_gather(None, None, 128, 8, None, None)] += 1
    codes["bcast", bcast(None, 16, 4, 0, None, None)] += 1
    codes["reduce", reduce(None, None, 33, 6, 3, 1, None, P(0x5252))] += 1
    time.sleep(0.002)
with open(out, "w") as f:
    for (name, code), n in sorted(codes.items()):
        f.write(f"{name} {code} {n}\n")
print("DONE", flush=True)
