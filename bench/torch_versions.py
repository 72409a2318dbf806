"""The op observer on torch versions the tests do not install (issue 35: the
layouts per torch version are data, tests/integration run 1.13.1 and 2.15.0
only): for each `--torch X`, a venv of pyenv's CPython 3.11 with torch X
and a Lightning from PyPI (the Linux wheels are CUDA builds: a few GB each,
made once under --venvs), then, attached to the same runs as torch.profiler,
test_ops.py's own checks, printed instead of asserted:

  ops      torch_ops.py --iters 800 (and --raising): the observer measured
           the times (or its one-line reason not to), every raw call count
           equal to torch.profiler's, check_calls and check_measured, the
           job's RESULT line equal to a run without the tracer;
  probes   the same with --no-inject: the op probes' counts;
  shapes   --group-by-input-shapes against record_shapes=True;
  fit      train_lightning.py --epochs 1 --batches 12, --report simple,ops.

  .venv/bin/python bench/torch_versions.py --torch 2.3.1 --lightning pytorch-lightning==2.2.5 --numpy "<2"
  .venv/bin/python bench/torch_versions.py --python /some/venv/bin/python     # an existing venv
"""
import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from conftest import LTRACE, wait_for  # noqa: E402
from ops_table import merged, parse_ops_report  # noqa: E402
from test_ops import (TORCH_OPS, TRAIN, check_calls, check_measured, profile_rows, raw_calls,  # noqa: E402
                      torch_profile)

PYENV_311 = sorted(pathlib.Path("/root/.pyenv/versions").glob("3.11.*/bin/python3.11"))


def venv_for(args):
    if args.python:
        return args.python
    if not PYENV_311:
        sys.exit("no pyenv CPython 3.11 under /root/.pyenv/versions")
    d = pathlib.Path(args.venvs) / f"torch-{args.torch}"
    py = d / "bin" / "python"
    if not py.exists():
        subprocess.run([str(PYENV_311[-1]), "-m", "venv", str(d)], check=True)
        pkgs = [f"torch=={args.torch}", args.lightning] + ([f"numpy{args.numpy}"] if args.numpy else [])
        subprocess.run([str(d / "bin" / "pip"), "install", "--no-cache-dir", "-q"] + pkgs, check=True)
    return str(py)


def attach(tmp, cmd, lt_args):
    """conftest's `attach`: the job waits for GO, the tracer attaches, GO."""
    go, out, err, lt_out = tmp / "go", tmp / "job.out", tmp / "lt.err", tmp / "lt.out"
    with open(out, "w") as o:
        job = subprocess.Popen(cmd[:2] + ["--wait-file", str(go)] + cmd[2:], stdout=o, stderr=subprocess.STDOUT, cwd=tmp)
    try:
        wait_for(str(out), "READY", 600, job)
        with open(lt_out, "w") as lo, open(err, "w") as le:
            lt = subprocess.Popen([LTRACE, "--pid", str(job.pid), "-v"] + lt_args, stdout=lo, stderr=le, cwd=tmp)
        wait_for(str(err), "attached", 120, lt)
        go.touch()
        rc = job.wait(timeout=1800)
        lt_rc = lt.wait(timeout=300)
    finally:
        if job.poll() is None:
            job.kill()
    return rc, lt_rc, out.read_text(), lt_out.read_text(), err.read_text()


def check(name, fn):
    try:
        fn()
        return f"{name} ok"
    except AssertionError as e:
        return f"{name} FAILED ({str(e)[:300]})"


