"""A torchrun-like launcher: after --wait-file appears, starts N worker
processes (fork + exec of a new python) with RANK / LOCAL_RANK / WORLD_SIZE
in their environment, waits for them, exits with the first failure."""
import argparse
import os
import subprocess
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--wait-file")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    print("READY", os.getpid(), flush=True)
    while args.wait_file and not os.path.exists(args.wait_file):
        time.sleep(0.01)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    procs = []
    for rank in range(args.nproc):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(args.nproc))
        procs.append(subprocess.Popen(cmd, env=env))
    rcs = [p.wait() for p in procs]
    print("LAUNCHER_DONE", rcs, flush=True)
    return next((rc for rc in rcs if rc), 0)


if __name__ == "__main__":
    sys.exit(main())
