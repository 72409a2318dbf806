"""Overhead of stack sampling on a real Lightning CPU fit: ltrace-bpf vs py-spy
vs Lightning's AdvancedProfiler, side by side in one run (issue 4).

Modes, same job each time (interleaved repetitions, the order rotated every rep,
so drift and "what ran just before" hit every mode alike):
  none               default Trainer (PassThroughProfiler), nothing attached
  advanced           Trainer(profiler=AdvancedProfiler()) (the workload's --profiler advanced),
                     Lightning's cProfile-based profiler
  ltrace-actions     ltrace-bpf record, no --rate (action probes only: the
                     baseline every ltrace mode below also pays)
  ltrace@99          ltrace-bpf record --rate 99
  ltrace@999         ltrace-bpf record --rate 999
  ltrace@999+offcpu  ltrace-bpf record --rate 999 --off-cpu
  pyspy@99           py-spy record --nonblocking --rate 99
  pyspy@999          py-spy record --nonblocking --rate 999
  pyspy-blocking@99  py-spy record --rate 99 (its default: pauses the target per sample)
Every tool is attached, and has said so, before the job starts Trainer.fit.

Per mode: steady-state steps/s (tests/workloads/train_lightning.py's STEADY line:
steps after a warm-up), overhead vs none, the samples each tool collected in the
measured window (start signal to the job's exit: ltrace-bpf's by timestamp,
CLOCK_MONOTONIC as Python's time.monotonic; py-spy's raw stacks less those in
the workload's wait-for-start loop), the tool process's CPU time, and, for
ltrace-bpf, the CPU time of its BPF programs from the kernel's own counters
(kernel.bpf_stats_enabled, switched on for the run and restored after; read
from the recorder's /proc/PID/fdinfo). That BPF time runs on the target's CPU
and is a direct, low-noise floor under ltrace-bpf's overhead (it leaves out the
timer interrupt and uprobe trap around each program run).

This VM is noisy: before each start signal the rest of the machine must have
been idle for --quiet-s seconds with no other profiler running (their uprobes
would land on our jobs too), and a run during which other work used more than
10 % of a CPU is repeated.

usage: .venv/bin/python bench/stacks_overhead.py [--reps 3] [--interp debian[,pyenv]]
           [--sizes medium,large] [--modes m1,m2,...] [--markdown docs/benchmarks.md]
"""
import argparse
import datetime
import glob
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LTRACE = os.path.join(ROOT, "build", "ltrace-bpf")  # replaced by a private copy in main()
PYSPY = os.path.join(ROOT, ".venv", "bin", "py-spy")
TRAIN = os.path.join(ROOT, "tests", "workloads", "train_lightning.py")
SITE = glob.glob(os.path.join(ROOT, ".venv", "lib", "python3*", "site-packages"))[0]
SECTION = "## Stack sampling overhead (issue 4)"
BPF_STATS = "/proc/sys/kernel/bpf_stats_enabled"
KEEP = "/tmp/stacks_bench_keep"  # odd tool outputs are copied here

INTERPRETERS = {
    "debian": ("debian-3.11-exe", [os.path.join(ROOT, ".venv", "bin", "python")], {}),
    "pyenv": ("pyenv-3.11-lib", ["/root/.pyenv/versions/3.11.7/bin/python3.11"], {"PYTHONPATH": SITE}),
}
SIZES = {
    "medium": ("medium (512 x3, batch 64: ~4 ms step)",
               ["--hidden", "512", "--depth", "3", "--batch-size", "64", "--batches", "750", "--warmup", "50"]),
    "large": ("large (1024 x4, batch 128: ~33 ms step)",
              ["--hidden", "1024", "--depth", "4", "--batch-size", "128", "--batches", "100", "--warmup", "10"]),
}
MODES = ["none", "advanced", "ltrace-actions", "ltrace@99", "ltrace@999", "ltrace@999+offcpu",
         "pyspy@99", "pyspy@999", "pyspy-blocking@99"]
# BPF program types (uapi bpf.h) -> what they are in ltrace-bpf
BPF_KINDS = {7: "sampler", 26: "sched", 2: "uprobes"}  # perf_event; tp_btf (sched_switch, fork/exec/exit); uprobe
OUR_PIDS = set()  # tools this script started (not "foreign")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def tool_cmd(mode, pid, out):
    """The attach command for a tool mode, and the text on its stdout/stderr that says it is live."""
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


