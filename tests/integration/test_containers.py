"""Where real jobs run: CPython 3.13, 3.14 and 3.15 from Debian sid (both
layouts: the interpreter in the executable, and in libpython3.X.so through an
embedding executable), inside real containers (own pid, mount and UTS
namespaces, pivot_root) and plain chroots, with torch 2.15 and Lightning
2.6.6 from PyPI.  The root file systems come from the Debian registry
(tests/roots/build.sh, cached)."""
import json
import os
import re
import shutil
import subprocess
import threading
import time

import pytest

import containers
import lightning_site
from busy import share_tolerance
from conftest import LTRACE, WORKLOADS, parse_simple_report, wait_for
from ops_table import merged, parse_ops_report
from test_module_rows import profile_rows
from test_gc_probes import SAMPLED_ARGS, SAMPLED_LT_ARGS, check_collections, check_sampled_collections
from test_ops import assert_merged_calls


@pytest.fixture(scope="module")
def sid():
    return containers.root_path("sid")


class BoxRun:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def run_boxed(root, tmp_path, python, script, args=(), lt_args=(), mode="container", env=None, site=None,
              hostname=None, cgroup_id=None, before_release=None, subcommand=None, timeout=240, extra_files=(),
              after=None):
    """Starts `python script --wait-file GO args` inside a container (or
    chroot) of `root`, attaches ltrace-bpf from the host, releases it.
    extra_files: put beside the script; "{inside}" in args: the box's own
    directory, inside; after(box): called once the target ended, before the
    box goes."""
    box = containers.Box(root, mode=mode, hostname=hostname, cgroup_id=cgroup_id)
    try:
        inside_script = box.put(script)
        for f in extra_files:
            box.put(f)
        args = [a.replace("{inside}", box.inside) for a in args]  # a path in the box's own directory
        python = python.replace("{inside}", box.inside)
        envp = dict(env or {})
        if site:
            lightning_site.build(box.host(box.inside + "/site"), "2.6.6")
            envp["PYTHONPATH"] = box.inside + "/site" + (":" + envp["PYTHONPATH"] if "PYTHONPATH" in envp else "")
        go = box.inside + "/go"
        out_path, lt_out, lt_err = tmp_path / "target.out", tmp_path / "lt.out", tmp_path / "lt.err"
        with open(out_path, "w") as out:
            box.start([python, inside_script, "--wait-file", go] + list(args), env=envp, stdout=out)
        wait_for(str(out_path), "READY", 600, box.proc)
        with open(lt_out, "w") as lo, open(lt_err, "w") as le:
            lt = subprocess.Popen([LTRACE] + ([subcommand] if subcommand else []) +
                                  ["--pid", str(box.pid), "-v"] + list(lt_args), stdout=lo, stderr=le, cwd=tmp_path)
        wait_for(str(lt_err), "attached", 120, lt)  # as conftest: a busy machine attaches slowly
        if before_release:
            before_release(box)
        open(box.host(go), "w").close()
        target_rc = box.wait(timeout)
        lt_rc = lt.wait(300)
        if after:
            after(box)
        return BoxRun(target_rc=target_rc, lt_rc=lt_rc, target_out=out_path.read_text(encoding="utf-8"),
                      lt_out=lt_out.read_text(encoding="utf-8"), lt_err=lt_err.read_text(encoding="utf-8"),
                      pid=box.pid, hostname=box.hostname)
    finally:
        box.stop()


INTERPRETERS = [(v, layout, mode)
                for v in ("3.13", "3.14", "3.15")
                for layout, mode in (("exe", "container"), ("lib", "container"), ("exe", "chroot"))] + \
               [("3.15", "lib", "chroot")]


def python_of(version, layout):
    return f"/usr/bin/python{version}" if layout == "exe" else f"/usr/local/bin/python{version}-shared"


@pytest.mark.parametrize("version,layout,mode", INTERPRETERS,
                         ids=[f"{v}-{l}-{m}" for v, l, m in INTERPRETERS])
