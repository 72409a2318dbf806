"""Overhead of stack sampling on a real Lightning CPU fit: ltrace-bpf vs py-spy
vs Lightning's AdvancedProfiler, side by side in one run (issue 4).

Modes, same job each time (interleaved repetitions, the order rotated every rep,
so drift and "what ran just before" hit every mode alike):
  none               default Trainer (PassThroughProfiler), nothing attached
  advanced           Trainer(profiler=AdvancedProfiler()), Lightning's cProfile profiler
  ltrace-actions     ltrace-bpf record, no --rate (action probes only: the
                     baseline every ltrace mode below also pays)
  ltrace@99          ltrace-bpf record --rate 99
  ltrace@999         ltrace-bpf record --rate 999
  ltrace@999+offcpu  ltrace-bpf record --rate 999 --off-cpu
  pyspy@99           py-spy record --nonblocking --rate 99
  pyspy@999          py-spy record --nonblocking --rate 999
  pyspy-blocking@99  py-spy record --rate 99 (its default: pauses the target per sample)
Every tool is attached, and has said so, before the job starts Trainer.fit.

Reports steady-state steps/s (tests/workloads/train_lightning.py's STEADY line:
steps after a warm-up), overhead vs none, the samples each tool collected, and
the tool's own CPU time (user+sys of the tool process; BPF programs run in the
target's context and are not in it).

The workload has no --profiler advanced, so every mode runs it through the same
small launcher (runpy), which in mode "advanced" swaps in a Trainer subclass
that defaults profiler= to AdvancedProfiler().

usage: .venv/bin/python bench/stacks_overhead.py [--reps 3] [--interp debian[,pyenv]]
           [--sizes medium,large] [--modes m1,m2,...] [--markdown docs/benchmarks.md]
"""
import argparse
import datetime
import glob
import hashlib
import shutil
import os
import platform
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LTRACE = os.path.join(ROOT, "build", "ltrace-bpf")  # replaced by a private copy in main()
PYSPY = os.path.join(ROOT, ".venv", "bin", "py-spy")
TRAIN = os.path.join(ROOT, "tests", "workloads", "train_lightning.py")
SITE = glob.glob(os.path.join(ROOT, ".venv", "lib", "python3*", "site-packages"))[0]
SECTION = "## Stack sampling overhead (issue 4)"

INTERPRETERS = {
    "debian": ("debian-3.11-exe", [os.path.join(ROOT, ".venv", "bin", "python")], {}),
    "pyenv": ("pyenv-3.11-lib", ["/root/.pyenv/versions/3.11.7/bin/python3.11"], {"PYTHONPATH": SITE}),
}
SIZES = {
    "medium": ("medium (hidden 512 x3, batch 64: ~4 ms step)",
               ["--hidden", "512", "--depth", "3", "--batch-size", "64", "--batches", "750", "--warmup", "50"]),
    "large": ("large (hidden 1024 x4, batch 128: ~33 ms step)",
              ["--hidden", "1024", "--depth", "4", "--batch-size", "128", "--batches", "100", "--warmup", "10"]),
}
OUR_PIDS = set()  # tools this script started (not "foreign")
MODES = ["none", "advanced", "ltrace-actions", "ltrace@99", "ltrace@999", "ltrace@999+offcpu",
         "pyspy@99", "pyspy@999", "pyspy-blocking@99"]

LAUNCHER = r"""
import os, runpy, sys
train = sys.argv[1]
sys.argv = sys.argv[1:]
if os.environ.get("STACKS_BENCH_ADVANCED"):
    try:  # the same import order as the workload
        import lightning.pytorch as pl
        from lightning.pytorch.profilers import AdvancedProfiler
    except ImportError:
        import pytorch_lightning as pl
        from pytorch_lightning.profilers import AdvancedProfiler
    class Trainer(pl.Trainer):
        def __init__(self, *a, **kw):
            if kw.get("profiler") is None:
                kw["profiler"] = AdvancedProfiler()
            super().__init__(*a, **kw)
    pl.Trainer = Trainer
runpy.run_path(train, run_name="__main__")
"""


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def tool_cmd(mode, pid, out):
    """The attach command for a tool mode, and the stderr text that says it is live."""
    if mode.startswith("ltrace"):
        cmd = [LTRACE, "record", "--pid", str(pid), "-o", out, "-v"]
        m = re.match(r"ltrace@(\d+)", mode)
        if m:
            cmd += ["--rate", m.group(1)]
        if mode.endswith("+offcpu"):
            cmd += ["--off-cpu"]
        return cmd, "attached"
    if mode.startswith("pyspy"):
        rate = mode.split("@")[1]
        cmd = [PYSPY, "record", "--pid", str(pid), "--rate", rate, "--format", "raw", "-o", out]
        if not mode.startswith("pyspy-blocking"):
            cmd += ["--nonblocking"]
        return cmd, "Sampling process"
    return None, None