def proc_cpu_s(pid):
    """utime+stime of a live process so far (/proc/PID/stat); 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            v = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")


def bpf_prog_stats(pid):
    """{prog_id: (kind, run_time_ns, run_cnt)} of the BPF programs a process holds, from fdinfo."""
    progs = {}
    try:
        fds = os.listdir(f"/proc/{pid}/fdinfo")
    except OSError:
        return progs
    for fd in fds:
        try:
            text = open(f"/proc/{pid}/fdinfo/{fd}").read()
        except OSError:
            continue
        if "prog_type:" not in text:
            continue
        f = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        try:
            kind = BPF_KINDS.get(int(f["prog_type"]), "other")
            progs[int(f["prog_id"])] = (kind, int(f["run_time_ns"]), int(f["run_cnt"]))
        except (KeyError, ValueError):
            continue
    return progs


def bpf_delta(first, last):
    """{kind: (ns, runs)} between two bpf_prog_stats readings."""
    out = {}
    for pid_, (kind, ns, cnt) in last.items():
        ns0, cnt0 = first.get(pid_, (kind, 0, 0))[1:]
        a, b = out.get(kind, (0, 0))
        out[kind] = (a + ns - ns0, b + cnt - cnt0)
    return out


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
        waited = now - t0
        if waited > max_wait:
            notes.append(f"machine not quiet after {max_wait:.0f} s ({busy:.2f} CPUs busy, "
                         f"{' '.join(foreign) or 'no other profiler'}): ran anyway")
            return
        if waited - last_log >= 60:
            log(f"  waiting for a quiet machine: {busy:.2f} CPUs busy, "
                f"{' '.join(foreign) or 'no other profiler'} ({waited:.0f} s so far)")
            last_log = waited


def count_ltrace(trace, tmp, t0_ns, t1_ns):
    """Records of each kind in an ltrace-bpf trace, plus "py_sample in window": samples stamped
    between t0_ns and t1_ns (CLOCK_MONOTONIC)."""
    dump = os.path.join(tmp, "d.txt")
    r = subprocess.run([LTRACE, "report", trace, "--dump", dump], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    kinds = {}
    if os.path.exists(dump):
        rx = re.compile(r"^(\d+) \S+ (\S+)")
        with open(dump) as f:
            for line in f:
                m = rx.match(line)
                if m:
                    kinds[m.group(2)] = kinds.get(m.group(2), 0) + 1
                    if m.group(2) == "py_sample" and t0_ns <= int(m.group(1)) <= t1_ns:
                        kinds["py_sample in window"] = kinds.get("py_sample in window", 0) + 1
    return kinds, r.returncode, r.stderr


def wait_loop_frames():
    """py-spy's names for the workload's wait-for-start loop ("main (train_lightning.py:N)")."""
    src = open(TRAIN).read().splitlines()
    i = next(n for n, l in enumerate(src) if "while not os.path.exists(args.wait_file)" in l)
    return tuple(f"main ({os.path.basename(TRAIN)}:{n + 1})" for n in (i, i + 1))


def count_pyspy(out):
    """(samples outside the wait-for-start loop, all samples, malformed lines) of py-spy's raw
    output, where each line is "frame;frame;... count"."""
    n = total = bad = 0
    skip = wait_loop_frames()
    rx = re.compile(r"^(.*) (\d+)$")
    if os.path.exists(out):
        with open(out, errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                if not line:
                    continue
                m = rx.match(line)
                if not m:
                    bad += 1
                    continue
                total += int(m.group(2))
                if not any(s in m.group(1).split(";") for s in skip):
                    n += int(m.group(2))
    return n, total, bad


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


def keep(path, name):
    os.makedirs(KEEP, exist_ok=True)
    dst = os.path.join(KEEP, name)
    shutil.copy(path, dst)
    return dst


def run_one(cmd, env, size_args, mode, tag, notes, gate):
    """One job under one mode; returns a dict of measurements."""
    env = dict(os.environ, **env)
    res = {"mode": mode}
    with tempfile.TemporaryDirectory(prefix="stacks_bench") as tmp:
        go = os.path.join(tmp, "go")
        joblog = os.path.join(tmp, "job.log")
        args = cmd + [TRAIN, "--epochs", "1", "--wait-file", go] + size_args
        if mode == "advanced":
            args += ["--profiler", "advanced"]
        with open(joblog, "w") as f:
            job = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT, env=env)
        tool = None
        try:
            deadline = time.monotonic() + 120
            while "READY" not in open(joblog).read():
                if job.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("workload did not start:\n" + open(joblog).read()[-3000:])
                time.sleep(0.05)
            out = os.path.join(tmp, "out")
            tcmd, live = tool_cmd(mode, job.pid, out)
            err_path = os.path.join(tmp, "tool.log")
            if tcmd:
                # py-spy says "Sampling process" on stdout, the rest on stderr: one file for both
                tool = subprocess.Popen(tcmd, stdout=open(err_path, "w"), stderr=subprocess.STDOUT)
                OUR_PIDS.add(tool.pid)
                deadline = time.monotonic() + 30
                while live not in open(err_path).read():
                    if reap(tool, False) is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"tool did not attach (exit {tool.returncode}):\n"
                                           + open(err_path).read())
                    time.sleep(0.002)
            gate([job.pid] + ([tool.pid] if tool else []))
            is_ltrace = mode.startswith("ltrace")
            bpf0 = bpf_prog_stats(tool.pid) if is_ltrace else {}
            job_cpu0 = proc_cpu_s(job.pid)
            tool_cpu0 = proc_cpu_s(tool.pid) if tool else 0.0
            busy0 = busy_cpu_s()
            t_go = time.monotonic()
            t_go_ns = time.monotonic_ns()
            open(go, "w").close()
            bpf1, t_bpf1, next_read = bpf0, t_go, t_go + 0.25
            while reap(job, False) is None:
                now = time.monotonic()
                if now - t_go > 600:
                    raise RuntimeError("workload still running after 600 s")
                if is_ltrace and now >= next_read:
                    # the recorder detaches as soon as the job exits: keep the last reading
                    reading = bpf_prog_stats(tool.pid)
                    if reading:
                        bpf1, t_bpf1 = reading, time.monotonic()
                    next_read = now + 0.25
                time.sleep(0.02)
            res["run_s"] = time.monotonic() - t_go
            t_end_ns = time.monotonic_ns()
            busy = busy_cpu_s() - busy0
            tool_cpu1 = proc_cpu_s(tool.pid) if tool else 0.0
            text = open(joblog).read()
            if job.returncode != 0:
                raise RuntimeError(f"workload exit {job.returncode}:\n" + text[-3000:])
            res["sps"], res["fit_s"] = parse_workload(text)
            # CPU the rest of the machine used while the job ran: job (and below: tool) subtracted
            res["other_cpu_s"] = max(0.0, busy - (job.cpu_s - job_cpu0))
            if is_ltrace and t_bpf1 > t_go:
                # BPF seconds over the whole run, scaled from the readings' window (all but the
                # last <= 0.25 s), per program kind
                scale = res["run_s"] / (t_bpf1 - t_go)
                res["bpf"] = {k: (ns * scale / 1e9, cnt) for k, (ns, cnt) in bpf_delta(bpf0, bpf1).items()}
            if not tool:
                return res
            # every tool stops by itself when the target exits; give it 60 s, then SIGINT
            t_end = time.monotonic() + 60
            while reap(tool, False) is None and time.monotonic() < t_end:
                time.sleep(0.05)
            if tool.returncode is None:
                notes.append(f"{tag}: tool still running 60 s after the target exited; sent SIGINT")
                tool.send_signal(signal.SIGINT)
            reap(tool, True)
            # the tool's CPU while the job ran (py-spy keeps sampling an idle target during the wait)
            res["tool_cpu_s"] = tool_cpu1 - tool_cpu0
            res["other_cpu_s"] = max(0.0, res["other_cpu_s"] - res["tool_cpu_s"])
            err = open(err_path).read()
            if tool.returncode != 0:
                notes.append(f"{tag}: tool exit status {tool.returncode}; its output:\n{err}")
            if is_ltrace:
                kinds, rrc, rerr = count_ltrace(out, tmp, t_go_ns, t_end_ns)
                res["samples"] = kinds.get("py_sample in window", 0)
                res["kinds"] = kinds
                m = re.search(r"(\d+) ring-buffer drops", rerr)
                res["drops"] = int(m.group(1)) if m else None
                if rrc != 0 or res["drops"] is None or res["drops"] or \
                        (mode != "ltrace-actions" and not res["samples"]):
                    notes.append(f"{tag}: report exit {rrc}, drops {res['drops']}, samples {res['samples']}"
                                 f" (trace kept as {keep(out, tag.replace(' ', '_') + '.ltrace')});"
                                 f" record stderr:\n{err}\nreport stderr:\n{rerr}")
                else:
                    for line in (err + rerr).splitlines():
                        if re.search(r"drop|lost|warn|error|fail|truncat|unread", line, re.I) and \
                                not re.search(r"lost events: 0 ring-buffer drops, 0 unreadable", line):
                            notes.append(f"{tag}: {line}")
            else:
                res["samples"], res["samples_all"], bad = count_pyspy(out)
                m = re.search(r"Samples: (\d+) Errors: (\d+)", err)
                res["errors"] = int(m.group(2)) if m else None
                if bad:
                    notes.append(f"{tag}: {bad} malformed lines in py-spy's raw output (kept as "
                                 f"{keep(out, tag.replace(' ', '_') + '.pyspy.txt')})")
                if not res["samples"]:
                    notes.append(f"{tag}: no samples; py-spy's output:\n{err}")
                for line in err.splitlines():
                    if re.search(r"behind|lag|warn|fail", line, re.I):
                        notes.append(f"{tag}: {line}")
            return res
        finally:
            for p in (job, tool):
                if p is not None and p.returncode is None:
                    p.kill()
                    reap(p, True)


def med(vals):
    return statistics.median(vals) if vals else float("nan")


def fmt_range(vals, f="{:.1f}"):
    return f"{f.format(min(vals))}–{f.format(max(vals))}" if vals else "—"


def summarize(iname, sname, modes, runs, reps):
    """Rows of the two tables and the ratio lines for one interpreter x size."""
    none = {r["rep"]: r["sps"] for r in runs["none"]}
    med_none = med(list(none.values()))
    ov = {m: (med_none / med([r["sps"] for r in runs[m]]) - 1) * 100 for m in modes if runs[m]}
    speed_rows, cost_rows = [], []
    sampler_share = {}
    paired_by_mode = {}
    for m in modes:
        rs = runs[m]
        if not rs:
            speed_rows.append(f"| {iname} | {sname} | {m} | no run succeeded | | | |")
            continue
        sps = [r["sps"] for r in rs]
        # paired per rep (one rep ran every mode back to back): a noise estimate for the overhead
        paired = [(none[r["rep"]] / r["sps"] - 1) * 100 for r in rs if r["rep"] in none]
        paired_by_mode[m] = paired
        samples = [r["samples"] for r in rs if "samples" in r]
        per_s = [r["samples"] / r["run_s"] for r in rs if "samples" in r]
        extra = ""
        errs = [r["errors"] for r in rs if r.get("errors") is not None]
        if any(errs):
            extra += f" (py-spy errors {'/'.join(str(e) for e in errs)})"
        drops = [r["drops"] for r in rs if r.get("drops")]
        if drops:
            extra += f" (drops {'/'.join(str(d) for d in drops)})"
        offcpu = [r["kinds"].get("offcpu_begin", 0) + r["kinds"].get("offcpu_end", 0) for r in rs if "kinds" in r]
        if any(offcpu):
            extra += f" (+{med(offcpu):.0f} offcpu_begin/end)"
        speed_rows.append(
            f"| {iname} | {sname} | {m} | {med(sps):.1f} ({fmt_range(sps)}) | "
            + ("—" if m == "none" else f"{ov[m]:+.1f}% ({fmt_range(paired, '{:+.1f}')}%)")
            + " | " + (f"{med(samples):.0f}{extra}" if samples else "—")
            + " | " + (f"{med(per_s):.0f}" if per_s else "—") + " |")
        if m in ("none", "advanced"):
            continue
        cpu = [r["tool_cpu_s"] for r in rs if "tool_cpu_s" in r]
        bpf = [r["bpf"] for r in rs if "bpf" in r]
        if bpf:
            def kind_ms(k):
                return med([b.get(k, (0, 0))[0] * 1e3 for b in bpf])
            bpf_s = [sum(v[0] for v in b.values()) for b in bpf]
            bpf_pct = [sum(v[0] for v in r["bpf"].values()) / r["run_s"] * 100 for r in rs if "bpf" in r]
            us_sample = [r["bpf"]["sampler"][0] * 1e6 / r["samples"] for r in rs
                         if r.get("samples") and "sampler" in r.get("bpf", {})]
            bpf_col = (f"{kind_ms('sampler'):.1f} / {kind_ms('sched'):.1f} / {kind_ms('uprobes'):.1f}")
            pct_col = f"{med(bpf_pct):.2f}% ({fmt_range(bpf_pct, '{:.2f}')}%)"
            ns_col = f"{med(us_sample):.1f}" if us_sample else "—"
            sampler_pct = [r["bpf"]["sampler"][0] / r["run_s"] * 100 for r in rs if "sampler" in r.get("bpf", {})]
            if sampler_pct:
                sampler_share[m] = (med(sampler_pct), min(sampler_pct), max(sampler_pct),
                                    med(us_sample) if us_sample else float("nan"))
        else:
            bpf_s, bpf_col, pct_col, ns_col = [], "—", "—", "—"
        # CPU per sample: the tool's process, plus (ltrace-bpf) the sampler's and sched_switch's BPF
        per_sample = []
        for r in rs:
            if r.get("samples"):
                b = r.get("bpf", {})
                s = r["tool_cpu_s"] + b.get("sampler", (0, 0))[0] + b.get("sched", (0, 0))[0]
                per_sample.append(s / r["samples"] * 1e6)
        cost_rows.append(
            f"| {iname} | {sname} | {m} | {med(cpu):.2f} | {bpf_col} | {pct_col} | {ns_col} | "
            + (f"{med(per_sample):.0f}" if per_sample else "—")
            + f" | {med([r['other_cpu_s'] for r in rs]):.2f} |")
    noise = (max(none.values()) - min(none.values())) / med_none * 100 if none else float("nan")

    def rng(m):
        return f"{ov[m]:+.1f}% (paired {fmt_range(paired_by_mode[m], '{:+.1f}')}%)"

    def ratio(a, b):
        if a not in ov or b not in ov:
            return None
        # a ratio of overheads means something only where the denominator is a slowdown in every rep
        if not paired_by_mode[b] or min(paired_by_mode[b]) <= 0 or ov[b] <= 0:
            return f"{a} / {b} overhead: n/a, {b} is not a slowdown in every rep: {b} {rng(b)}, {a} {rng(a)}"
        return f"{a} / {b} overhead: {rng(a)} / {rng(b)} = {ov[a] / ov[b]:.2f}"

    ratios = [ratio(a, b) for a, b in (("ltrace@99", "pyspy@99"), ("ltrace@999", "pyspy@999"),
                                       ("ltrace@99", "pyspy-blocking@99"), ("ltrace@99", "advanced"),
                                       ("ltrace@999", "advanced"))]
    ratios = [r for r in ratios if r]
    for m, (pct, lo, hi, us) in sampler_share.items():
        ratios.append(f"{m}: the sampler's BPF alone takes {pct:.2f}% of the window ({lo:.2f}–{hi:.2f}%), "
                      f"{us:.1f} µs per sample taken")
    ratios.append(f"none-to-none spread (max-min)/median over {len(none)} reps: {noise:.1f}%")
    return speed_rows, cost_rows, ratios


def write_markdown(path, text):
    """Replace SECTION (up to the next '## ' heading) in path, or append it."""
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


class BpfStats:
    """Switch kernel.bpf_stats_enabled on for the run; restore it after."""

    def __init__(self, want):
        self.old = None
        if not want:
            return
        try:
            self.old = open(BPF_STATS).read().strip()
            if self.old != "1":
                open(BPF_STATS, "w").write("1")
        except OSError as e:
            log(f"cannot enable {BPF_STATS} ({e}): no BPF CPU times")
            self.old = None

    def restore(self):
        if self.old not in (None, "1"):
            try:
                open(BPF_STATS, "w").write(self.old)
            except OSError as e:
                log(f"cannot restore {BPF_STATS} to {self.old}: {e}")
        self.old = None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--interp", default="debian", help="comma list of: " + ",".join(INTERPRETERS))
    ap.add_argument("--sizes", default="medium,large", help="comma list of: " + ",".join(SIZES))
    ap.add_argument("--modes", default=",".join(MODES), help="comma list of: " + ",".join(MODES))
    ap.add_argument("--max-wait", type=float, default=1800,
                    help="seconds to wait for a quiet machine before each run (then run anyway)")
    ap.add_argument("--quiet-s", type=float, default=2,
                    help="seconds the rest of the machine must be idle before each measured run")
    ap.add_argument("--max-attempts", type=int, default=8,
                    help="runs disturbed by other work (>10%% of a CPU) are repeated up to this often")
    ap.add_argument("--no-bpf-stats", action="store_true",
                    help="leave kernel.bpf_stats_enabled alone (no BPF CPU times)")
    ap.add_argument("--ltrace", default=os.path.join(ROOT, "build", "ltrace-bpf"),
                    help="the ltrace-bpf binary (copied once at the start)")
    ap.add_argument("--json", help="also write every run's measurements to this file")
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
    LTRACE = os.path.join(bindir, "ltrace-bpf")
    shutil.copy2(args.ltrace, LTRACE)
    bin_sha = hashlib.sha256(open(LTRACE, "rb").read()).hexdigest()[:12]
    bin_mtime = datetime.datetime.fromtimestamp(os.path.getmtime(LTRACE)).strftime("%Y-%m-%d %H:%M")
    git = ["git", "-C", ROOT]
    git_head = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    git_dirty = bool(subprocess.run(git + ["status", "--porcelain", "--untracked-files=no"],
                                    capture_output=True, text=True).stdout.strip())
    ltrace_id = (f"ltrace-bpf `{os.path.relpath(args.ltrace, ROOT)}` built {bin_mtime} (sha256 {bin_sha}, "
                 f"tree at {git_head}{' with uncommitted changes' if git_dirty else ''})")
    log(f"using a copy of {ltrace_id}")
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))  # run the finally below
    stats = BpfStats(not args.no_bpf_stats)
    t_start = time.monotonic()
    speed_rows, cost_rows, all_ratios, notes, retries, failures = [], [], [], [], [], []
    versions = {}
    others, run_s = [], []
    raw = []
    try:
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
                        tag = f"{iname} {skey} rep {rep + 1} {m}"
                        r = None
                        for attempt in range(1, args.max_attempts + 1):
                            try:
                                r = run_one(cmd, env, size_args, m, tag, notes,
                                            lambda pids: wait_quiet(args.max_wait, args.quiet_s, pids, notes))
                            except Exception as e:  # noqa: BLE001 - recorded, the bench goes on
                                failures.append(f"{tag}: {e}\n{traceback.format_exc(limit=3)}")
                                log(f"  {tag}: FAILED: {str(e)[:2000]}")
                                break
                            foreign = foreign_tools()
                            if r["other_cpu_s"] <= 0.1 * r["run_s"] and not foreign:
                                break
                            msg = (f"{tag}: attempt {attempt} disturbed ({r['other_cpu_s']:.2f} CPU s of "
                                   f"other work in a {r['run_s']:.1f} s run{', ' + ' '.join(foreign) if foreign else ''})")
                            log("  " + msg + ("; running it again" if attempt < args.max_attempts else "; kept"))
                            retries.append(msg)
                        if r is None:
                            continue
                        r["rep"] = rep
                        runs[m].append(r)
                        bpf = r.get("bpf")
                        log(f"[{time.monotonic() - t_start:6.0f}s] {iname} {skey} rep {rep + 1}/{args.reps} "
                            f"{m:18s} {r['sps']:8.1f} steps/s"
                            + (f"  samples {r['samples']}" if "samples" in r else "")
                            + (f"  tool cpu {r['tool_cpu_s']:.2f}s" if "tool_cpu_s" in r else "")
                            + (" bpf " + " ".join(f"{k} {v[0] * 1e3:.1f}ms/{v[1]}" for k, v in bpf.items())
                               if bpf else "")
                            + f"  other cpu {r['other_cpu_s']:.2f}s"
                            + (f" (attempt {attempt})" if attempt > 1 else "")
                            + f"  ({time.monotonic() - t0:.1f}s)")
                if not runs["none"]:
                    failures.append(f"{iname} {skey}: no 'none' run succeeded; no table")
                    continue
                others += [r["other_cpu_s"] for rs in runs.values() for r in rs]
                run_s += [r["run_s"] for rs in runs.values() for r in rs]
                srows, crows, ratios = summarize(iname, sname, modes, runs, args.reps)
                for row in srows + crows:
                    print(row, flush=True)
                for r in ratios:
                    print("  " + r, flush=True)
                raw.append({"interpreter": iname, "size": skey, "runs": runs})
                speed_rows += srows
                cost_rows += crows
                all_ratios.append((iname, sname, ratios))
    finally:
        stats.restore()
        shutil.rmtree(bindir, ignore_errors=True)
    total = time.monotonic() - t_start
    print(f"total {total:.0f} s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"argv": sys.argv[1:], "ltrace": ltrace_id, "versions": versions, "total_s": total,
                       "results": raw, "retries": retries, "failures": failures, "notes": notes}, f, indent=1)
    for n in retries:
        print("REPEATED " + n, flush=True)
    for n in failures:
        print("FAILED " + n, flush=True)
    for n in notes:
        print("NOTE " + n, flush=True)

    if args.markdown and speed_rows:
        argv = " ".join(shlex.quote(a) for a in sys.argv[1:])
        pyspy_v = subprocess.run([PYSPY, "--version"], capture_output=True, text=True).stdout.strip()
        text = [
            SECTION, "",
            "```",
            f".venv/bin/python bench/stacks_overhead.py {argv}",
            "```", "",
            f"Run {datetime.date.today().isoformat()}: {os.cpu_count()} CPUs (nproc), kernel "
            f"{platform.release()}, {ltrace_id}, {pyspy_v}, CPython "
            f"{', '.join(f'{k} {v}' for k, v in versions.items())}; {args.reps} interleaved reps (mode "
            f"order rotated each rep), {total / 60:.1f} min in all. Before each run's start signal (job "
            f"and tool already up) the rest of the machine had been idle for {args.quiet_s:g} s with no "
            f"other profiler running; runs during which other work used more than 10 % of a CPU were "
            f"repeated ({len(retries)} repeats). Other work during the kept runs: median "
            f"{med(others):.2f} CPU s, max {max(others):.2f} CPU s per run (a run is "
            f"{med(run_s):.1f} s, median).",
            "",
            "Speed: steady-state steps/s of `tests/workloads/train_lightning.py` (after its warm-up "
            "steps), median over reps (min–max). Overhead = none / mode − 1 from the medians; in "
            "brackets the min–max of the same ratio paired within each rep, a noise estimate. "
            "Samples = what the tool stored for the measured window, start signal to the job's exit "
            "(ltrace-bpf: `py_sample` lines of `report --dump` stamped in the window; py-spy: the "
            "counts of its raw output less the stacks in the workload's wait-for-start loop; both "
            "leave out idle threads); samples/s = samples / that window (the target is on-CPU nearly "
            "all of it, so this should be close to the rate).",
            "",
            "| interpreter | model | mode | steps/s (min–max) | overhead vs none (paired min–max) | "
            "samples | samples/s |",
            "|---|---|---|---|---|---|---|",
        ] + speed_rows + [
            "",
            "Cost, medians per run: tool CPU = user+sys of the tool's process in the window; BPF = "
            "run time of ltrace-bpf's programs by the kernel's counters (`kernel.bpf_stats_enabled`), "
            "by kind — sampler (perf_event, fires on every CPU at the rate), sched (tp_btf: "
            "sched_switch with `--off-cpu`, fork/exec/exit), uprobes (action probes); BPF % = all "
            "BPF time / window, i.e. CPU taken on the target's CPUs (a floor under the overhead: the "
            "timer interrupt and uprobe trap around each run are not in it); sampler BPF µs per sample = "
            "sampler BPF time / samples (includes the program's early exits on CPUs running other "
            "threads); CPU µs per sample = "
            "(tool CPU + sampler and sched BPF) / samples; other CPU = the whole machine's CPU in the "
            "window less the job's and the tool's (`/proc/stat`).",
            "",
            "| interpreter | model | mode | tool CPU s | BPF ms sampler / sched / uprobes | BPF % of window "
            "(min–max) | sampler BPF µs per sample | CPU µs per sample | other CPU s |",
            "|---|---|---|---|---|---|---|---|---|",
        ] + cost_rows + [""]
        for iname, sname, ratios in all_ratios:
            text += [f"{iname}, {sname}:", ""] + [f"* {r}" for r in ratios] + [""]
        if failures or notes:
            text += ["Failures and notes from the tools (stderr):", "", "```"] + failures + notes + ["```", ""]
        write_markdown(args.markdown, "\n".join(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
