"""What `ltrace-bpf watch` costs a job and keeps on disk (issue 33,
docs/design-watch.md).

usage: .venv/bin/python bench/watch.py [--rounds 3] [--steps 600] [--step-s 0.1]
       .venv/bin/python bench/watch.py --hours 1 [--keep 10m]   (one long watched run)

A Lightning fit of --steps steps of about --step-s seconds each
(tests/workloads/watch_job.py, steady: a sleep plus a small model), run
alternately alone and under `ltrace-bpf watch --pid` (the cheap tier:
actions, 19 Hz stacks, collectives, /proc samples). Per round: the median
step time in the job (start to next start, measured by the job itself),
the flight recorder's bytes (segments + names) for the time it covered,
and the watcher's resident memory sampled every second (first and last
thirds of the run compared: flat or growing). Prints medians over the
rounds; the bytes per 10 minutes are the measured bytes per second times
600 (an extrapolation, labelled so).

--hours H runs the job once, watched only, for about H hours of steps, with
the recorder's default --keep (or --keep): the watcher's RSS is sampled every
second and its slope fitted (least squares) over the time after the ring
first reached its bound, and the ring directory's size is sampled every
minute, so "RSS flat over hours, ring at its bound" is measured, not
extrapolated. The watcher runs from a copy of build/ (rebuilding meanwhile
cannot touch it).
"""
import argparse
import collections
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LTRACE = os.environ.get("LTRACE_BPF_EXE", os.path.join(ROOT, "build", "ltrace-bpf"))
PY = os.path.join(ROOT, ".venv", "bin", "python")
JOB = os.path.join(ROOT, "tests", "workloads", "watch_job.py")


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def rollup_kib(pid):
    """RssAnon/RssFile/RssShmem from smaps_rollup: growth in anonymous memory is
    the watcher's own; growth in file pages is mapped files it reads (symbols)."""
    out = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                k = line.split(":")[0]
                if k in ("Rss", "Anonymous", "Pss_File", "Pss_Anon", "Pss_Shmem"):
                    out[k] = int(line.split()[1])
    except OSError:
        return None
    return out


def dir_bytes(path):
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(d, f)).st_size
            except OSError:
                pass
    return total