def reap(p, block):
    """Reap a child without losing its rusage (Popen.poll would): CPU seconds (user+sys) once it has
    exited, else None."""
    if p.returncode is not None:
        return p.cpu_s
    pid, status, ru = os.wait4(p.pid, 0 if block else os.WNOHANG)
    if pid == 0:
        return None
    p.returncode = os.waitstatus_to_exitcode(status)
    p.cpu_s = ru.ru_utime + ru.ru_stime
    return p.cpu_s


def busy_cpu_s():
    """Non-idle CPU seconds of the whole machine so far (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def foreign_tools():
    """Other profilers running on this machine (not started by us): their probes and timers would
    land on our jobs too (ltrace-bpf's uprobes live in the interpreter binary)."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) in OUR_PIDS:
            continue
        try:
            comm = open(f"/proc/{d}/comm").read().strip()
        except OSError:
            continue
        if comm in ("ltrace-bpf", "py-spy", "bpftrace", "perf"):
            found.append(f"{comm}[{d}]")
    return found


def wait_quiet(max_wait, quiet_s, pids, notes):
    """Wait until no other profiler runs and the rest of the machine (all but `pids`) has been idle
    (< 0.15 CPUs busy) for quiet_s seconds in a row."""
    t0 = time.monotonic()
    last_log = 0.0
    quiet_since = None
    while True:
        b0 = busy_cpu_s() - sum(proc_cpu_s(p) for p in pids)
        time.sleep(0.5)
        busy = (busy_cpu_s() - sum(proc_cpu_s(p) for p in pids) - b0) / 0.5
        foreign = foreign_tools()
        now = time.monotonic()
        if busy < 0.15 and not foreign:
            quiet_since = quiet_since or now - 0.5
            if now - quiet_since >= quiet_s:
                return
            continue
        quiet_since = None
        waited = time.monotonic() - t0
        if waited > max_wait:
            notes.append(f"machine not quiet after {max_wait:.0f} s ({busy:.2f} CPUs busy, "
                         f"{' '.join(foreign) or 'no other profiler'}): ran anyway")
            return
        if waited - last_log >= 60:
            log(f"  waiting for a quiet machine: {busy:.2f} CPUs busy, "
                f"{' '.join(foreign) or 'no other profiler'} ({waited:.0f} s so far)")
            last_log = waited


def proc_cpu_s(pid):
    """utime+stime of a live process so far (/proc/PID/stat)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            v = f.read().rsplit(")", 1)[1].split()
    except OSError:  # gone
        return 0.0
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")


def count_ltrace(trace, tmp):
    dump = os.path.join(tmp, "d.txt")
    r = subprocess.run([LTRACE, "report", trace, "--dump", dump], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    kinds = {}
    if os.path.exists(dump):
        rx = re.compile(r"^\d+ \S+ (\S+)")
        with open(dump) as f:
            for line in f:
                m = rx.match(line)
                if m:
                    kinds[m.group(1)] = kinds.get(m.group(1), 0) + 1
    return kinds, r.returncode, r.stderr


def count_pyspy(out):
    n = 0
    if os.path.exists(out):
        with open(out) as f:
            for line in f:
                line = line.rstrip("\n")
                if line:
                    n += int(line.rsplit(" ", 1)[1])
    return n


def parse_workload(text):
    steady = fit_s = None
    for line in text.splitlines():
        if line.startswith("STEADY"):
            steady = float(line.split("steps_per_s=")[1])
        elif line.startswith("FIT_DONE"):
            fit_s = float(re.search(r"seconds=([\d.]+)", line).group(1))
    if steady is None:
        raise RuntimeError("no STEADY line in:\n" + text[-3000:])
    return steady, fit_s


def run_one(cmd, env, size_args, mode, notes, gate):
    env = dict(os.environ, **env)
    if mode == "advanced":
        env["STACKS_BENCH_ADVANCED"] = "1"
    res = {"mode": mode}
    with tempfile.TemporaryDirectory(prefix="stacks_bench") as tmp:
        go = os.path.join(tmp, "go")
        joblog = os.path.join(tmp, "job.log")
        args = cmd + ["-c", LAUNCHER, TRAIN, "--epochs", "1", "--wait-file", go] + size_args
        with open(joblog, "w") as f:
            job = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 120
        while "READY" not in open(joblog).read():
            if job.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("workload did not start:\n" + open(joblog).read()[-3000:])
            time.sleep(0.05)
        out = os.path.join(tmp, "out")
        tcmd, live = tool_cmd(mode, job.pid, out)
        tool = None
        err_path = os.path.join(tmp, "tool.log")
        if tcmd:
            # py-spy says "Sampling process" on stdout, the rest on stderr: one file for both
            tool = subprocess.Popen(tcmd, stdout=open(err_path, "w"), stderr=subprocess.STDOUT)
            OUR_PIDS.add(tool.pid)
            deadline = time.monotonic() + 30
            while live not in open(err_path).read():
                if reap(tool, False) is not None or time.monotonic() > deadline:
                    job.kill()
                    job.wait()
                    raise RuntimeError(f"{mode}: tool did not attach (rc {tool.returncode}):\n" +
                                       open(err_path).read())
                time.sleep(0.002)
        gate([job.pid] + ([tool.pid] if tool else []))
        job_cpu0 = proc_cpu_s(job.pid)
        tool_cpu0 = proc_cpu_s(tool.pid) if tool else 0.0
        busy0 = busy_cpu_s()
        t_go = time.monotonic()
        open(go, "w").close()
        while reap(job, False) is None:
            if time.monotonic() - t_go > 600:
                job.kill()
                raise RuntimeError(f"{mode}: workload still running after 600 s")
            time.sleep(0.02)
        res["run_s"] = time.monotonic() - t_go
        busy = busy_cpu_s() - busy0
        tool_cpu1 = proc_cpu_s(tool.pid) if tool else 0.0
        text = open(joblog).read()
        if job.returncode != 0:
            raise RuntimeError(f"{mode}: workload rc {job.returncode}:\n" + text[-3000:])
        res["sps"], res["fit_s"] = parse_workload(text)
        # CPU the rest of the machine used while the job ran: job and tool subtracted
        res["other_cpu_s"] = max(0.0, busy - (job.cpu_s - job_cpu0))
        if tool:
            # every tool stops by itself when the target exits; give it 60 s, then SIGINT
            t_end = time.monotonic() + 60
            while reap(tool, False) is None and time.monotonic() < t_end:
                time.sleep(0.05)
            if tool.returncode is None:
                notes.append(f"{mode}: tool still running 60 s after the target exited; sent SIGINT")
                tool.send_signal(signal.SIGINT)
            reap(tool, True)
            # the tool's CPU while the job ran (py-spy keeps sampling an idle target during the wait)
            res["tool_cpu_s"] = tool_cpu1 - tool_cpu0
            res["other_cpu_s"] = max(0.0, res["other_cpu_s"] - res["tool_cpu_s"])
            err = open(err_path).read()
            res["tool_err"] = err
            if tool.returncode != 0:
                notes.append(f"{mode}: tool exit status {tool.returncode}; stderr:\n{err}")
            if mode.startswith("ltrace"):
                kinds, rrc, rerr = count_ltrace(out, tmp)
                res["samples"] = kinds.get("py_sample", 0)
                res["kinds"] = kinds
                m = re.search(r"(\d+) ring-buffer drops", rerr)
                res["drops"] = int(m.group(1)) if m else None
                if rrc != 0 or res["drops"] or (mode != "ltrace-actions" and not res["samples"]):
                    notes.append(f"{mode}: report rc {rrc}, drops {res['drops']}, samples {res['samples']};"
                                 f" record stderr:\n{err}\nreport stderr:\n{rerr}")
                for line in err.splitlines() + rerr.splitlines():
                    if re.search(r"drop|lost|warn|error|fail", line, re.I) and \
                            not re.search(r"lost events: 0 ring-buffer drops", line):
                        notes.append(f"{mode}: {line}")
            else:
                res["samples"] = count_pyspy(out)
                m = re.search(r"Samples: (\d+) Errors: (\d+)", err)
                res["errors"] = int(m.group(2)) if m else None
                if not res["samples"]:
                    notes.append(f"{mode}: no samples; stderr:\n{err}")
                for line in err.splitlines():
                    if re.search(r"behind|lag|warn|fail", line, re.I):
                        notes.append(f"{mode}: {line}")
    return res


def fmt_range(vals, f="{:.1f}"):
    return f"{f.format(min(vals))}–{f.format(max(vals))}"


def summarize(iname, sname, modes, runs, reps):
    """Rows of the table and the ratio lines for one interpreter x size."""
    none = [r["sps"] for r in runs["none"]]
    med_none = statistics.median(none)
    med = {m: statistics.median(r["sps"] for r in runs[m]) for m in modes}
    ov = {m: (med_none / med[m] - 1) * 100 for m in modes}
    rows = []
    for m in modes:
        sps = [r["sps"] for r in runs[m]]
        # paired per rep (same rep ran every mode back to back): a noise estimate for the overhead
        paired = [(n / s - 1) * 100 for n, s in zip(none, sps)]
        samples = [r["samples"] for r in runs[m] if "samples" in r]
        per_s = [r["samples"] / r["run_s"] for r in runs[m] if "samples" in r]
        cpu = [r["tool_cpu_s"] for r in runs[m] if "tool_cpu_s" in r]
        extra = ""
        errs = [r.get("errors") for r in runs[m] if r.get("errors") is not None]
        if errs and any(errs):
            extra = f" (py-spy errors: {'/'.join(str(e) for e in errs)})"
        drops = [r.get("drops") for r in runs[m] if r.get("drops")]
        if drops:
            extra += f" (drops: {'/'.join(str(d) for d in drops)})"
        offcpu = [r["kinds"].get("offcpu_begin", 0) + r["kinds"].get("offcpu_end", 0)
                  for r in runs[m] if "kinds" in r]
        if any(offcpu):
            extra += f" (+{statistics.median(offcpu):.0f} offcpu_begin/end)"
        rows.append(
            f"| {iname} | {sname} | {m} | {med[m]:.1f} ({fmt_range(sps)}) | "
            + ("—" if m == "none" else f"{ov[m]:+.1f}% ({fmt_range(paired, '{:+.1f}')}%)")
            + " | " + (f"{statistics.median(samples):.0f}{extra}" if samples else "—")
            + " | " + (f"{statistics.median(per_s):.0f}" if per_s else "—")
            + " | " + (f"{statistics.median(cpu):.2f}" if cpu else "—")
            + f" | {statistics.median(r['other_cpu_s'] for r in runs[m]):.2f} |")
    noise = (max(none) - min(none)) / med_none * 100

    def ratio(a, b):
        if a not in ov or b not in ov:
            return None
        if ov[b] <= noise / 2:
            return (f"{a} / {b} overhead: n/a ({b} {ov[b]:+.1f}% is within the none-to-none "
                    f"spread of {noise:.1f}%; {a} {ov[a]:+.1f}%)")
        return f"{a} / {b} overhead: {ov[a]:+.1f}% / {ov[b]:+.1f}% = {ov[a] / ov[b]:.2f}"

    ratios = [ratio(a, b) for a, b in (("ltrace@99", "pyspy@99"), ("ltrace@999", "pyspy@999"),
                                       ("ltrace@99", "pyspy-blocking@99"), ("ltrace@99", "advanced"),
                                       ("ltrace@999", "advanced"))]
    ratios = [r for r in ratios if r]
    if "ltrace-actions" in ov:
        for m in ("ltrace@99", "ltrace@999", "ltrace@999+offcpu"):
            if m in ov:
                ratios.append(f"{m} minus ltrace-actions (the sampler's own share): "
                              f"{ov[m] - ov['ltrace-actions']:+.1f} points")
    ratios.append(f"none-to-none spread (max-min)/median over {reps} reps: {noise:.1f}%")
    return rows, ratios


def write_markdown(path, text):
    old = open(path).read() if os.path.exists(path) else ""
    lines = old.splitlines(keepends=True)
    start = next((i for i, l in enumerate(lines) if l.rstrip("\n") == SECTION), None)
    if start is None:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        tail = "".join(lines[end:])
        new = "".join(lines[:start]) + text + ("\n" + tail if tail else "")
    with open(path, "w") as f:
        f.write(new)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--interp", default="debian", help="comma list of: " + ",".join(INTERPRETERS))
    ap.add_argument("--sizes", default="medium,large", help="comma list of: " + ",".join(SIZES))
    ap.add_argument("--modes", default=",".join(MODES), help="comma list of: " + ",".join(MODES))
    ap.add_argument("--max-wait", type=float, default=1800,
                    help="seconds to wait for a quiet machine before each run (then run anyway)")
    ap.add_argument("--quiet-s", type=float, default=3,
                    help="seconds the rest of the machine must be idle before each measured run")
    ap.add_argument("--max-attempts", type=int, default=8,
                    help="runs disturbed by other work (>10%% of a CPU) are repeated up to this often")
    ap.add_argument("--ltrace", default=os.path.join(ROOT, "build", "ltrace-bpf"),
                    help="the ltrace-bpf binary (copied once at the start)")
    ap.add_argument("--markdown", help="append or replace the section '%s' in this file" % SECTION[3:])
    args = ap.parse_args()
    modes = args.modes.split(",")
    if "none" not in modes:
        modes.insert(0, "none")
    for m in modes:
        if m not in MODES:
            ap.error(f"unknown mode {m}")
    # a private copy of the binary: a rebuild of build/ltrace-bpf during the run must not mix versions
    global LTRACE
    bindir = tempfile.mkdtemp(prefix="stacks_bench_bin")
    src = args.ltrace
    LTRACE = os.path.join(bindir, "ltrace-bpf")
    shutil.copy2(src, LTRACE)
    bin_sha = hashlib.sha256(open(LTRACE, "rb").read()).hexdigest()[:12]
    bin_mtime = datetime.datetime.fromtimestamp(os.path.getmtime(LTRACE)).strftime("%Y-%m-%d %H:%M")
    git_head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
    git_dirty = bool(subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                                    capture_output=True, text=True).stdout.strip())
    ltrace_id = (f"ltrace-bpf {os.path.relpath(src, ROOT)} built {bin_mtime} (sha256 {bin_sha}), "
                 f"tree at {git_head}{' with uncommitted changes' if git_dirty else ''}")
    log(f"using a copy of {ltrace_id}")
    t_start = time.monotonic()
    all_rows, all_ratios, notes = [], [], []
    versions = {}
    others, run_s = [], []
    retries = []
    for ikey in args.interp.split(","):
        iname, cmd, env = INTERPRETERS[ikey]
        versions[iname] = subprocess.run(cmd + ["-c", "import sys; print(sys.version.split()[0])"],
                                         capture_output=True, text=True).stdout.strip()
        for skey in args.sizes.split(","):
            sname, size_args = SIZES[skey]
            runs = {m: [] for m in modes}
            for rep in range(args.reps):
                order = modes[rep % len(modes):] + modes[:rep % len(modes)]
                for m in order:
                    t0 = time.monotonic()
                    for attempt in range(1, args.max_attempts + 1):
                        r = run_one(cmd, env, size_args, m, notes,
                                    lambda pids: wait_quiet(args.max_wait, args.quiet_s, pids, notes))
                        foreign = foreign_tools()
                        if r["other_cpu_s"] <= 0.1 * r["run_s"] and not foreign:
                            break
                        msg = (f"{iname} {skey} rep {rep + 1} {m}: attempt {attempt} disturbed "
                               f"({r['other_cpu_s']:.2f} CPU s of other work in a {r['run_s']:.1f} s run"
                               f"{', ' + ' '.join(foreign) if foreign else ''})")
                        log("  " + msg + ("; running it again" if attempt < args.max_attempts else "; kept"))
                        retries.append(msg)
                    runs[m].append(r)
                    log(f"[{time.monotonic() - t_start:6.0f}s] {iname} {skey} rep {rep + 1}/{args.reps} "
                        f"{m:18s} {r['sps']:8.1f} steps/s"
                        + (f"  samples {r['samples']}" if "samples" in r else "")
                        + (f"  tool cpu {r['tool_cpu_s']:.2f}s" if "tool_cpu_s" in r else "")
                        + (f"  kinds {r['kinds']}" if r.get("kinds") else "")
                        + f"  other cpu {r['other_cpu_s']:.2f}s"
                        + (f" (attempt {attempt})" if attempt > 1 else "")
                        + f"  ({time.monotonic() - t0:.1f}s)")
            others += [r["other_cpu_s"] for rs in runs.values() for r in rs]
            run_s += [r["run_s"] for rs in runs.values() for r in rs]
            rows, ratios = summarize(iname, sname, modes, runs, args.reps)
            for row in rows:
                print(row, flush=True)
            for r in ratios:
                print("  " + r, flush=True)
            all_rows += rows
            all_ratios.append((iname, sname, ratios))
    total = time.monotonic() - t_start
    print(f"total {total:.0f} s", flush=True)
    for n in retries:
        print("REPEATED " + n, flush=True)
    for n in notes:
        print("NOTE " + n, flush=True)

    if args.markdown:
        argv = " ".join(shlex.quote(a) for a in sys.argv[1:])
        kernel = platform.release()
        nproc = os.cpu_count()
        pyspy_v = subprocess.run([PYSPY, "--version"], capture_output=True, text=True).stdout.strip()
        head = [
            SECTION, "",
            "```",
            f".venv/bin/python bench/stacks_overhead.py {argv}",
            "```", "",
            f"Run {datetime.date.today().isoformat()}, {nproc} CPUs (nproc), kernel {kernel}, "
            f"{ltrace_id}, {pyspy_v}, CPython {', '.join(f'{k} {v}' for k, v in versions.items())}; "
            f"{args.reps} interleaved reps (mode order rotated each rep), {total / 60:.1f} min in all; "
            f"CPU time used by everything else on the machine while a job ran: median "
            f"{statistics.median(others):.2f} s, max {max(others):.2f} s per run "
            f"(a run is {statistics.median(run_s):.1f} s, median); before each run's start signal "
            f"(job and tool already up) the rest of the machine had been idle for {args.quiet_s:g} s "
            f"with no other profiler running, and runs with more than 10 % of a CPU of "
            f"other work were repeated ({len(retries)} repeats).",
            "",
            "Steady-state steps/s of `tests/workloads/train_lightning.py` (after the warm-up steps), "
            "median over reps with (min–max). Overhead = none / mode − 1 from the medians, with the "
            "(min–max) of the same ratio paired per rep as a noise estimate. Samples = records the "
            "tool stored for the whole attach (ltrace-bpf: `py_sample` lines of `report --dump`; "
            "py-spy: sum of the counts in its raw output; idle stacks excluded by both), "
            "samples/s = samples / seconds from the start signal to the target's exit (fit plus "
            "teardown; the target is on-CPU nearly all of it, so this should be close to the rate). "
            "Tool CPU = user+sys of the tool's own process from the start signal to the job's exit "
            "(ltrace-bpf's BPF programs run in the target's context and are not in it). Other CPU = "
            "CPU time of the whole machine during the run minus the job's and the tool's "
            "(`/proc/stat`): the bench's own polling, kernel threads, and interrupt time not "
            "charged to a task.",
            "",
            "| interpreter | model | mode | steps/s (min–max) | overhead vs none (paired min–max) | "
            "samples | samples/s | tool CPU s | other CPU s |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        body = list(all_rows) + [""]
        for iname, sname, ratios in all_ratios:
            body.append(f"{iname}, {sname}:")
            body.append("")
            body += [f"* {r}" for r in ratios]
            body.append("")
        if notes:
            body += ["Notes from the tools (stderr):", "", "```"] + notes + ["```", ""]
        write_markdown(args.markdown, "\n".join(head + body))
    shutil.rmtree(bindir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