def test_lightning_actions(sid, tmp_path, version, layout, mode):
    """Lightning 2.6.6's real Profiler.profile: exact counts, the interpreter
    named as the target maps it, in both layouts and both ways in."""
    run = run_boxed(sid, tmp_path, python_of(version, layout), os.path.join(WORKLOADS, "profiler_actions.py"),
                    mode=mode, site=True)
    assert run.target_rc == 0, run.target_out
    assert run.lt_rc == 0, run.lt_err
    result = json.loads(run.target_out.split("RESULT ", 1)[1])
    assert result["version"] == [3, int(version.split(".")[1])]
    rows = parse_simple_report(run.lt_out)
    expected = dict(result["counts"])
    expected.pop("direct")  # a plain Python call: see test_versions.py
    for name, count in expected.items():
        assert name in rows, f"{name} missing:\n{run.lt_out}"
        assert int(rows[name][1]) == count, (name, rows[name])
        assert float(rows[name][2]) >= 0.98 * result["body"][name], (name, rows[name], result["body"][name])
    assert f"CPython {version} " in run.lt_err, run.lt_err
    assert (f"libpython{version}.so" if layout == "lib" else f"bin/python{version})") in run.lt_err, run.lt_err
    assert " 0 unreadable" in run.lt_err, run.lt_err


def shares(rows):
    cum = {}
    for r in rows:
        for f in ("hot_a", "hot_b", "hot_c"):
            if r.endswith(f"({f})"):
                cum[f] = cum.get(f, 0) + rows[r]
    total = sum(cum.values())
    return {f: 100.0 * cum.get(f, 0) / total for f in ("hot_a", "hot_b", "hot_c")}, total


def advanced_rows(text):
    """{label: cum samples} of the "[no Lightning action]" section."""
    rows, inside = {}, False
    for line in text.splitlines():
        if line.startswith("Profile stats for: "):
            inside = line.endswith("[no Lightning action]")
            continue
        cells = line.split()
        if inside and len(cells) >= 7 and cells[0].isdigit() and cells[1].isdigit():
            rows[cells[-1]] = int(cells[1])
    return rows


@pytest.mark.parametrize("version,layout", [("3.14", "exe"), ("3.15", "exe"), ("3.15", "lib")])
def test_sampler_shares(sid, tmp_path, version, layout):
    """The sampler's 60/30/10 ground truth inside a container (pid namespace:
    3.15 has no pthread key, so thread states come from its thread list with
    namespace tids translated), and a thread that released the GIL is seen."""
    run = run_boxed(sid, tmp_path, python_of(version, layout), os.path.join(WORKLOADS, "cpu_shares.py"),
                    args=["--seconds", "4", "--min-cpu-seconds", "1", "--hasher"],
                    lt_args=["--rate", "999", "--report", "advanced", "--line-count-restriction", "40"])
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    rows = advanced_rows(run.lt_out)
    measured, total = shares(rows)
    # Against the CPU time each function really used (the workload's own
    # account): 4 points, or 4 binomial standard errors of the samples taken
    # when a busy machine gave the target little CPU.
    cpu_s = json.loads(run.target_out.strip().splitlines()[-1])["cpu_s"]
    assert total >= 100, rows  # below this no share means much
    for f in ("hot_a", "hot_b", "hot_c"):
        expected = 100.0 * cpu_s[f] / sum(cpu_s.values())
        assert abs(measured[f] - expected) <= share_tolerance(expected / 100, total, 4.0), (f, measured, cpu_s, rows)
    hasher = sum(n for label, n in rows.items() if label.endswith("(hasher)"))
    assert hasher > 0.2 * total, (hasher, total, rows)


