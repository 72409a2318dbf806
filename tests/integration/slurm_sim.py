"""A real Slurm cluster (slurmctld + one slurmd per node + munged) simulated on
this one machine, for integration tests.

Each simulated node is a network namespace + UTS namespace (hostname = node
name) joined by a veth pair to a bridge in the root namespace.  Nodes share
the mount and pid namespaces with the test: every node's processes are
visible in this /proc and every file a task writes is visible here, which is
what a profiler test needs.  slurmctld and munged run in the root namespace,
so `srun`/`sbatch`/`scontrol` run from the test behave like on a login node.

Stdlib only; needs root, iproute2 and util-linux, plus the Debian 12 packages
slurmctld slurmd slurm-client munge (Slurm 22.05).

    with SlurmSim(tmp_path) as sim:
        subprocess.run(["srun", "-N2", "hostname"], env=sim.env)
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import time

__all__ = ["SlurmSim", "SlurmSimError", "slurm_available"]

_BINARIES = ("slurmctld", "slurmd", "slurmstepd", "munged", "srun", "sbatch",
             "scontrol", "sinfo", "squeue", "scancel", "ip", "unshare", "nsenter",
             "bash", "timeout")
_SBIN = ("/usr/sbin", "/sbin", "/usr/bin", "/bin")
# comm names (as in /proc/PID/stat) of what start() spawns directly.
_DAEMONS = ("munged)", "slurmctld)", "slurmd)", "nsenter)", "unshare)", "sh)")
# Terminal job states: waiting for any other state after one of these is futile.
_FINAL = {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL",
          "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY"}


class SlurmSimError(Exception):
    """The simulated cluster could not be started or did not behave."""


def _which(name):
    path = shutil.which(name)
    if path:
        return path
    # Root's PATH under some runners lacks sbin, where the daemons live.
    for d in _SBIN:
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    return None


def _run(cmd, check=True, timeout=30, **kw):
    cmd = [_which(cmd[0]) or cmd[0]] + list(cmd[1:])
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise SlurmSimError(f"{' '.join(cmd)} failed (rc={r.returncode}): "
                            f"{r.stderr.strip() or r.stdout.strip()}")
    return r


def slurm_available():
    """(True, "") when a SlurmSim can run here, else (False, reason)."""
    missing = [b for b in _BINARIES if not _which(b)]
    if missing:
        return False, "missing binaries: " + ", ".join(missing)
    if os.geteuid() != 0:
        return False, "needs root (network namespaces, bridge, slurmd)"
    try:
        r = _run([_which("unshare"), "--net", "--uts", "--", "true"], check=False, timeout=10)
        if r.returncode != 0:
            return False, "cannot create net/uts namespaces: " + r.stderr.strip()
        probe = f"ltsimp{os.getpid() % 100000}"
        r = _run([_which("ip"), "link", "add", probe, "type", "bridge"], check=False, timeout=10)
        if r.returncode != 0:
            return False, "cannot create a bridge: " + r.stderr.strip()
        _run([_which("ip"), "link", "del", probe], check=False, timeout=10)
    except (OSError, subprocess.SubprocessError) as e:
        return False, f"namespace probe failed: {e}"
    return True, ""


def _read(path, binary=False):
    try:
        with open(path, "rb" if binary else "r") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return b"" if binary else ""


def _environ(pid):
    """A process's environment as a dict ({} if gone or unreadable)."""
    raw = _read(f"/proc/{pid}/environ", binary=True)
    env = {}
    for item in raw.split(b"\0"):
        k, sep, v = item.partition(b"=")
        if sep:
            env[k.decode("utf-8", "replace")] = v.decode("utf-8", "replace")
    return env


def _ppid(pid):
    stat = _read(f"/proc/{pid}/stat")
    # comm may contain spaces and parens: the fields after the last ')' are fixed.
    try:
        return int(stat[stat.rindex(")") + 2:].split()[1])
    except (ValueError, IndexError):
        return -1


def _pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _tail(path, n=40):
    lines = _read(path).splitlines()
    return f"--- {path} (last {min(n, len(lines))} lines) ---\n" + "\n".join(lines[-n:])


