"""The bridge beyond this machine's glibc and mount namespace (issue 14):

* build/libltrace-bridge.so imports nothing newer than glibc 2.28 and no
  libstdc++ / libgcc_s (what `make bridge` checks, checked here again, and
  the check itself shown to catch a newer import);
* it loads into a real glibc 2.31 process (Debian bullseye's python3.9 in a
  real container, tests/roots/build.sh), by ctypes and by ltrace-bpf's
  ptrace injection, and C++ exceptions still unwind in such a process;
* a containerised job gets the bridge as a memfd: nothing is left in the
  container's file system, the job's output is unchanged, the bridge reports
  its state through its USDT probes; where neither a memfd nor the path can
  reach the job (a chroot without /proc), one clear note says so.

The job "uses CUDA" through tests/workloads/libcuda_stub.c: a libcuda.so.1
that imports nothing, so it loads into any image.  Needs root (ptrace, BPF,
namespaces) and the bullseye root (built once, a few minutes; cached)."""
import os
import re
import subprocess

import pytest

from conftest import LTRACE, ROOT, WORKLOADS
from containers import Box, root_path

BRIDGE = os.path.join(ROOT, "build", "libltrace-bridge.so")
EH_TEST = os.path.join(ROOT, "build", "bridge-eh-test.so")
CHECK = os.path.join(ROOT, "tests", "check_glibc_versions.sh")
GLIBC_MAX = (2, 28)

pytestmark = pytest.mark.skipif(not os.path.exists(BRIDGE), reason="bridge not built (make bridge)")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (ptrace, BPF, namespaces)")


def dynamic_imports(lib):
    """(name, version) of every undefined dynamic symbol, `objdump -T`."""
    out = subprocess.run(["objdump", "-T", lib], check=True, capture_output=True, text=True).stdout
    imports = []
    for line in out.splitlines():
        if "*UND*" in line:
            fields = line.split()
            imports.append((fields[-1], fields[-2].strip("()")))
    return imports


def needed(lib):
    out = subprocess.run(["objdump", "-p", lib], check=True, capture_output=True, text=True).stdout
    return [l.split()[1] for l in out.splitlines() if l.strip().startswith("NEEDED")]


@pytest.mark.parametrize("lib", [BRIDGE, EH_TEST], ids=["bridge", "eh-test"])
def test_imports_nothing_newer_than_glibc_2_28(lib):
    imports = dynamic_imports(lib)
    versions = {v for _, v in imports if v.startswith("GLIBC_")}
    assert "GLIBC_2.2.5" in versions  # the objdump output was parsed
    too_new = [(n, v) for n, v in imports if re.fullmatch(r"GLIBC_[\d.]+", v)
               and tuple(int(x) for x in v[6:].split(".")[:2]) > GLIBC_MAX]
    assert too_new == []
    assert [(n, v) for n, v in imports if re.match(r"(GLIBCXX|CXXABI|GCC)_", v)] == []
    assert not [n for n in needed(lib) if n.startswith(("libstdc++", "libgcc_s"))]
    # Before glibc 2.34 the pinned dl* / pthread_* live there.
    assert {"libdl.so.2", "libpthread.so.0"} <= set(needed(lib))
    assert subprocess.run(["bash", CHECK, lib, "2.28"], capture_output=True).returncode == 0


def test_the_check_catches_a_newer_import(tmp_path):
    # pthread_create's default version here is GLIBC_2.34 (glibc >= 2.34 on
    # the build machine, as the Makefile's check assumes).
    src = tmp_path / "new.c"
    src.write_text("#include <pthread.h>\nstatic void* f(void* a) { return a; }\n"
                   "int g(void) { pthread_t t; return pthread_create(&t, 0, f, 0); }\n")
    lib = tmp_path / "libnew.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    if not [v for n, v in dynamic_imports(str(lib)) if n == "pthread_create" and v > "GLIBC_2.3"]:
        pytest.skip("this machine's glibc is older than 2.34: nothing to catch")
    r = subprocess.run(["bash", CHECK, str(lib), "2.28"], capture_output=True, text=True)
    assert r.returncode == 1
    assert "pthread_create needs GLIBC_2.34" in r.stderr


@pytest.fixture(scope="module")
def bullseye():
    if os.geteuid() != 0:
        pytest.skip("needs root (debootstrap, namespaces)")
    return root_path("bullseye")