def ops(py, tmp, extra, probes=False):
    plain = subprocess.run([py, TORCH_OPS, "--iters", "800"] + extra, capture_output=True, text=True, timeout=1800)
    rc, lt_rc, job_out, out, err = attach(tmp, [py, TORCH_OPS, "--profile", "prof.json", "--iters", "800"] + extra,
                                          ["--report", "ops", "--row-limit", "-1", "--dump", "dump.txt"] +
                                          (["--no-inject"] if probes else []))
    said = [x for x in err.splitlines() if "op observer" in x or "are exact" in x or "sampled estimates" in x]
    def result(text):
        return next((x for x in text.splitlines() if x.startswith("RESULT")), None)

    lines = [f"job rc {rc}, tracer rc {lt_rc}, RESULT as without the tracer: "
             f"{result(job_out) is not None and result(job_out) == result(plain.stdout)}",
             "times: " + ("measured by the op observer" if "# of Calls and CPU times are exact" in err
                          else "sampled (" + " | ".join(said[-2:]) + ")")]
    if rc != 0 or lt_rc != 0:
        return lines + [err[-1500:]]
    theirs = profile_rows(tmp / "prof.json")
    raw = raw_calls(tmp / "dump.txt")
    wrong = [(n, raw.get(n), t["raw"]) for n, t in theirs.items() if raw.get(n) != t["raw"]]
    lines.append(f"raw calls equal to torch.profiler's: {len(theirs) - len(wrong)} of {len(theirs)} ops {wrong[:5]}")
    ours = merged(parse_ops_report(out))
    data = json.loads((tmp / "prof.json").read_text())
    lines.append(check("check_calls", lambda: check_calls(ours, theirs)))
    if not probes:  # sampled times: test_ops.check_shares' estimates, not these bounds
        lines.append(check("check_measured", lambda: check_measured(ours, theirs, 2.0,
                                                                    max(0.0, data["wall_s"] - data["cpu_s"]) * 1e6)))
    mine = sum(r["self_us"] for n, r in ours.items() if n in theirs)
    total = sum(t["self_cpu_time_total"] for t in theirs.values())
    lines.append(f"Self CPU of all ops: {mine / 1e3:.1f} ms against torch.profiler's {total / 1e3:.1f} ms "
                 f"({100 * (mine - total) / total:+.2f} %)")
    return lines


def shapes(py, tmp):
    args = ["--iters", "100", "--raising"]
    theirs, _ = torch_profile(py, args + ["--record-shapes"], tmp)
    want = json.loads((tmp / "prof.json").read_text())["shapes"]
    rc, lt_rc, _, out, err = attach(tmp, [py, TORCH_OPS] + args,
                                    ["--report", "ops", "--group-by-input-shapes", "--row-limit", "-1"])
    ours = {}
    for line in out.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) == 8 and cells[0].startswith("aten::"):
            ours[cells[0] + " " + cells[7]] = ours.get(cells[0] + " " + cells[7], 0) + int(cells[6])
    merged_names = {n for n, t in theirs.items() if t["raw"] != t["count"]}  # torch merged nested calls
    keys = [k for k in want if k.startswith("aten::") and k.split(" ")[0] not in merged_names]
    wrong = [(k, ours.get(k), want[k]) for k in keys if ours.get(k) != want[k]]
    return [f"job rc {rc}, tracer rc {lt_rc}; (op, input shapes) rows equal to torch.profiler's: "
            f"{len(keys) - len(wrong)} of {len(keys)} {wrong[:5]}"]


def fit(py, tmp):
    rc, lt_rc, job_out, out, err = attach(tmp, [py, TRAIN, "--epochs", "1", "--batches", "12"],
                                          ["--report", "simple,ops"])
    tables = parse_ops_report(out)
    return [f"job rc {rc}, tracer rc {lt_rc}, {job_out.strip().splitlines()[-1][:80] if job_out.strip() else ''}; "
            f"times measured: {'# of Calls and CPU times are exact' in err}; op tables: {sorted(tables)}"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--torch", help="a torch version on PyPI")
    ap.add_argument("--lightning", default="pytorch-lightning", help="its pip requirement")
    ap.add_argument("--numpy", default="", help='a numpy pin, e.g. "<2" for torch < 2.3')
    ap.add_argument("--python", help="an existing venv's python instead")
    ap.add_argument("--venvs", default="/var/cache/ltrace-bpf/torch-venvs")
    args = ap.parse_args()
    if not args.torch and not args.python:
        ap.error("--torch or --python")
    py = venv_for(args)
    version = subprocess.run([py, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                             text=True).stdout.strip()
    print(f"torch {version} ({py})")
    for name, run in (("ops", lambda t: ops(py, t, [])), ("ops --raising", lambda t: ops(py, t, ["--raising"])),
                      ("probes", lambda t: ops(py, t, [], probes=True)), ("shapes", lambda t: shapes(py, t)),
                      ("fit", lambda t: fit(py, t))):
        with tempfile.TemporaryDirectory() as d:
            for line in run(pathlib.Path(d)):
                print(f"  {name}: {line}", flush=True)


if __name__ == "__main__":
    main()
