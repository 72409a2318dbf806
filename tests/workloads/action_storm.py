"""Many threads, each running many nested Lightning actions at once (issue 20,
point 2): every generator of Lightning's real Profiler.profile is allocated
while others are, so some land at the end of a fresh allocator page.  Runs
without torch, so every CPython on the machine can run it.

Prints READY, waits for --wait-file, starts --threads threads together (new
threads, after the attach), each running --pairs actions as outer/inner
pairs (--pairs / 2 of each), then prints a JSON line with the expected counts.

With --fork-children N (point 8, a fork storm under --children) the parent
instead forks N children as fast as it can, each running --pairs actions on
--threads threads, and the JSON line gives the expected counts per child pid.
"""
import argparse
import json
import os
import sys
import threading
import time

if os.environ.get("LT_LIGHTNING_WHEEL") == "lightning":
    from lightning.pytorch.profilers.base import PassThroughProfiler
else:
    from pytorch_lightning.profilers.base import PassThroughProfiler


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wait-file")
    ap.add_argument("--threads", type=int, default=200)
    ap.add_argument("--pairs", type=int, default=2000, help="actions per thread (outer + inner)")
    ap.add_argument("--fork-children", type=int, default=0)
    args = ap.parse_args()
    prof = PassThroughProfiler()
    print("READY", os.getpid(), flush=True)
    if args.wait_file:
        while not os.path.exists(args.wait_file):
            time.sleep(0.01)
    if args.fork_children:
        return fork_storm(prof, args)
    run_threads(prof, args.threads, args.pairs)
    n = args.threads * (args.pairs // 2)
    print("RESULT " + json.dumps({"counts": {"storm_outer": n, "storm_inner": n},
                                  "version": list(sys.version_info[:2])}), flush=True)
    return 0


def fork_storm(prof, args):
    children = []
    for _ in range(args.fork_children):
        pid = os.fork()
        if pid == 0:
            run_threads(prof, args.threads, args.pairs)
            os._exit(0)
        children.append(pid)
    failed = sum(os.waitpid(pid, 0)[1] != 0 for pid in children)
    n = args.threads * (args.pairs // 2)
    print("RESULT " + json.dumps({"children": {str(pid): {"storm_outer": n, "storm_inner": n} for pid in children},
                                  "failed": failed}), flush=True)
    return 0


def run_threads(prof, nthreads, pairs):
    go = threading.Barrier(nthreads)

    def worker():
        go.wait()
        for _ in range(pairs // 2):
            with prof.profile("storm_outer"):
                with prof.profile("storm_inner"):
                    pass

    threads = [threading.Thread(target=worker) for _ in range(nthreads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    sys.exit(main())
