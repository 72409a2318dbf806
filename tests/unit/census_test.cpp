// The process census of `ps` and --all: /proc parsers (stat, NSpid, cgroup
// container ids, maps), version files, printable text, the ps table, and
// a probe of real processes (ourselves, a zombie, a pid that is gone).
#include "user/proc/census.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "user/cli/ps_command.h"
#include "user/proc/procfs.h"

using namespace lt::proc;

namespace {
const std::string kId = "3f4e5d6c7b8a9f0e1d2c3b4a59687766554433221100ffeeddccbbaa99887766";
}

TEST(Census, ParseStat) {
  auto s = parse_stat(
      "4242 (python3.11) S 4000 4242 4000 34816 4242 4194304 3133 0 0 0 12 3 0 0 20 0 1 0 987654 "
      "23044096 2750 18446744073709551615 1 1 0 0 0 0 0 16781312 2 0 0 0 17 1 0 0 0 0 0\n");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->comm, "python3.11");
  EXPECT_EQ(s->state, 'S');
  EXPECT_EQ(s->ppid, 4000);
  EXPECT_EQ(s->starttime, 987654ull);
  EXPECT_EQ(s->vsize, 23044096ull);
  EXPECT_FALSE(s->kernel_thread());
  EXPECT_FALSE(s->zombie());
  // A comm with spaces and parentheses ends at the last ')'.
  auto odd = parse_stat("7 (a) b (c)) Z 1 0 0 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 55 0 0");
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->comm, "a) b (c)");
  EXPECT_TRUE(odd->zombie());
  // kthreadd: PF_KTHREAD in flags.
  auto kt = parse_stat("2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0");
  ASSERT_TRUE(kt);
  EXPECT_TRUE(kt->kernel_thread());
  EXPECT_FALSE(parse_stat(""));
  EXPECT_FALSE(parse_stat("12 (cut short) S 1 2"));
  EXPECT_FALSE(parse_stat("12 (x) S a b c d e f g h i j k l m n o p q r s t"));
  EXPECT_FALSE(parse_stat("no parentheses at all"));
}

TEST(Census, ParseNspid) {
  EXPECT_EQ(parse_nspid("Name:\tpython3\nPid:\t4242\nNSpid:\t4242\t17\t1\nNSpgid:\t4242\n"),
            (std::vector<pid_t>{4242, 17, 1}));
  EXPECT_EQ(parse_nspid("Name:\tx\nNSpid:\t99\n"), (std::vector<pid_t>{99}));
  EXPECT_TRUE(parse_nspid("Name:\tx\nPid:\t3\n").empty());  // old kernels: no NSpid
  EXPECT_TRUE(parse_nspid("").empty());
  EXPECT_EQ(parse_nspid("NSpid:\t5 6"), (std::vector<pid_t>{5, 6}));   // last line, no newline
  EXPECT_TRUE(parse_nspid("NSpid:\t99999999999999999999\n").empty());  // out of range: nothing rather than garbage
}

