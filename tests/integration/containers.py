"""Real containers for the tests, from root file systems built by
tests/roots/build.sh (debootstrap from the Debian registry).

Two ways in, as jobs meet them:
  container  own pid, mount and UTS namespaces, the root switched with
             pivot_root and the old root unmounted (what runc, containerd
             and enroot do); /proc of its own pid namespace; optionally
             moved into a cgroup named like a container runtime's
  chroot     a plain chroot in the host's namespaces (the paths in the
             target's /proc/PID/maps are then host paths)

Files a test needs inside go into a per-test directory *inside* the root
(`Box.inside`), so the same file is at `Box.host(p)` on the host and at `p`
in the container, and nothing is bind-mounted into the host's namespace.
"""
import os
import shutil
import subprocess
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, "tests", "roots", "build.sh")

# Runs as the container's pid 1 parent: namespaces are already unshared.
_PIVOT = r'''
set -e
root=$1; name=$2; shift 2
mount --make-rprivate /
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
hostname "$name"
cd "$root"
mkdir -p .oldroot
pivot_root . .oldroot
exec /usr/sbin/chroot . /bin/sh -c 'umount -l /.oldroot && exec "$@"' sh "$@"
'''


def root_path(name):
    """The cached root (built on first use; minutes, then instant)."""
    out = subprocess.run(["bash", BUILD, name], check=True, stdout=subprocess.PIPE, text=True)
    return out.stdout.strip().splitlines()[-1]


class Box:
    """One container (or chroot) running `cmd`; `pid` is the host pid of
    the process that runs cmd (found once it exec'd)."""

    def __init__(self, root, mode="container", hostname=None, cgroup_id=None):
        self.root, self.mode = root, mode
        self.hostname = hostname or "ltc-" + uuid.uuid4().hex[:8]
        self.cgroup_id = cgroup_id
        self.inside = "/tmp/lt-" + uuid.uuid4().hex[:12]
        os.makedirs(self.host(self.inside))
        self.proc = None
        self.cgroup_dirs = []

    def host(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def put(self, src, name=None):
        """Copies a file or directory in; returns its path inside."""
        dst = os.path.join(self.inside, name or os.path.basename(src.rstrip("/")))
        if os.path.isdir(src):
            shutil.copytree(src, self.host(dst))
        else:
            shutil.copy(src, self.host(dst))
        return dst

    def argv(self, cmd, env=None):
        """The host command line that runs cmd inside (for a launcher of
        our own, such as `ltrace-bpf run`)."""
        envp = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/root", "PYTHONIOENCODING": "utf-8",
                "PYTHONDONTWRITEBYTECODE": "1"}
        envp.update(env or {})
        if self.mode == "container":
            return ["unshare", "--mount", "--uts", "--pid", "--fork", "--kill-child", "--",
                    "sh", "-c", _PIVOT, "pivot", self.root, self.hostname, "env", "-i"] + \
                   [f"{k}={v}" for k, v in envp.items()] + list(cmd)
        if self.mode == "chroot":
            return ["chroot", self.root, "env", "-i"] + [f"{k}={v}" for k, v in envp.items()] + list(cmd)
        raise ValueError(self.mode)

    def start(self, cmd, env=None, stdout=None, match=None):
        """Starts cmd inside; waits for the process whose argv[0] basename
        starts with `match` (default: cmd[0]'s) to appear on the host."""
        self.proc = subprocess.Popen(self.argv(cmd, env), stdout=stdout, stderr=subprocess.STDOUT, cwd="/")
        want = os.path.basename(match or cmd[0])
        deadline = time.time() + 30
        while time.time() < deadline:
            for pid in [self.proc.pid] + descendants(self.proc.pid):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        argv0 = f.read().split(b"\0")[0].decode()
                except OSError:
                    continue
                if os.path.basename(argv0).startswith(want):
                    self.pid = pid
                    if self.cgroup_id:
                        self._into_cgroup(pid)
                    return self
            if self.proc.poll() is not None:
                raise AssertionError(f"container exited early: rc={self.proc.returncode}")
            time.sleep(0.01)
        raise AssertionError(f"no {want} process appeared in the container")

    def _into_cgroup(self, pid):
        # A cgroup path as Docker names it (cgroupfs driver): /docker/<64 hex>.
        for ctl in ("pids", "unified"):
            d = f"/sys/fs/cgroup/{ctl}/docker/{self.cgroup_id}"
            if os.path.isdir(f"/sys/fs/cgroup/{ctl}"):
                os.makedirs(d, exist_ok=True)
                with open(os.path.join(d, "cgroup.procs"), "w") as f:
                    f.write(str(pid))
                self.cgroup_dirs.append(d)
                return

    def wait(self, timeout=None):
        return self.proc.wait(timeout=timeout)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for d in self.cgroup_dirs:
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except OSError:
                    time.sleep(0.05)
        shutil.rmtree(self.host(self.inside), ignore_errors=True)


def descendants(pid):
    kids = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        kids.setdefault(ppid, []).append(int(p))
    out, todo = [], [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out