class SlurmSim:
    """A Slurm cluster of `nodes` simulated nodes with `cpus_per_node` CPUs each.

    subnet_index picks the bridge name, subnet and controller port, so that
    instances with different indexes can run side by side.
    """

    def __init__(self, workdir, nodes=("node1", "node2"), cpus_per_node=4,
                 task_prolog=None, subnet_index=0, debug=False, etc_hosts=False):
        if not 0 <= subnet_index <= 200:
            raise ValueError("subnet_index must be in 0..200")
        self.workdir = os.path.abspath(str(workdir))
        self.nodes = list(nodes)
        if not 1 <= len(self.nodes) <= 200:
            raise ValueError("1..200 nodes")
        self.cpus_per_node = int(cpus_per_node)
        self.task_prolog = os.path.abspath(str(task_prolog)) if task_prolog else None
        self.idx = int(subnet_index)
        self.debug = debug
        # Node names only need to resolve for Slurm via NodeAddr.  Programs in
        # the jobs may want more (Lightning derives MASTER_ADDR from
        # SLURM_NODELIST, gloo binds to the address of gethostname()): with
        # etc_hosts, start() appends "IP name" lines to /etc/hosts, tagged,
        # and stop() removes exactly those lines.
        self.etc_hosts = etc_hosts
        self.tag = f"ltsim{self.idx}"
        self.bridge = self.tag                      # also <= 15 chars (IFNAMSIZ)
        self.subnet = f"10.77.{self.idx}"
        self.controller_ip = f"{self.subnet}.1"
        # Not Slurm's 6817/6818: a real Slurm on this host (or another
        # instance) must not collide with slurmctld, which binds 0.0.0.0.
        self.ctld_port = 16817 + 2 * self.idx
        self.slurmd_port = 16818 + 2 * self.idx
        self.conf = os.path.join(self.workdir, "etc", "slurm.conf")
        self.munge_socket = os.path.join(self.workdir, "munge", "munge.socket")
        # Remembers the workdir of a running instance with this index, so a
        # later start() can clean up after a crashed run in another workdir.
        self._registry = f"/run/{self.tag}.json"
        self._procs = {}                            # name -> Popen
        self._jobs = 0
        env = {k: v for k, v in os.environ.items()
               # Inherited SLURM_* (the test itself inside a job) would leak
               # a foreign job id/cluster into our clients.
               if not k.startswith("SLURM_")}
        path = env.get("PATH", "/usr/bin:/bin")
        for d in _SBIN:
            if d not in path.split(":"):
                path += ":" + d
        env.update(SLURM_CONF=self.conf, PATH=path)
        self.env = env

    # ------------------------------------------------------------------ names
    def node_ip(self, name):
        return f"{self.subnet}.{11 + self.nodes.index(name)}"

    def netns(self, name):
        """Name of the node's named netns (for `ip netns exec`)."""
        return f"{self.tag}-{name}"

    def _veth(self, i):
        return f"{self.tag}v{i}"

    def nsexec(self, name, cmd):
        """argv that runs cmd inside node `name` (its netns and hostname).

        nsenter --net, not `ip netns exec`: the latter also unshares the mount
        namespace and remounts /sys, which hides /sys/fs/cgroup from slurmd
        ("No filesystem mounted on /sys/fs/cgroup" -> slurmd exits).  With
        nsenter the node shares every mount with the root namespace.
        """
        return ["nsenter", f"--net=/run/netns/{self.netns(name)}", "--",
                "unshare", "--uts", "--",
                "sh", "-c", 'hostname "$0" && exec "$@"', name] + list(cmd)

    # ------------------------------------------------------------- lifecycle
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self, timeout=60):
        """Bring up munged, the network, slurmctld and every slurmd; wait until
        every node is idle.  Raises SlurmSimError (with log tails) on failure."""
        if self._procs and all(p.poll() is None for p in self._procs.values()):
            return                                  # already running
        self.stop()                                 # leftovers of ours or of a crashed run
        try:
            self._prepare_dirs()
            self._start_munged()
            self._setup_network()
            self._write_conf()
            if self.etc_hosts:
                self._add_hosts()
            try:
                with open(self._registry, "w") as f:
                    json.dump({"workdir": self.workdir}, f)
            except OSError:
                pass                                # only a help for later cleanups
            self._start_slurmctld()
            for name in self.nodes:
                self._start_slurmd(name)
            self._wait_idle(timeout)
        except BaseException:
            # KeyboardInterrupt too: never leave daemons and namespaces behind.
            self.stop()
            raise

    def stop(self):
        """Kill every daemon, job step and client of this instance and remove
        its namespaces, veths and bridge.  Never raises."""
        try:
            self._stop()
        except Exception:                           # noqa: BLE001 - must not raise
            pass

    def _stop(self):
        workdirs = {self.workdir}
        reg = _read(self._registry)
        if reg:
            try:
                workdirs.add(json.loads(reg)["workdir"])
            except (ValueError, KeyError):
                pass
        me = os.getpid()
        ancestors = set()
        p = me
        while p > 1:
            ancestors.add(p)
            p = _ppid(p)
        victims = set()
        netns_names = [self.netns(n) for n in self.nodes]
        r = _run(["ip", "netns", "list"], check=False)
        for line in r.stdout.splitlines():
            ns = line.split()[0] if line.split() else ""
            if ns.startswith(self.tag + "-"):
                if ns not in netns_names:
                    netns_names.append(ns)
        # Everything inside a node netns is ours: slurmd, slurmstepd, tasks.
        for ns in netns_names:
            r = _run(["ip", "netns", "pids", ns], check=False)
            victims.update(int(x) for x in r.stdout.split() if x.isdigit())
        confs = {os.path.join(w, "etc", "slurm.conf") for w in workdirs}
        for pid in _pids():
            if pid in ancestors:
                continue
            cmd = _read(f"/proc/{pid}/cmdline", binary=True).decode("utf-8", "replace")
            # Daemons name their config/socket on the command line; clients
            # (srun, and tasks that escaped a netns) carry SLURM_CONF.
            if any(w + "/" in cmd for w in workdirs) or _environ(pid).get("SLURM_CONF") in confs:
                victims.add(pid)
        victims.update(p.pid for p in self._procs.values() if p.poll() is None)
        victims -= ancestors
        # SIGKILL straight away: no state is worth saving (every start is a
        # cold start) and slurmstepd sits out a SIGTERM, which cost 2 s.
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        # Wait until they are gone from /proc, zombies included: slurmstepd
        # is double-forked, so its zombie belongs to pid 1, which may reap it
        # only a second or so later, and a test that checks for leftover
        # processes right after stop() should not see it.
        deadline = time.time() + 5
        while time.time() < deadline:
            for p in self._procs.values():
                p.poll()                            # reap our own children
            for v in victims:
                # Daemons of an abandoned instance in this process are our
                # zombies.  Reap daemons only: a client (srun) zombie belongs
                # to a Popen whose returncode the test may still want.
                if _read(f"/proc/{v}/stat").split(" (", 1)[-1].startswith(_DAEMONS):
                    try:
                        os.waitpid(v, os.WNOHANG)
                    except OSError:
                        pass
            left = [v for v in victims if os.path.exists(f"/proc/{v}")
                    # A killed client of this process (the test's srun Popen)
                    # stays a zombie until the test waits for it: not ours to wait for.
                    and not (_ppid(v) == me and ") Z " in _read(f"/proc/{v}/stat"))]
            if not left:
                break
            time.sleep(0.05)
        for p in self._procs.values():
            try:
                p.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
        self._procs.clear()
        for ns in netns_names:
            _run(["ip", "netns", "del", ns], check=False)
        # A veth dies with its peer's netns; delete explicitly in case that
        # netns is still pinned by a process we could not kill.
        r = _run(["ip", "-o", "link", "show"], check=False)
        for line in r.stdout.splitlines():
            parts = line.split(":")
            if len(parts) > 1:
                ifname = parts[1].strip().split("@")[0]
                if ifname.startswith(self.tag + "v"):
                    _run(["ip", "link", "del", ifname], check=False)
        _run(["ip", "link", "del", self.bridge], check=False)
        self._remove_hosts()
        try:
            os.unlink(self._registry)
        except OSError:
            pass

    _HOSTS = "/etc/hosts"

    def _hosts_marker(self):
        return f"# {self.tag} slurm_sim"

    def _add_hosts(self):
        self._remove_hosts()
        text = _read(self._HOSTS)
        if text and not text.endswith("\n"):
            text += "\n"
        text += "".join(f"{self.node_ip(n)}\t{n}\t{self._hosts_marker()}\n" for n in self.nodes)
        self._write_hosts(text)

    def _remove_hosts(self):
        text = _read(self._HOSTS)
        marker = self._hosts_marker()
        if marker in text:
            keep = [l for l in text.splitlines(True) if not l.rstrip("\n").endswith(marker)]
            self._write_hosts("".join(keep))

    def _write_hosts(self, text):
        # In place, not write-and-rename: /etc/hosts is often a bind mount
        # (containers), which cannot be replaced by rename().
        with open(self._HOSTS, "r+") as f:
            f.seek(0)
            f.write(text)
            f.truncate()

    # --------------------------------------------------------------- pieces
    def _prepare_dirs(self):
        for d in ("etc", "munge", "state", "log", "run", "jobs"):
            os.makedirs(os.path.join(self.workdir, d), exist_ok=True)
        # slurmd creates only the last path component of SlurmdSpoolDir.
        for n in self.nodes:
            os.makedirs(os.path.join(self.workdir, "spool", n), exist_ok=True)
        # munged refuses group/world-writable dirs for its socket/key, and
        # warns (clients of other users could not connect) unless o+x.
        os.chmod(os.path.join(self.workdir, "munge"), 0o755)
        # A fresh controller state per start (old jobs must not come back)
        # and fresh logs (so that error tails show this start only).
        for d in ("state", "log"):
            shutil.rmtree(os.path.join(self.workdir, d), ignore_errors=True)
            os.makedirs(os.path.join(self.workdir, d))

    def _start_munged(self):
        mdir = os.path.join(self.workdir, "munge")
        key = os.path.join(mdir, "munge.key")
        if os.path.exists(key):
            os.chmod(key, 0o600)
            os.unlink(key)
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        for stale in (self.munge_socket, self.munge_socket + ".lock"):
            if os.path.exists(stale):
                os.unlink(stale)
        # With -F (kept as our child, so stop() and crashes are simple)
        # munged logs to stderr, i.e. munged.stderr; --log-file is a fallback.
        log = os.path.join(self.workdir, "log", "munged.log")
        cmd = [_which("munged"), "-F", "--force",
               f"--socket={self.munge_socket}", f"--key-file={key}",
               f"--pid-file={os.path.join(mdir, 'munged.pid')}",
               f"--log-file={log}", f"--seed-file={os.path.join(mdir, 'munged.seed')}",
               "--num-threads=4"]
        self._spawn("munged", cmd, os.path.join(self.workdir, "log", "munged.stderr"))
        self._wait(lambda: os.path.exists(self.munge_socket), 15, "munged socket",
                   [log, os.path.join(self.workdir, "log", "munged.stderr")], "munged")

    def _setup_network(self):
        _run(["ip", "link", "add", self.bridge, "type", "bridge"])
        _run(["ip", "addr", "add", f"{self.controller_ip}/24", "dev", self.bridge])
        _run(["ip", "link", "set", self.bridge, "up"])
        for i, name in enumerate(self.nodes):
            ns, veth = self.netns(name), self._veth(i)
            _run(["ip", "netns", "add", ns])
            _run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
            _run(["ip", "link", "set", veth, "master", self.bridge, "up"])
            for cmd in (["ip", "addr", "add", f"{self.node_ip(name)}/24", "dev", "eth0"],
                        ["ip", "link", "set", "eth0", "up"],
                        # No default route, on purpose: with one, DNS queries
                        # (e.g. c10d's reverse lookup of peers) are routed to the
                        # root ns, dropped (no forwarding) and time out after
                        # 2x5 s; without one they fail at once (ENETUNREACH).
                        ["ip", "link", "set", "lo", "up"]):
                _run(["ip", "netns", "exec", ns] + cmd)
        # The bridge only forwards once its port has left the 'learning'
        # state; wait for every node to reach the controller.
        for name in self.nodes:
            self._wait(lambda n=name: self._tcp_probe(n), 10, f"{name} network", [], None)

    def _tcp_probe(self, name):
        """Can node `name` open a TCP connection to a listener in the root ns?"""
        srv = socket.socket()
        try:
            srv.bind((self.controller_ip, 0))
            srv.listen(1)
            port = srv.getsockname()[1]
            r = _run(["ip", "netns", "exec", self.netns(name), "timeout", "2", "bash", "-c",
                      f"exec 3<>/dev/tcp/{self.controller_ip}/{port}"], check=False, timeout=5)
            return r.returncode == 0
        finally:
            srv.close()

    def _write_conf(self):
        w = self.workdir
        plugstack = os.path.join(w, "etc", "plugstack.conf")
        with open(os.path.join(w, "etc", "cgroup.conf"), "w") as f:
            # slurmd 22.05 always initialises a cgroup plugin even with
            # proctrack/linuxproc + task/none; it only has to find the
            # hierarchy.  IgnoreSystemd: on cgroup v2 hosts do not ask dbus.
            f.write("CgroupPlugin=autodetect\nIgnoreSystemd=yes\n")
        with open(plugstack, "w") as f:
            # The system /etc/slurm/plugstack.conf may pull in SPANK plugins.
            f.write("# empty: no SPANK plugins in the simulation\n")
        lines = [
            f"ClusterName={self.tag}",
            # slurmctld only starts where gethostname() matches SlurmctldHost.
            f"SlurmctldHost={socket.gethostname().split('.')[0]}({self.controller_ip})",
            f"SlurmctldPort={self.ctld_port}",
            f"SlurmdPort={self.slurmd_port}",
            # Job ids of their own: two simulations at once (two test files
            # on two workers) share the node names, and ltrace-bpf finds a
            # job's ranks by SLURM_JOB_ID and SLURMD_NODENAME -- with both
            # at job 1, one's agents adopted the other's ranks.
            f"FirstJobId={1 + 1000 * self.idx}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            # Honoured by auth/munge and cred/munge in daemons and clients alike.
            f"AuthInfo=socket={self.munge_socket}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={w}/state",
            f"SlurmdSpoolDir={w}/spool/%n",
            f"SlurmctldPidFile={w}/run/slurmctld.pid",
            f"SlurmdPidFile={w}/run/slurmd-%n.pid",
            f"SlurmctldLogFile={w}/log/slurmctld.log",
            f"SlurmdLogFile={w}/log/slurmd-%n.log",
            f"PlugStackConfig={plugstack}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            "SwitchType=switch/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "SchedulerType=sched/builtin",
            "ReturnToService=2",
            # Every node claims cpus_per_node CPUs whatever the host has.
            "SlurmdParameters=config_overrides",
            "MailProg=/bin/true",
            "KillWait=2",
            "InactiveLimit=0",
            "MinJobAge=300",
            "MessageTimeout=10",
            "SlurmdTimeout=120",
            f"SlurmctldDebug={'debug2' if self.debug else 'info'}",
            f"SlurmdDebug={'debug2' if self.debug else 'info'}",
        ]
        if self.task_prolog:
            lines.append(f"TaskProlog={self.task_prolog}")
        for name in self.nodes:
            lines.append(f"NodeName={name} NodeAddr={self.node_ip(name)} NodeHostname={name} "
                         f"CPUs={self.cpus_per_node} State=UNKNOWN")
        lines.append("PartitionName=sim Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")

    def _start_slurmctld(self):
        stderr = os.path.join(self.workdir, "log", "slurmctld.stderr")
        self._spawn("slurmctld", [_which("slurmctld"), "-D", "-c", "-i", "-f", self.conf], stderr)
        self._wait(lambda: _run(["scontrol", "ping"], check=False, env=self.env).stdout.count("UP") > 0,
                   30, "slurmctld to answer", [os.path.join(self.workdir, "log", "slurmctld.log"), stderr],
                   "slurmctld")

    def _start_slurmd(self, name):
        stderr = os.path.join(self.workdir, "log", f"slurmd-{name}.stderr")
        self._spawn(f"slurmd-{name}", self.nsexec(name, [_which("slurmd"), "-D", "-f", self.conf]), stderr)

    def _spawn(self, key, cmd, stderr_path):
        with open(stderr_path, "ab") as err:
            # Own session: a Ctrl-C aimed at the test must not kill the cluster
            # half-way; stop() does that in order.
            self._procs[key] = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err,
                                                stderr=subprocess.STDOUT, env=self.env,
                                                cwd=self.workdir, start_new_session=True)

    def _wait(self, pred, timeout, what, logs, proc_key):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                if pred():
                    return
            except (OSError, subprocess.SubprocessError):
                pass
            p = self._procs.get(proc_key) if proc_key else None
            if p is not None and p.poll() is not None:
                raise SlurmSimError(f"{proc_key} exited (rc={p.returncode}) while waiting for {what}\n"
                                    + "\n".join(_tail(x) for x in logs))
            time.sleep(0.1)
        raise SlurmSimError(f"timed out after {timeout}s waiting for {what}\n"
                            + "\n".join(_tail(x) for x in logs))

    def node_states(self):
        """{node: short state} as sinfo reports it ('idle', 'alloc', 'down*', ...)."""
        r = _run(["sinfo", "-h", "-N", "-o", "%N %t"], check=False, env=self.env)
        states = {}
        for line in r.stdout.splitlines():
            parts = line.split()
            if len(parts) == 2:
                states[parts[0]] = parts[1]
        return states

    def _wait_idle(self, timeout):
        logs = [os.path.join(self.workdir, "log", "slurmctld.log")]
        for n in self.nodes:
            logs += [os.path.join(self.workdir, "log", f"slurmd-{n}.log"),
                     os.path.join(self.workdir, "log", f"slurmd-{n}.stderr")]
        deadline = time.time() + timeout
        states = {}
        while time.time() < deadline:
            dead = [k for k, p in self._procs.items() if p.poll() is not None]
            if dead:
                raise SlurmSimError(f"daemon(s) exited during start: {dead}\n"
                                    + "\n".join(_tail(x) for x in logs))
            states = self.node_states()
            if all(states.get(n) == "idle" for n in self.nodes):
                return
            time.sleep(0.2)
        raise SlurmSimError(f"nodes not idle after {timeout}s: {states}\n"
                            + "\n".join(_tail(x) for x in logs))

    # ------------------------------------------------------------------ jobs
    def sbatch(self, script_text, nodes, ntasks_per_node, extra_args=()):
        """Submit script_text (a shell script) and return the job id.  Its
        output goes to <workdir>/jobs/slurm-<id>.out."""
        self._jobs += 1
        jdir = os.path.join(self.workdir, "jobs")
        path = os.path.join(jdir, f"job{self._jobs}.sh")
        if not script_text.startswith("#!"):
            script_text = "#!/bin/sh\n" + script_text
        with open(path, "w") as f:
            f.write(script_text)
        os.chmod(path, 0o755)
        cmd = ["sbatch", "--parsable", f"--nodes={nodes}", f"--ntasks-per-node={ntasks_per_node}",
               f"--chdir={jdir}", f"--output={jdir}/slurm-%j.out"] + list(extra_args) + [path]
        r = _run(cmd, env=self.env)
        return int(r.stdout.strip().split(";")[0])

    def job_output(self, jobid):
        return _read(os.path.join(self.workdir, "jobs", f"slurm-{jobid}.out"))

    def job_state(self, jobid):
        r = _run(["scontrol", "show", "job", "-o", str(jobid)], check=False, env=self.env)
        for field in r.stdout.split():
            if field.startswith("JobState="):
                return field.split("=", 1)[1]
        return None

    def wait_state(self, jobid, state="RUNNING", timeout=60):
        """Wait until the job is in `state`; raise SlurmSimError if it ends in
        another state or the timeout expires."""
        deadline = time.time() + timeout
        cur = None
        while time.time() < deadline:
            cur = self.job_state(jobid)
            if cur == state:
                return
            if cur in _FINAL:
                break
            time.sleep(0.1)
        raise SlurmSimError(f"job {jobid} is {cur}, wanted {state}\n"
                            + self.job_output(jobid)[-3000:] + "\n"
                            + _tail(os.path.join(self.workdir, "log", "slurmctld.log"), 20))

    def job_tasks(self, jobid, step=None):
        """Pids of the job's user tasks (children of a slurmstepd of a real
        step, i.e. not the batch script or the extern step), optionally of one
        step only.  All are visible in this /proc as the pid ns is shared."""
        jobid = str(jobid)
        stepds = {}
        for pid in _pids():
            cmd = _read(f"/proc/{pid}/cmdline", binary=True)
            # slurmstepd retitles itself 'slurmstepd: [JOB.STEP]'.
            if cmd.startswith(b"slurmstepd: [" + jobid.encode() + b"."):
                stepds[pid] = cmd.split(b".", 1)[1].split(b"]")[0].decode()
        tasks = []
        for pid in _pids():
            st = stepds.get(_ppid(pid))
            if st is None or not st.isdigit():
                continue
            if step is not None and st != str(step):
                continue
            env = _environ(pid)
            if env.get("SLURM_JOB_ID") == jobid and "SLURM_PROCID" in env:
                tasks.append(pid)
        return sorted(tasks)

    def cancel(self, jobid):
        _run(["scancel", str(jobid)], check=False, env=self.env)