@pytest.fixture(scope="module")
def libcuda_stub(tmp_path_factory):
    lib = tmp_path_factory.mktemp("cuda") / "libcuda.so.1"
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-nostdlib", "-Wl,-soname,libcuda.so.1", "-o", str(lib),
                    os.path.join(WORKLOADS, "libcuda_stub.c")], check=True)
    assert dynamic_imports(str(lib)) == []  # loads into any libc
    return str(lib)


def run_in(root, script, files=(), mode="container", env=None, timeout=60):
    """Runs python3 -c script inside; returns (rc, output)."""
    box = Box(root, mode=mode)
    try:
        inside = [box.put(f) for f in files]
        box.start(["/usr/bin/python3", "-c", script] + inside, env=env, stdout=subprocess.PIPE)
        out, _ = box.proc.communicate(timeout=timeout)
        return box.proc.returncode, out.decode()
    finally:
        box.stop()


LOAD_SCRIPT = r"""
import ctypes, os, sys, time
print("libc", os.confstr("CS_GNU_LIBC_VERSION"))
bridge = ctypes.CDLL(sys.argv[1])
# Its poll thread names itself, prints its debug line and sleeps in its poll
# loop: wait for that (not a fixed time, which a busy machine outlasts).
def poll_thread_sleeping():
    for t in os.listdir("/proc/self/task"):
        try:
            if open(f"/proc/self/task/{t}/comm").read().strip() == "ltrace-bridge" and \
                    open(f"/proc/self/task/{t}/syscall").read().split()[0] in ("35", "230"):  # (clock_)nanosleep
                return True
        except (OSError, IndexError):
            pass
    return False
deadline = time.time() + 60
while not poll_thread_sleeping() and time.time() < deadline:
    time.sleep(0.01)
maps = open("/proc/self/maps").read()
print("mapped", sys.argv[1] in maps)
print("threads", sorted(open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")))
print("late_init", bridge.ltrace_bridge_late_init())
eh = ctypes.CDLL(sys.argv[2])
print("caught", eh.lt_throw_catch(200))
"""


@needs_root
def test_loads_by_dlopen_into_glibc_2_31(bullseye):
    rc, out = run_in(bullseye, LOAD_SCRIPT, files=[BRIDGE, EH_TEST], env={"LTRACE_BRIDGE_DEBUG": "1"})
    assert rc == 0, out
    assert "libc glibc 2.31" in out
    assert "mapped True" in out
    assert "ltrace-bridge" in re.search(r"threads (.*)", out).group(1)  # the dormant poll thread
    assert "late_init 1" in out
    assert "caught 200" in out  # exceptions unwind with glibc_compat's _dl_find_object
    assert "late: dlopen" in out and "poll thread started" in out  # the bridge's own debug lines


# The job: loads the stub driver, then a deterministic loop until told to
# stop; prints its step count and checksum.
JOB = r"""
import ctypes, os, sys, time
ctypes.CDLL(sys.argv[1])
stop = sys.argv[2]
print("READY", flush=True)
acc = steps = 0
while not os.path.exists(stop):
    for i in range(200):
        acc = (acc * 31 + steps * 200 + i) % 1000003
    steps += 1
    time.sleep(0.002)
print("RESULT", steps, acc, flush=True)
"""


def expected(steps):
    acc = 0
    for s in range(steps):
        for i in range(200):
            acc = (acc * 31 + s * 200 + i) % 1000003
    return f"READY\nRESULT {steps} {acc}\n"


def tree(root, box):
    """Every path under root with its size and mtime; other tests' boxes
    (tmp/lt-*, maybe running at the same time) and /tmp's own times left out."""
    out = {}
    ours = box.inside.strip("/")
    for d, dirs, files in os.walk(root):
        rel_d = os.path.relpath(d, root)
        if rel_d == "tmp":
            dirs[:] = [n for n in dirs if not n.startswith("lt-") or f"tmp/{n}" == ours]
        for n in dirs + files:
            p = os.path.join(d, n)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            out[os.path.relpath(p, root)] = (st.st_size, st.st_mtime_ns)
    out.pop("tmp", None)
    return out


