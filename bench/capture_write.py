"""Records lost while `ltrace-bpf watch` writes a big capture (issue 33).

usage: .venv/bin/python bench/capture_write.py [--rounds 2] [--before 40] [--after 10]
       [--exe-a OLD_BINARY] [--exe-b NEW_BINARY] [--two]

A Lightning fit of short steps (tests/workloads/watch_job.py, --step-s
0.002: actions at hundreds a second) is watched (`watch --pid P --triggers
request`); after --before + 5 seconds a capture is asked for
(`watch --capture-now`): the ring's last --before seconds plus --after
seconds escalated (ops through the op observer, full-rate stacks), written
once that window ends. Per run: the records the capture holds, the records
the watcher lost (its last line: the ring buffer full while nothing drained
it), and the seconds from the window's end to the "wrote" line (the write,
as the watcher's stderr shows it; an upper bound within a tick).
--two: two such jobs watched; the second one's capture is asked for 3 s
before the first one's window ends, so the first one's write runs while
the second is escalated (its ops through the op observer, whose buffer
drops what is not read in time: counted from the captures' report.log).

With --exe-a and --exe-b the two binaries run alternately, --rounds each,
on the same machine in one invocation (side by side). Prints one line per
run and the medians per binary.
"""
import argparse
import glob
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = os.path.join(ROOT, ".venv", "bin", "python")
JOB = os.path.join(ROOT, "tests", "workloads", "watch_job.py")


def start_job(go):
    job = subprocess.Popen([PY, JOB, "--wait-file", go, "--steps", "1000000", "--step-s", "0.002"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in job.stdout:
        if line.strip() == "READY":
            break
    threading.Thread(target=job.stdout.read, daemon=True).start()
    return job


def one(exe, args, tmp):
    go = os.path.join(tmp, "go")
    wdir = os.path.join(tmp, "w")
    if os.path.exists(go):
        os.remove(go)
    shutil.rmtree(wdir, ignore_errors=True)
    jobs = [start_job(go) for _ in range(2 if args.two else 1)]
    job = jobs[0]
    pids = [a for j in jobs for a in ("--pid", str(j.pid))]
    lt = subprocess.Popen([exe, "watch"] + pids + ["--dir", wdir, "--triggers", "request",
                           "--capture-before", f"{args.before}s", "--capture-after", f"{args.after}s"],
                          stderr=subprocess.PIPE, text=True)
    lines = []  # (time seen, line)

    def read():
        for line in lt.stderr:
            lines.append((time.time(), line))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    while not any("recording to" in l for _, l in lines):
        if lt.poll() is not None:
            raise SystemExit("watch ended: " + "".join(l for _, l in lines))
        time.sleep(0.1)
    open(go, "w").close()
    time.sleep(args.before + 5)
    asked = time.time()
    subprocess.run([exe, "watch", "--capture-now", "--dir", wdir, "--pid", str(job.pid)], check=True,
                   stderr=subprocess.DEVNULL)
    if args.two:
        # The second job's capture escalates it (ops, full-rate stacks) from
        # 3 s before the first one's window ends: the first one's write runs
        # while the second one's records come at their fastest.
        time.sleep(max(0, args.after - 3))
        subprocess.run([exe, "watch", "--capture-now", "--dir", wdir, "--pid", str(jobs[1].pid)], check=True,
                       stderr=subprocess.DEVNULL)
    deadline = time.time() + args.after + 600
    want = 2 if args.two else 1
    while (sum("summary:" in l or "not written" in l for _, l in lines) < want and time.time() < deadline):
        time.sleep(0.2)
    for j in jobs:
        j.send_signal(signal.SIGTERM)
        j.wait()
    lt.wait(timeout=60)
    reader.join()
    err = "".join(l for _, l in lines)
    if os.environ.get("CAPTURE_WRITE_LOG"):
        with open(os.environ["CAPTURE_WRITE_LOG"], "a") as f:
            f.write(f"=== {exe}\n{err}")
    wrote = [(t, l) for t, l in lines if "watch: wrote " in l]
    m = re.search(r"\((\d+) records, (\d+) ms[;)]", wrote[0][1]) if wrote else None
    took = re.search(r"written in (\d+) ms", wrote[0][1]) if wrote else None  # said by newer watchers
    # The watcher's last line: "N records, K capture(s); the ring holds ...; L record(s) lost".
    lost = re.search(r"capture\(s\); the ring holds [^\n]*; (\d+) record\(s\) lost\n", err)
    # The op observer's buffer full (ops escalated: the records it could not
    # keep while nothing read it), as each capture's report notes it.
    obs_dropped = 0
    for log in glob.glob(os.path.join(wdir, "captures", "*", "report.log")):
        for x in re.findall(r"(\d+) op call\(s\) the op observer could not record", open(log).read()):
            obs_dropped += int(x)
    return {
        "records": int(m.group(1)) if m else None,
        "observer_dropped": obs_dropped,
        "window_ms": int(m.group(2)) if m else None,
        # The window ends --after seconds after the request (plus the
        # escalation's start, which extends it): an upper bound of the write.
        "wrote_after_window_s": (wrote[0][0] - asked - args.after) if wrote else None,
        "written_in_s": int(took.group(1)) / 1e3 if took else None,
        "lost": int(lost.group(1)) if lost else 0,
        "lost_said": sum(int(x) for x in re.findall(r"watch: (\d+) record\(s\) lost since the last such line", err)),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--before", type=int, default=40)
    ap.add_argument("--after", type=int, default=10)
    ap.add_argument("--exe-a", default=os.path.join(ROOT, "build", "ltrace-bpf"))
    ap.add_argument("--exe-b", default="")
    ap.add_argument("--two", action="store_true",
                    help="two jobs watched: the second escalated while the first one's capture is written")
    args = ap.parse_args()
    exes = [("A", args.exe_a)] + ([("B", args.exe_b)] if args.exe_b else [])
    results = {name: [] for name, _ in exes}
    with tempfile.TemporaryDirectory(prefix="capwrite-") as tmp:
        for r in range(args.rounds):
            for name, exe in exes:
                res = one(exe, args, tmp)
                results[name].append(res)
                print(f"round {r + 1} {name} ({exe}): {res}", flush=True)
    for name, exe in exes:
        rs = results[name]
        med = lambda k: statistics.median([x[k] for x in rs if x[k] is not None] or [float("nan")])
        print(f"{name} ({exe}): median over {len(rs)} run(s): records {med('records'):.0f}, lost {med('lost'):.0f} "
              f"(last line), {med('lost_said'):.0f} (said as they happened), "
              f"op calls the observer dropped {med('observer_dropped'):.0f}, "
              f"wrote {med('wrote_after_window_s'):.2f} s after the window's end (upper bound)")


if __name__ == "__main__":
    sys.exit(main())