TEST(Census, ContainerIdFromCgroup) {
  // cgroup v1, Docker's cgroupfs driver
  EXPECT_EQ(container_id_from_cgroup("12:pids:/docker/" + kId + "\n11:memory:/docker/" + kId + "\n"), kId);
  // cgroup v2 with systemd: docker, containerd (CRI), cri-o, podman
  EXPECT_EQ(container_id_from_cgroup("0::/system.slice/docker-" + kId + ".scope\n"), kId);
  EXPECT_EQ(container_id_from_cgroup(
                "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1a2b3c4d_5e6f_7a8b_9c0d_"
                "1e2f3a4b5c6d.slice/cri-containerd-" +
                kId + ".scope\n"),
            kId);
  EXPECT_EQ(container_id_from_cgroup("0::/kubepods.slice/kubepods-pod12.slice/crio-" + kId + ".scope\n"), kId);
  EXPECT_EQ(container_id_from_cgroup("0::/machine.slice/libpod-" + kId + ".scope/container\n"), kId);
  // cgroupfs kubepods: /kubepods/burstable/pod<uuid>/<id>
  EXPECT_EQ(container_id_from_cgroup("4:cpu:/kubepods/burstable/pod0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0/" + kId), kId);
  // Upper case is lowered; docker-in-docker: the innermost.
  std::string upper = kId;
  for (char& c : upper) c = static_cast<char>(std::toupper(c));
  const std::string inner(64, 'a');
  EXPECT_EQ(container_id_from_cgroup("1:name=systemd:/docker/" + upper + "/docker/" + inner + "\n"), inner);
  EXPECT_EQ(container_id_from_cgroup("1:pids:/docker/" + upper + "\n"), kId);
  // Not a container: the host, a 32-hex sandbox cgroup, conmon, ids of other lengths or in longer words.
  EXPECT_EQ(container_id_from_cgroup("0::/\n"), "");
  EXPECT_EQ(container_id_from_cgroup("0::/user.slice/user-0.slice/session-3.scope\n"), "");
  EXPECT_EQ(container_id_from_cgroup("4:memory:/process_api/4263e5db3bbc34d06347894f363d2774\n"), "");
  EXPECT_EQ(container_id_from_cgroup("0::/machine.slice/libpod-conmon-" + kId + ".scope\n"), "");
  EXPECT_EQ(container_id_from_cgroup("0::/docker/" + kId + "0\n"), "");
  EXPECT_EQ(container_id_from_cgroup("0::/docker/x" + kId + "\n"), "");
  EXPECT_EQ(container_id_from_cgroup("0::/docker/" + kId.substr(1) + "\n"), "");
  EXPECT_EQ(container_id_from_cgroup(""), "");
  EXPECT_EQ(container_id_from_cgroup("garbage without colons " + kId), "");
}

TEST(Census, ScanMaps) {
  const std::string maps =
      "55d0c0000000-55d0c0001000 r--p 00000000 fd:01 123 /usr/bin/python3.11\n"
      "7f0000000000-7f0000100000 r-xp 00000000 fd:01 456 "
      "/opt/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so\n"
      "7f1000000000-7f1000100000 r-xp 00000000 fd:01 789 /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15\n"
      "7f2000000000-7f2000001000 rw-p 00000000 00:00 0 \n"
      "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]\n";
  auto f = scan_maps(maps);
  EXPECT_EQ(f.torch_lib, "/opt/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so");
  EXPECT_TRUE(f.torch());
  EXPECT_TRUE(f.cuda);
  EXPECT_EQ(f.python_lib, "");
  auto g = scan_maps(
      "7f00-7f01 r-xp 00000000 fd:01 1 /usr/lib/libpython3.12.so.1.0\n"
      "7f02-7f03 r-xp 00000000 fd:01 2 /home/u/my libtorch notes/libtorchaudio.txt (deleted)\n"
      "7f04-7f05 r-xp 00000000 fd:01 3 /usr/lib/libcudart.so.12\n");
  EXPECT_EQ(g.python_lib, "/usr/lib/libpython3.12.so.1.0");
  EXPECT_FALSE(g.torch());  // libtorchaudio.txt is no shared object
  EXPECT_FALSE(g.cuda);     // the runtime is not the driver
  EXPECT_FALSE(scan_maps("").torch());
  EXPECT_FALSE(scan_maps("no newline and no slash").torch());
}

TEST(Census, PythonVersionFromName) {
  EXPECT_EQ(python_version_from_name("/usr/bin/python3.11"), "3.11");
  EXPECT_EQ(python_version_from_name("/usr/lib/x86_64-linux-gnu/libpython3.13.so.1.0"), "3.13");
  EXPECT_EQ(python_version_from_name("/usr/local/bin/python3.13-shared"), "3.13");
  EXPECT_EQ(python_version_from_name("/usr/bin/python3.13t"), "3.13t");
  EXPECT_EQ(python_version_from_name("libpython3.7m.so.1.0"), "3.7");
  EXPECT_EQ(python_version_from_name("/usr/bin/python3.11 (deleted)"), "3.11");
  EXPECT_EQ(python_version_from_name("/usr/bin/python3"), "");
  EXPECT_EQ(python_version_from_name("/usr/bin/python3.x"), "");
  EXPECT_EQ(python_version_from_name("/usr/bin/python3.11z"), "");
  EXPECT_EQ(python_version_from_name(""), "");
}