@pytest.mark.parametrize("version", ["3.13", "3.14", "3.15"])
def test_ops_torch_2_15(sid, tmp_path, version):
    """torch 2.15 from PyPI inside the container: every op call that
    torch.profiler records in the same run, we count; and the op observer
    measured them (the bridge handed to the job in a memfd, whatever its
    mount namespace: no '~' estimates), on sid's CPython 3.13 to 3.15."""
    site = f"/opt/site/cp{version.replace('.', '')}"
    python = f"/usr/bin/python{version}"
    script = os.path.join(WORKLOADS, "torch_ops.py")
    args = ["--iters", "200"]
    # torch.profiler's counts, of the same run
    theirs = {}

    def read_profile(box):
        theirs.update(json.load(open(box.host(box.inside + "/prof.json"))))

    run = run_boxed(sid, tmp_path, python, script, args=["--profile", "{inside}/prof.json"] + args, env={"PYTHONPATH": site},
                    lt_args=["--report", "ops", "--row-limit", "-1"], extra_files=[os.path.join(WORKLOADS, "torch_merge.py")],
                    after=read_profile)
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err + run.target_out[-2000:]
    assert "op observer not used" not in run.lt_err, run.lt_err[-3000:]
    assert "Self CPU~" not in run.lt_out and "Self CPU" in run.lt_out, run.lt_out[-3000:]
    assert "bridge injected" in run.lt_err and "from a memfd" in run.lt_err, run.lt_err[-3000:]
    ours = merged(parse_ops_report(run.lt_out))
    checked = 0
    for name, n in theirs["raw_counts"].items():
        if not name.startswith("aten::"):
            continue
        if theirs["ops"][name]["count"] == n:
            assert ours.get(name, {}).get("calls") == n, (name, ours.get(name), n)
        else:  # torch merged same-named nested calls: see test_ops.check_calls
            assert_merged_calls(name, ours.get(name, {}).get("calls", 0), theirs["exact_merged"].get(name, 0),
                                theirs["merge_ties"].get(name, 0), n)
        checked += 1
    assert checked >= 10, theirs["raw_counts"]


@pytest.mark.parametrize("version", ["3.14", "3.15"])
def test_module_rows_torch_2_15(sid, tmp_path, version):
    """--module-names inside the container on sid's CPython 3.14/3.15 (the
    nn.Module tree read from outside with those versions' object layouts):
    the [pl][module] rows have the names and calls of Lightning's
    PyTorchProfiler(record_module_names=True) on the same fit in the same root."""
    site = f"/opt/site/cp{version.replace('.', '')}"
    python = f"/usr/bin/python{version}"
    script = os.path.join(WORKLOADS, "module_fit.py")
    ref = containers.Box(sid, mode="container")
    try:
        inside = ref.put(script)
        with open(tmp_path / "ref.out", "w") as out:
            ref.start([python, inside, "--reference", ref.inside + "/ref.json"], env={"PYTHONPATH": site}, stdout=out)
        assert ref.wait(600) == 0, (tmp_path / "ref.out").read_text()[-2000:]
        theirs = json.load(open(ref.host(ref.inside + "/ref.json")))
        ref_out = (tmp_path / "ref.out").read_text()
    finally:
        ref.stop()
    run = run_boxed(sid, tmp_path, python, script, env={"PYTHONPATH": site},
                    lt_args=["--module-names", "--row-limit", "-1"], timeout=600)
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    assert [l for l in run.target_out.splitlines() if l.startswith("RESULT")] == \
        [l for l in ref_out.splitlines() if l.startswith("RESULT")]
    want = profile_rows(theirs, "[pl][module]")  # names cut as the table cuts them
    assert len(want) >= 6 and any(name.endswith(": block.act") for name in theirs), theirs
    ours = merged(parse_ops_report(run.lt_out))
    assert {name: r["calls"] for name, r in ours.items() if name.startswith("[pl][module]")} == want, run.lt_out[-3000:]


def test_same_named_file_on_host_is_not_used(sid, tmp_path):
    """The container's /usr/bin/python3.13 is another file than a same-named
    one on the host: the probes must land on the container's."""
    decoy = "/usr/bin/python3.13"
    planted = not os.path.exists(decoy)
    if planted:
        shutil.copy("/usr/bin/python3.11", decoy)
    try:
        run = run_boxed(sid, tmp_path, "/usr/bin/python3.13", os.path.join(WORKLOADS, "profiler_actions.py"),
                        site=True)
    finally:
        if planted:
            os.unlink(decoy)
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    rows = parse_simple_report(run.lt_out)
    assert rows["outer"][1] == "20" and rows["custom"][1] == "3", run.lt_out