def cpu_s(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def slope_per_hour(samples):
    """Least-squares slope of (t, v) samples, per hour."""
    n = len(samples)
    if n < 2:
        return None
    mt = sum(t for t, _ in samples) / n
    mv = sum(v for _, v in samples) / n
    den = sum((t - mt) ** 2 for t, _ in samples)
    return sum((t - mt) * (v - mv) for t, v in samples) / den * 3600 if den else None


def one(args, watched, tmp):
    go = os.path.join(tmp, "go")
    times = os.path.join(tmp, "times")
    wdir = os.path.join(tmp, "w")
    for p in (go, times):
        if os.path.exists(p):
            os.remove(p)
    shutil.rmtree(wdir, ignore_errors=True)
    job = subprocess.Popen([PY, JOB, "--wait-file", go, "--steps", str(args.steps), "--step-s", str(args.step_s),
                            "--times", times], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in job.stdout:  # Lightning's warnings may come first
        if line.strip() == "READY":
            break
    # The rest (its own output) is drained by a thread so the job never blocks on a full pipe.
    threading.Thread(target=job.stdout.read, daemon=True).start()
    lt, rss, err = None, [], ""
    if watched:
        keep = ["--keep", args.keep] if args.keep else []
        lt = subprocess.Popen([LTRACE, "watch", "--pid", str(job.pid), "-v", "--dir", wdir, "--triggers", "none"] +
                              keep, stderr=subprocess.PIPE, text=True)
        while True:
            line = lt.stderr.readline()
            err += line
            if "attached" in line or not line:
                break
        # Its stderr is read as it comes, so a long run never blocks on a full pipe.
        chunks = []
        reader = threading.Thread(target=lambda: chunks.append(lt.stderr.read()), daemon=True)
        reader.start()
    open(go, "w").close()
    t0 = time.time()
    timeline, ring_sizes, cpu0 = [], [], cpu_s(lt.pid) if lt else None
    rollups, after_exit, last_rollups = [], [], collections.deque(maxlen=8)
    while job.poll() is None:
        if lt:
            r = rss_kib(lt.pid)
            if r:
                rss.append(r)
                timeline.append((time.time() - t0, r))
                last_rollups.append((time.time() - t0, rollup_kib(lt.pid)))
            if len(timeline) % 60 == 1:
                ring_sizes.append((time.time() - t0, dir_bytes(os.path.join(wdir, "ring"))))
                names = os.path.join(wdir, "ring", "names.ltrace")
                rollups.append((time.time() - t0, rollup_kib(lt.pid),
                                os.path.getsize(names) if os.path.exists(names) else 0))
        time.sleep(1)
    wall = time.time() - t0
    if lt:
        cpu1 = cpu_s(lt.pid)
        # watch --pid ends with its target: its last seconds (the jump seen
        # once at the job's end) are the last samples of the loop above.
        after_exit = list(last_rollups)
        lt.send_signal(2) if lt.poll() is None else None
        lt.wait()
        reader.join()
        err += "".join(chunks)
    steps = [float(x) for x in open(times).read().split()]
    out = {"median_step_s": statistics.median(steps), "wall_s": wall}
    if watched:
        m = re.search(r"the ring holds (\d+) bytes", err)
        names = os.path.getsize(os.path.join(wdir, "ring", "names.ltrace"))
        out["ring_bytes"] = int(m.group(1)) if m else None
        out["names_bytes"] = names
        third = max(1, len(rss) // 3)
        out["rss_first_kib"] = statistics.median(rss[:third])
        out["rss_last_kib"] = statistics.median(rss[-third:])
        out["timeline"], out["ring_sizes"] = timeline, ring_sizes
        out["rollups"], out["after_exit"] = rollups, after_exit
        out["tracer_cpu_s"] = cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None
    return out


def long_run(args, tmp):
    """One watched run of about --hours hours: RSS slope and the ring's size."""
    steps = int(args.hours * 3600 / args.step_s)
    args.steps = steps
    x = one(args, True, tmp)
    sizes = x["ring_sizes"]
    peak = max(v for _, v in sizes)
    # The ring is at its bound once it stops growing: from the first sample
    # within 5% of its largest size on.
    bound_t = next(t for t, v in sizes if v >= 0.95 * peak)
    after = [(t, v) for t, v in x["timeline"] if t >= bound_t]
    print(f"{x['wall_s'] / 3600:.2f} h watched, {steps} steps of {x['median_step_s'] * 1e3:.1f} ms (median)")
    print("ring directory (bytes) by minute: " + " ".join(f"{int(t // 60)}m:{v}" for t, v in sizes))
    print(f"ring at its bound from {bound_t / 60:.1f} min: largest {peak} B, last {sizes[-1][1]} B")
    print(f"watcher RSS: first {x['timeline'][0][1]} KiB, at the bound {after[0][1]} KiB, last "
          f"{x['timeline'][-1][1]} KiB, max {max(v for _, v in x['timeline'])} KiB; slope after the bound "
          f"{slope_per_hour(after):+.1f} KiB/h over {len(after)} samples")
    def fmt(r):
        return "-" if not r else (f"anon {r.get('Pss_Anon', 0)} file {r.get('Pss_File', 0)} "
                                  f"shmem {r.get('Pss_Shmem', 0)} KiB")
    print("watcher memory by minute (Pss of anonymous, file and shared pages; names.ltrace bytes):")
    for t, r, n in x["rollups"]:
        print(f"  {t / 60:5.1f} min: {fmt(r)}, names {n}")
    for t, r in x["after_exit"]:
        print(f"  last seconds, {t / 60:5.2f} min: {fmt(r)}")
    anon = [(t, r["Pss_Anon"]) for t, r, _ in x["rollups"] if r and t >= bound_t]
    if len(anon) >= 2:
        print(f"anonymous memory slope after the bound: {slope_per_hour(anon):+.1f} KiB/h over {len(anon)} minutes")
    print(f"watcher CPU: {x['tracer_cpu_s']:.1f} s over {x['wall_s']:.0f} s "
          f"({100 * x['tracer_cpu_s'] / x['wall_s']:.2f} % of one core)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--step-s", type=float, default=0.1)
    ap.add_argument("--hours", type=float, default=0, help="one long watched run instead of the rounds")
    ap.add_argument("--keep", default="", help="the watcher's --keep (its default if empty)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-watch-")
    if args.hours:
        try:
            return long_run(args, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    alone, under = [], []
    try:
        for r in range(args.rounds):
            alone.append(one(args, False, tmp))
            under.append(one(args, True, tmp))
            print(f"round {r}: alone {alone[-1]['median_step_s'] * 1e3:.2f} ms/step, watched "
                  f"{under[-1]['median_step_s'] * 1e3:.2f} ms/step, ring {under[-1]['ring_bytes']} B + names "
                  f"{under[-1]['names_bytes']} B over {under[-1]['wall_s']:.0f} s, watcher RSS "
                  f"{under[-1]['rss_first_kib']} -> {under[-1]['rss_last_kib']} KiB", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    a = statistics.median(x["median_step_s"] for x in alone)
    w = statistics.median(x["median_step_s"] for x in under)
    per_s = statistics.median((x["ring_bytes"] + x["names_bytes"]) / x["wall_s"] for x in under)
    print(f"median step: alone {a * 1e3:.2f} ms, watched {w * 1e3:.2f} ms ({w / a:.4f}x)")
    print(f"flight recorder: {per_s / 1024:.1f} KiB/s measured -> {per_s * 600 / 2**20:.1f} MiB per 10 minutes "
          f"(extrapolated from {statistics.median(x['wall_s'] for x in under):.0f} s)")
    print(f"watcher RSS (median of the first and last thirds): "
          f"{statistics.median(x['rss_first_kib'] for x in under)} -> "
          f"{statistics.median(x['rss_last_kib'] for x in under)} KiB")


if __name__ == "__main__":
    sys.exit(main())