TEST(Census, VersionFiles) {
  EXPECT_EQ(version_from_py("from typing import Optional\n__version__ = '2.15.0+cu132'\ndebug = False\n"),
            "2.15.0+cu132");
  EXPECT_EQ(version_from_py("__version__ = \"1.9.5\"  # comment\n"), "1.9.5");
  EXPECT_EQ(version_from_py("__version__: str = \"2.0\"\n"), "2.0");
  EXPECT_EQ(version_from_py("version = '3'\n__version__ = ''\n__version__ = 'x'"), "x");
  EXPECT_EQ(version_from_py("__version__ = version\n"), "");
  EXPECT_EQ(version_from_metadata("Metadata-Version: 2.1\nName: pytorch-lightning\nVersion: 2.6.6\nSummary: x\n"),
            "2.6.6");
  EXPECT_EQ(version_from_metadata("Name: x\n\nVersion: 9 (in the body, not a header)\n"), "");
}

TEST(Census, Printable) {
  EXPECT_EQ(printable("python3 train.py --lr=0.1"), "python3 train.py --lr=0.1");
  EXPECT_EQ(printable("épreuve Ωmega 🚀"), "épreuve Ωmega 🚀");  // valid UTF-8 stays
  EXPECT_EQ(printable(std::string("a\xff"
                                  "b")),
            "a\\xffb");
  EXPECT_EQ(printable("tab\there\nnl\x1b[31m"), "tab\\x09here\\x0anl\\x1b[31m");
  EXPECT_EQ(printable("back\\slash"), "back\\\\slash");
  EXPECT_EQ(printable(std::string("\xc3")), "\\xc3");                             // cut short
  EXPECT_EQ(printable(std::string("\xc0\xaf")), "\\xc0\\xaf");                    // overlong
  EXPECT_EQ(printable(std::string("\xed\xa0\x80")), "\\xed\\xa0\\x80");           // a surrogate
  EXPECT_EQ(printable(std::string("\xf4\x90\x80\x80")), "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
  EXPECT_EQ(printable(std::string("\xc2\x85")), "\\xc2\\x85");                    // C1 control (NEL)
  EXPECT_EQ(printable(std::string("x\0y", 3)), "x\\x00y");
}

TEST(Census, PsTable) {
  CensusEntry e;
  e.probe.pid = 4242;
  e.probe.maps.torch_lib = "/x/torch/lib/libtorch.so";
  e.nspid = {4242, 1};
  e.hostname = "trainer-\xff";
  e.container_id = kId;
  e.rank.rank = 1;
  e.rank.world_size = 2;
  e.argv = {"/usr/bin/python3.13",
            "/home/me/job/train_lightning.py",
            "--a-very-long-argument-list",
            "that",
            "goes",
            "on",
            "and",
            "on/and/on"};
  e.python_version = "3.13";
  e.torch_version = "2.15.0";
  e.lightning_version = "2.6.6";
  e.xla = "2.9.0 TPU";
  CensusEntry host;
  host.probe.pid = 17;
  host.probe.stat.comm = "weird\nname";
  host.nspid = {17};
  host.hostname = "box";
  const std::string table =
      lt::render_ps_table({lt::ps_row(e, "yes"), lt::ps_row(host, "no: CPython 3.15 is not supported")});
  EXPECT_EQ(table,
            "PID   NSPID  HOST          CONTAINER     RANK  LOCAL  WORLD  PYTHON  TORCH   LIGHTNING  CUDA  XLA        "
            "COMMAND                                           PROFILE\n"
            "4242  1      trainer-\\xff  3f4e5d6c7b8a  1     -      2      3.13    2.15.0  2.6.6      no    2.9.0 TPU  "
            "python3.13 train_lightning.py --a-very-long-a...  yes\n"
            "17    -      box           -             -     -      -      -       -       -          no    -          "
            "[weird\\x0aname]                                   no: CPython 3.15 is not supported\n");
}

TEST(Census, ProbesRealProcesses) {
  // Ourselves: skipped.
  EXPECT_EQ(probe_process(getpid()).skip, Skip::self);
  // A pid that does not exist.
  EXPECT_EQ(probe_process(0x3ffffff).skip, Skip::gone);
  // Our parent: a live user process, probed without a skip (no torch).
  auto parent = probe_process(getppid());
  EXPECT_EQ(parent.skip, Skip::none);
  EXPECT_FALSE(parent.maps.torch());
  // A zombie: exited, not reaped.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  Skip seen = Skip::none;
  for (int i = 0; i < 200 && seen != Skip::zombie; ++i) {
    seen = probe_process(child).skip;
    usleep(5000);
  }
  EXPECT_EQ(seen, Skip::zombie);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(probe_process(child).skip, Skip::gone);
  // The census never lists us, nor anything that is not eligible.
  for (auto& entry : take_census()) {
    EXPECT_NE(entry.probe.pid, getpid());
    EXPECT_TRUE(entry.probe.eligible());
  }
  // kthreadd (pid 2 in our pid namespace, when there is one): a kernel thread.
  auto kt = probe_process(2);
  if (kt.skip != Skip::gone && kt.stat.comm == "kthreadd") {
    EXPECT_EQ(kt.skip, Skip::kernel_thread);
  }
}

// --all's watcher: a process that maps a libtorch*.so later is returned
// once, at the first poll after the mapping, and never again.
TEST(Census, WatcherReturnsANewlyEligibleProcessOnce) {
  char dir[] = "/tmp/lt-census-XXXXXX";
  ASSERT_TRUE(mkdtemp(dir));
  const std::string lib = std::string(dir) + "/libtorch_cpu.so";
  const std::string flag = std::string(dir) + "/go";
  {
    const int fd = open(lib.c_str(), O_CREAT | O_WRONLY, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, "x", 1), 1);
    close(fd);
  }
  const pid_t child = fork();
  if (child == 0) {
    while (access(flag.c_str(), F_OK) != 0) usleep(1000);
    const int fd = open(lib.c_str(), O_RDONLY);
    if (fd < 0 || mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE, fd, 0) == MAP_FAILED) _exit(1);
    pause();
    _exit(0);
  }
  ASSERT_GT(child, 0);
  auto has = [&](const std::vector<pid_t>& v) { return std::find(v.begin(), v.end(), child) != v.end(); };
  EligibleWatcher w;
  EXPECT_FALSE(has(w.poll()));
  EXPECT_FALSE(has(w.poll()));
  close(open(flag.c_str(), O_CREAT | O_WRONLY, 0644));
  bool found = false;
  for (int i = 0; i < 200 && !found; ++i) {
    found = has(w.poll());
    if (!found) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(found);
  EXPECT_FALSE(has(w.poll()));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  unlink(lib.c_str());
  unlink(flag.c_str());
  rmdir(dir);
}

// The moment inside an execve when the new program is not mapped yet looks
// like maps without /proc/PID/exe's file; our own maps always hold it.
TEST(Census, ExeIsMappedOnlyWhenItsFileIs) {
  const auto maps = read_maps(getpid());
  ASSERT_FALSE(maps.empty());
  EXPECT_TRUE(exe_is_mapped(getpid(), maps));
  std::vector<Mapping> mid_exec;
  for (const auto& m : maps)
    if (m.path == "[stack]") mid_exec.push_back(m);
  ASSERT_EQ(mid_exec.size(), 1u);
  EXPECT_FALSE(exe_is_mapped(getpid(), mid_exec));
}