def test_root_gone(sid, tmp_path):
    """A chroot'ed process whose files were moved away after it started
    (its script and Lightning site): what it maps is still reachable."""
    box = containers.Box(sid, mode="chroot")
    moved = None
    try:
        script = box.put(os.path.join(WORKLOADS, "profiler_actions.py"))
        lightning_site.build(box.host(box.inside + "/site"), "2.6.6")
        with open(tmp_path / "t.out", "w") as out:
            box.start(["/usr/bin/python3.14", script, "--wait-file", box.inside + "/go"],
                      env={"PYTHONPATH": box.inside + "/site"}, stdout=out)
        wait_for(str(tmp_path / "t.out"), "READY", 120, box.proc)
        go_host = box.host(box.inside + "/go")
        # Move the per-test directory (the script's and its site's files)
        # away: what the process mapped stays reachable through map_files.
        moved = str(tmp_path / "moved")
        shutil.move(box.host(box.inside), moved)
        os.makedirs(box.host(box.inside))
        lt_err = tmp_path / "lt.err"
        with open(lt_err, "w") as le:
            r = subprocess.Popen([LTRACE, "--pid", str(box.pid), "-v"], stdout=subprocess.PIPE, stderr=le, text=True)
        wait_for(str(lt_err), "attached", 60, r)  # not a fixed sleep: attaching takes longer on a busy machine
        open(go_host, "w").close()
        assert box.wait(60) == 0
        out, _ = r.communicate(timeout=60)
        err = lt_err.read_text()
        assert r.returncode == 0, err
        rows = parse_simple_report(out)
        assert rows["outer"][1] == "20", out
    finally:
        box.stop()


