"""Stack shapes that stress the sampler: a deep recursion through C (each
level is a C-level evaluation: a shim frame on 3.12+), and threads that are
started and end all the time (their last switch-out is not blocking), and
two pure-Python threads contending for the GIL.
Prints READY, waits for --wait-file, runs --seconds."""
import argparse
import os
import threading
import time


def deep(n, until):
    if n == 0:
        x = 0
        while time.perf_counter() < until:
            x += 1
        return x
    return list(map(lambda k: deep(k, until), [n - 1]))[0]  # through C: map()


def churn(until):
    while time.perf_counter() < until:
        t = threading.Thread(target=sum, args=(range(1000),))
        t.start()
        t.join()


def contend(until):
    # Two pure-Python threads: each holds the GIL for its switch interval,
    # then waits for the other (off-CPU, blocked on the GIL).
    blocked, runq = [], []

    def spin():
        start = time.perf_counter()
        x = 0
        while time.perf_counter() < until:
            x += 1
        # The truth the test checks against: this thread's time neither on
        # a CPU nor waiting for one (schedstat: CPU ns, run-queue wait ns),
        # i.e. blocked (on the GIL).  A busy machine makes it run-queue wait.
        with open("/proc/thread-self/schedstat") as f:
            cpu_ns, wait_ns = (int(v) for v in f.read().split()[:2])
        blocked.append(time.perf_counter() - start - (cpu_ns + wait_ns) / 1e9)
        runq.append(wait_ns / 1e9)
    threads = [threading.Thread(target=spin, name=f"spin{i}") for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"BLOCKED {sum(blocked):.6f} RUNQ {sum(runq):.6f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wait-file")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--depth", type=int, default=150)
    ap.add_argument("--mode", choices=["deep", "churn", "gil"], default="deep")
    args = ap.parse_args()
    print("READY", flush=True)
    while args.wait_file and not os.path.exists(args.wait_file):
        time.sleep(0.01)
    until = time.perf_counter() + args.seconds
    {"deep": lambda: deep(args.depth, until), "churn": lambda: churn(until), "gil": lambda: contend(until)}[args.mode]()
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
