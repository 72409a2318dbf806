"""Attach latency and cost per Lightning action on CPython 3.14 and 3.15
(Debian sid's, inside a real container) next to 3.11 (Debian 12's, on the
host), in one run, interleaved, so the machine's load falls on all alike.

  attach: ltrace-bpf's own "attach latency" (session start -> probes live)
  action: ns per `with profiler.profile(name): pass` on Lightning 2.6.6's
          PassThroughProfiler, with ltrace-bpf attached minus without

usage: .venv/bin/python bench/reach.py [--reps 5] [--n 100000]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import containers  # noqa: E402
import lightning_site  # noqa: E402

LTRACE = os.path.join(ROOT, "build", "ltrace-bpf")
# The same timed loop as bench/action_cost.py ("pass": PassThroughProfiler).
sys.path.insert(0, os.path.join(ROOT, "bench"))
from action_cost import LOOP  # noqa: E402

TARGETS = [("debian-3.11-exe (host)", None, "/usr/bin/python3.11"),
           ("pyenv-3.11-lib (host)", None, "/root/.pyenv/versions/3.11.7/bin/python3.11"),
           ("sid-3.14-exe (container)", "sid", "/usr/bin/python3.14"),
           ("sid-3.14-lib (container)", "sid", "/usr/local/bin/python3.14-shared"),
           ("sid-3.15-exe (container)", "sid", "/usr/bin/python3.15"),
           ("sid-3.15-lib (container)", "sid", "/usr/local/bin/python3.15-shared")]


def one(root, python, n, attach, host_site):
    """-> (ns per action, attach latency ms or None)"""
    box = containers.Box(root, mode="container") if root else None
    try:
        if box:
            lightning_site.build(box.host(box.inside + "/site"), "2.6.6")
            site, go = box.inside + "/site", box.inside + "/go"
            out_path = box.host(box.inside + "/out")
            with open(out_path, "w") as out:
                box.start([python, "-c", LOOP, "pass", str(n), go], env={"PYTHONPATH": site}, stdout=out)
            pid, go_host, proc = box.pid, box.host(go), box.proc
        else:
            tmp = os.path.join("/tmp", f"lt-reach-{os.getpid()}")
            os.makedirs(tmp, exist_ok=True)
            go_host = os.path.join(tmp, "go")
            if os.path.exists(go_host):
                os.unlink(go_host)
            out_path = os.path.join(tmp, "out")
            with open(out_path, "w") as out:
                proc = subprocess.Popen([python, "-c", LOOP, "pass", str(n), go_host], stdout=out,
                                        env=dict(os.environ, PYTHONPATH=host_site))
            pid = proc.pid
        while "READY" not in open(out_path).read():
            time.sleep(0.01)
        lt, latency = None, None
        if attach:
            lt = subprocess.Popen([LTRACE, "--pid", str(pid), "-v"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
            while True:
                line = lt.stderr.readline()
                m = re.search(r"attached: .*?([0-9.]+) ms", line)
                if m:
                    latency = float(m.group(1))
                    break
                if not line:
                    raise RuntimeError("ltrace-bpf ended before attaching")
        open(go_host, "w").close()
        proc.wait(300)
        text = open(out_path).read()
        ns = float(text.split("NS_PER_ACTION", 1)[1].split()[0])
        if lt:
            lt.communicate(timeout=60)
        return ns, latency
    finally:
        if box:
            box.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--n", type=int, default=100000)
    a = ap.parse_args()
    host_site = lightning_site.build(f"/tmp/lt-reach-site-{os.getpid()}", "2.6.6")
    sid = containers.root_path("sid")
    res = {name: {"off": [], "on": [], "attach": []} for name, _, _ in TARGETS}
    for _ in range(a.reps):
        for name, root, python in TARGETS:
            r = sid if root else None
            off, _ = one(r, python, a.n, False, host_site)
            on, lat = one(r, python, a.n, True, host_site)
            res[name]["off"].append(off)
            res[name]["on"].append(on)
            res[name]["attach"].append(lat)
    base = None
    print(f"{'interpreter':28} {'attach ms (median/max)':>24} {'ns/action off':>14} {'on':>8} {'added':>8}"
          f" {'attach vs 3.11':>15} {'added vs 3.11':>14}")
    for name, _, _ in TARGETS:
        r = res[name]
        med_attach, max_attach = statistics.median(r["attach"]), max(r["attach"])
        off, on = statistics.median(r["off"]), statistics.median(r["on"])
        added = statistics.median([b - a_ for a_, b in zip(r["off"], r["on"])])
        if base is None:
            base = (med_attach, added)
        print(f"{name:28} {med_attach:>12.1f} / {max_attach:<9.1f} {off:>14.0f} {on:>8.0f} {added:>8.0f}"
              f" {med_attach / base[0]:>14.2f}x {added / base[1]:>13.2f}x")


if __name__ == "__main__":
    main()