def test_zombie_and_exited(tmp_path):
    """A zombie and a process that is gone: one line each, exit 3."""
    child = subprocess.Popen(["/bin/true"])
    deadline = time.time() + 10
    while time.time() < deadline:
        with open(f"/proc/{child.pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.01)
    try:
        r = subprocess.run([LTRACE, "--pid", str(child.pid)], capture_output=True, text=True, timeout=30)
        assert r.returncode == 3, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    finally:
        child.wait()
    r = subprocess.run([LTRACE, "--pid", str(child.pid)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 3 and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_version_we_cannot_read(sid, tmp_path):
    """A CPython newer than our tables (a copy of 3.15 whose Py_Version says
    3.16): one line naming the version and what is missing, exit 5."""
    import struct
    src = sid + "/usr/bin/python3.15"
    dst = sid + "/usr/local/bin/python3.16-test"
    data = bytearray(open(src, "rb").read())
    out = subprocess.run(["readelf", "-sW", src], capture_output=True, text=True).stdout
    sym = next(line.split() for line in out.splitlines() if line.split()[-1:] == ["Py_Version"])
    vaddr = int(sym[1], 16)
    sections = subprocess.run(["readelf", "-lW", src], capture_output=True, text=True).stdout
    offset = None
    for line in sections.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            off, va, filesz = int(f[1], 16), int(f[2], 16), int(f[4], 16)
            if va <= vaddr < va + filesz:
                offset = off + vaddr - va
    assert offset is not None
    (hexversion,) = struct.unpack_from("<I", data, offset)
    assert (hexversion >> 16) & 0xff == 15
    struct.pack_into("<I", data, offset, (hexversion & ~0xff0000) | (16 << 16))
    open(dst, "wb").write(bytes(data))
    os.chmod(dst, 0o755)
    box = containers.Box(sid, mode="container")
    try:
        with open(tmp_path / "t.out", "w") as out:
            box.start([dst.replace(sid, ""), "-c", "import time; print('READY', flush=True); time.sleep(30)"],
                      stdout=out)
        wait_for(str(tmp_path / "t.out"), "READY", 120, box.proc)
        r = subprocess.run([LTRACE, "--pid", str(box.pid)], capture_output=True, text=True, timeout=30)
        assert r.returncode == 5, r.stderr
        line = r.stderr.strip()
        assert len(line.splitlines()) == 1 and "CPython 3.16" in line and "_Py_DebugOffsets" in line, line
    finally:
        box.stop()
        os.unlink(dst)


def test_container_named_in_reports(sid, tmp_path):
    """Reports name the container: its UTS hostname, the id from its cgroup
    path (as Docker names it), and the pid inside; live and from the trace."""
    cid = "0123456789ab" + "cdef0123456789abcdef0123456789abcdef0123456789abcdef"[:52]
    trace = tmp_path / "c.ltrace"
    run = run_boxed(sid, tmp_path, "/usr/bin/python3.14", os.path.join(WORKLOADS, "profiler_actions.py"),
                    site=True, hostname="trainer-7", cgroup_id=cid, lt_args=["-o", str(trace)])
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err
    import re
    note = re.search(r"runs in container trainer-7 \(id 0123456789ab, pid (\d+) inside\)", run.lt_err)
    assert note, run.lt_err
    assert int(note.group(1)) != run.pid  # its own pid namespace
    r = subprocess.run([LTRACE, "report", str(trace)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "runs in container trainer-7 (id 0123456789ab" in r.stderr, r.stderr
    assert parse_simple_report(r.stdout)["outer"][1] == "20"


@pytest.mark.parametrize("version", ["3.13", "3.14", "3.15"])
def test_gc_pauses_in_a_container(sid, tmp_path, version):
    """sid's CPythons carry the USDT gc probes: attached from the host into
    the container (the interpreter file as the target maps it), every full
    collection is recorded with the count gc.collect() returned."""
    trace = tmp_path / "gc.ltrace"
    run = run_boxed(sid, tmp_path, python_of(version, "exe"), os.path.join(WORKLOADS, "gc_cycles.py"),
                    lt_args=["--report", "verdict", "-o", str(trace)])
    assert run.target_rc == 0, run.target_out
    assert run.lt_rc == 0, run.lt_err
    check_collections(trace, run.target_out, run.lt_err)


@pytest.mark.parametrize("version", ["3.14", "3.15"])
def test_gc_pauses_estimated_in_a_container_without_probes(sid, tmp_path, version):
    """sid's CPython as built without --with-dtrace (its USDT notes
    removed; Debian's binary has no symbol table either): the collections'
    time comes from the samples taken inside one, read through the layout
    its _Py_DebugOffsets publish."""
    exe = tmp_path / f"python{version}-noprobes"
    subprocess.run(["objcopy", "-R", ".note.stapsdt", os.path.join(sid, f"usr/bin/python{version}"), str(exe)],
                   check=True)
    trace = tmp_path / "gc.ltrace"
    run = run_boxed(sid, tmp_path, "{inside}/" + exe.name, os.path.join(WORKLOADS, "gc_cycles.py"),
                    args=SAMPLED_ARGS, extra_files=[str(exe)], env={"PYTHONHOME": "/usr"},
                    lt_args=["--report", "verdict", "-o", str(trace)] + SAMPLED_LT_ARGS)
    assert run.target_rc == 0, run.target_out
    assert run.lt_rc == 0, run.lt_err
    assert exe.name in run.lt_err, run.lt_err
    check_sampled_collections(trace, run.target_out, run.lt_err)



def test_dataloader_workers_through_a_forkserver_without_children(sid, tmp_path):
    """A real fit on sid's CPython 3.14, whose multiprocessing starts
    DataLoader workers through a forkserver (the default from 3.14 on
    Linux: the workers are the server's children, not the trainer's),
    attached from the host with --pid alone: the verdict's /proc sampler
    finds them through the server (in the container's processes, by host
    pid) and judges their CPU share."""
    site = "/opt/site/cp314"
    served = set()  # host pids of the forkserver's children, as the job ran
    done = threading.Event()

    def children(pid):
        try:
            return [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]
        except OSError:
            return []

    def watch_the_server(box):
        def poll():
            while not done.is_set():
                for c in children(box.pid):
                    try:
                        if b"multiprocessing.forkserver" in open(f"/proc/{c}/cmdline", "rb").read():
                            served.update(children(c))
                    except OSError:
                        pass
                time.sleep(0.05)
        threading.Thread(target=poll, daemon=True).start()

    try:
        run = run_boxed(sid, tmp_path, "/usr/bin/python3.14", os.path.join(WORKLOADS, "train_lightning.py"),
                        args=["--epochs", "1", "--batches", "300", "--batch-size", "16", "--workers", "2",
                              "--data-delay", "0.002"],
                        env={"PYTHONPATH": site}, lt_args=["--report", "verdict"], timeout=600,
                        before_release=watch_the_server)
    finally:
        done.set()
    assert run.target_rc == 0 and run.lt_rc == 0, run.lt_err[-3000:] + run.target_out[-2000:]
    m = re.search(r"(\d+) DataLoader worker process\(es\) \(pid ([0-9, ]+), not traced: --pid without --children; "
                  r"seen from /proc\), on a CPU", run.lt_out)
    assert m and int(m.group(1)) == 2, run.lt_out
    # They were the forkserver's children, not the trainer's.
    assert {int(p) for p in m.group(2).split(", ")} <= served, (m.group(2), served)