def start_job(root, libcuda_stub, without_proc=False):
    box = Box(root)
    lib = box.put(libcuda_stub)
    job = box.inside + "/job.py"
    with open(box.host(job), "w") as f:
        f.write(JOB)
    stop = box.inside + "/stop"
    cmd = ["/usr/bin/python3", job, lib, stop]
    if without_proc:  # the container's /proc unmounted before the job starts
        cmd = ["/bin/sh", "-c", 'umount /proc && exec "$@"', "sh"] + cmd
    box.start(cmd, stdout=subprocess.PIPE, match="python3")
    line = box.proc.stdout.readline().decode()
    assert line == "READY\n", line
    return box, stop


def finish_job(box, stop):
    open(box.host(stop), "w").close()
    out, _ = box.proc.communicate(timeout=60)
    return box.proc.returncode, "READY\n" + out.decode()


def ltrace(pid, *extra):
    return subprocess.run([LTRACE, "--pid", str(pid), "-v", "--report", "gpu", "--duration", "1.5", *extra],
                          capture_output=True, text=True, timeout=120)


@needs_root
def test_injected_into_a_container_as_a_memfd(bullseye, libcuda_stub):
    box, stop = start_job(bullseye, libcuda_stub)
    try:
        pid = box.pid
        before = tree(bullseye, box)
        r = ltrace(pid)
        assert r.returncode == 0, r.stderr
        # Injected through ptrace, handed over as a memfd (the container does
        # not see build/), and the bridge inside reported its state through
        # its USDT status probe: no libcupti in the image, then its answer to
        # the detach.
        assert "GPU: injected " + BRIDGE + " (as a memfd" in r.stderr, r.stderr
        assert "from a memfd" in r.stderr  # the injector's own detail line (-v)
        assert "GPU bridge: libcupti not found" in r.stderr, r.stderr
        assert "GPU bridge: tracer left" in r.stderr, r.stderr
        # The fallback the bridge asked for: uprobes on the (stub) driver.
        assert "falling back to" in r.stderr and "entry uprobes" in r.stderr
        maps = open(f"/proc/{pid}/maps").read()
        assert "/memfd:libltrace-bridge.so (deleted)" in maps
        assert BRIDGE not in maps
        fds = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        assert not [l for l in fds if "memfd:" in l], fds  # its fd was closed again
        # Nothing new or changed anywhere in the container's root.
        assert tree(bullseye, box) == before
        rc, out = finish_job(box, stop)
        assert rc == 0, out
        steps = int(out.split()[2])
        assert steps > 0 and out == expected(steps)
    finally:
        box.stop()


@needs_root
def test_a_second_session_finds_the_memfd_bridge(bullseye, libcuda_stub):
    box, stop = start_job(bullseye, libcuda_stub)
    try:
        first = ltrace(box.pid)
        assert first.returncode == 0 and "as a memfd" in first.stderr, first.stderr
        # The bridge is mapped from a memfd now: the next session attaches its
        # probes through /proc/PID/map_files and injects nothing.
        second = ltrace(box.pid)
        assert second.returncode == 0, second.stderr
        assert "GPU: injected" not in second.stderr
        assert "GPU bridge: libcupti not found" in second.stderr, second.stderr
        assert open(f"/proc/{box.pid}/maps").read().count("/memfd:libltrace-bridge.so") >= 1
        rc, out = finish_job(box, stop)
        assert rc == 0 and out == expected(int(out.split()[2])), out
    finally:
        box.stop()


@needs_root
def test_container_without_proc_gets_one_clear_note(bullseye, libcuda_stub):
    # No /proc inside (dlopen could not open /proc/self/fd/N), and build/ is
    # not in the container: the bridge cannot get in, one note says why, and
    # the GPU data comes from uprobes instead.
    box, stop = start_job(bullseye, libcuda_stub, without_proc=True)
    try:
        r = ltrace(box.pid)
        assert r.returncode == 0, r.stderr
        notes = [l for l in r.stderr.splitlines() if "cannot hand" in l]
        assert len(notes) == 1, r.stderr
        assert "no /proc in its mount namespace" in notes[0]
        assert "does not see " + BRIDGE in notes[0]
        assert "falling back to" in notes[0]
        assert "libltrace-bridge" not in open(f"/proc/{box.pid}/maps").read()
        rc, out = finish_job(box, stop)
        assert rc == 0 and out == expected(int(out.split()[2])), out
    finally:
        box.stop()
