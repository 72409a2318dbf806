// Job discovery on real processes: trees of Python processes started here
// with a job variable of our own (LTRACE_TEST_JOB=<random>), found again by
// scanning /proc.
#include "user/proc/job_discovery.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "user/proc/procfs.h"

extern char** environ;

namespace {

constexpr const char* kPython = "/usr/bin/python3.11";

std::string random_token() {
  std::random_device rd;
  return std::to_string(getpid()) + "-" + std::to_string(rd()) + std::to_string(rd());
}

// A process (and everything it starts) in its own process group, killed at
// the end of the test.
struct Spawned {
  pid_t pid = -1;
  Spawned(std::vector<std::string> argv, std::vector<std::string> extra_env) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) env.emplace_back(*e);
    for (auto& e : extra_env) env.push_back(e);
    std::vector<char*> av, ev;
    for (auto& a : argv) av.push_back(a.data());
    av.push_back(nullptr);
    for (auto& e : env) ev.push_back(e.data());
    ev.push_back(nullptr);
    pid = fork();
    if (pid == 0) {
      setpgid(0, 0);
      execve(av[0], av.data(), ev.data());
      _exit(127);
    }
    if (pid > 0) setpgid(pid, pid);
  }
  ~Spawned() {
    if (pid <= 0) return;
    killpg(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
  }
};

// Waits until `pid` has `n` descendants whose command line holds
// `cmd_marker` (their exec done). The marker is in the launcher's own
// script too, so a child forked but not yet exec'd (its parent's command
// line and environment still) must not count: it is the parent's line.
bool wait_descendants(pid_t pid, std::size_t n, const std::string& cmd_marker) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto line = [](pid_t p) {
    std::string cmd;
    for (auto& a : lt::proc::read_cmdline(p)) cmd += a + " ";
    return cmd;
  };
  while (std::chrono::steady_clock::now() < until) {
    std::vector<std::string> lines;
    for (pid_t d : lt::proc::descendants(pid)) lines.push_back(line(d));
    // Read after its descendants': read before, it could be the line from
    // before its own exec, which any child forked since differs from (the
    // shell's child before its exec counted as done, CI: "none runs
    // CPython: pid 7370 (sh), pid 7371 (sh)").
    const std::string own = line(pid);
    std::size_t ready = 0;
    for (const auto& cmd : lines)
      if (cmd.find(cmd_marker) != std::string::npos && cmd != own) ++ready;
    if (ready >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// Python that starts two Python children (with an extra role variable) and
// waits; the children wait too.
const char* kLauncher =
    "import os, subprocess, sys, time\n"
    "kids = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)  # rank-child'],\n"
    "                         env=dict(os.environ, LTRACE_TEST_ROLE='rank'))\n"
    "        for _ in range(2)]\n"
    "time.sleep(60)\n";

}  // namespace

TEST(JobDiscovery, LauncherTreeGivesItsRoot) {
  if (access(kPython, X_OK) != 0) GTEST_SKIP() << kPython << " missing";
  const std::string token = random_token();
  Spawned launcher({kPython, "-c", kLauncher}, {"LTRACE_TEST_JOB=" + token});
  ASSERT_GT(launcher.pid, 0);
  ASSERT_TRUE(wait_descendants(launcher.pid, 2, "rank-child"));

  std::string why = "stale";
  auto found = lt::proc::find_job_processes({{"LTRACE_TEST_JOB", token}}, &why);
  EXPECT_EQ(found, std::vector<pid_t>{launcher.pid});
  EXPECT_EQ(why, "");

  // Only the ranks carry the role: they are the roots of that match.
  auto kids = lt::proc::find_job_processes({{"LTRACE_TEST_JOB", token}, {"LTRACE_TEST_ROLE", "rank"}}, &why);
  auto expected = lt::proc::descendants(launcher.pid);
  std::sort(expected.begin(), expected.end());
  ASSERT_EQ(expected.size(), 2u);
  EXPECT_EQ(kids, expected);
  for (pid_t k : kids) EXPECT_EQ(lt::proc::read_ppid(k), launcher.pid);

  // Every pair must hold, with its exact value.
  EXPECT_TRUE(lt::proc::find_job_processes({{"LTRACE_TEST_JOB", token}, {"LTRACE_TEST_ROLE", "ran"}}).empty());
  EXPECT_TRUE(lt::proc::find_job_processes({{"LTRACE_TEST_JOB", token + "0"}}).empty());
  EXPECT_TRUE(lt::proc::find_job_processes({{"LTRACE_TEST_JO", token}}).empty());
}

TEST(JobDiscovery, ShellInBetweenIsSkipped) {
  if (access(kPython, X_OK) != 0) GTEST_SKIP() << kPython << " missing";
  const std::string token = random_token();
  // `; :` keeps the shell alive as the parent instead of exec'ing Python.
  // (The command built apart: inline, GCC 12 warned of a false -Warray-bounds.)
  std::string command = kPython;
  command.append(" -c 'import time; time.sleep(60)  # under-shell'; :");
  Spawned shell({"/bin/sh", "-c", command}, {"LTRACE_TEST_JOB=" + token});
  ASSERT_GT(shell.pid, 0);
  ASSERT_TRUE(wait_descendants(shell.pid, 1, "under-shell"));
  auto below = lt::proc::descendants(shell.pid);
  ASSERT_EQ(below.size(), 1u);
  std::string why;
  EXPECT_EQ(lt::proc::find_job_processes({{"LTRACE_TEST_JOB", token}}, &why), below);
  EXPECT_EQ(why, "");
}

TEST(JobDiscovery, TwoIndependentTreesGiveTwoRoots) {
  if (access(kPython, X_OK) != 0) GTEST_SKIP() << kPython << " missing";
  const std::string token = random_token();
  Spawned a({kPython, "-c", kLauncher}, {"LTRACE_TEST_JOB=" + token});
  Spawned b({kPython, "-c", kLauncher}, {"LTRACE_TEST_JOB=" + token});
  ASSERT_TRUE(wait_descendants(a.pid, 2, "rank-child"));
  ASSERT_TRUE(wait_descendants(b.pid, 2, "rank-child"));
  std::vector<pid_t> expected{a.pid, b.pid};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(lt::proc::find_job_processes({{"LTRACE_TEST_JOB", token}}), expected);
}

TEST(JobDiscovery, NothingFoundSaysWhy) {
  const std::string token = random_token();
  std::string why;
  EXPECT_TRUE(lt::proc::find_job_processes({{"LTRACE_TEST_JOB", token}}, &why).empty());
  EXPECT_NE(why.find("no process on this host has LTRACE_TEST_JOB=" + token + " in its environment"), std::string::npos)
      << why;

  why.clear();
  EXPECT_TRUE(lt::proc::find_job_processes({}, &why).empty());
  EXPECT_FALSE(why.empty());
  EXPECT_TRUE(lt::proc::find_job_processes({}).empty());  // no `why`: fine too
}

TEST(JobDiscovery, MatchesThatAreNotPythonAreNamed) {
  const std::string token = random_token();
  Spawned sleeper({"/bin/sleep", "60"}, {"LTRACE_TEST_JOB=" + token});
  ASSERT_GT(sleeper.pid, 0);
  // Wait for its exec to be over (the forked child still runs this test
  // binary): the kernel names the process before it lays out the new
  // image's environment, so an empty environ is still mid-exec.
  auto environ_read = [&] {
    std::ifstream f("/proc/" + std::to_string(sleeper.pid) + "/environ");
    return std::string(std::istreambuf_iterator<char>(f), {}).find("LTRACE_TEST_JOB=") != std::string::npos;
  };
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((lt::proc::read_comm(sleeper.pid) != "sleep" || !environ_read()) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::string why;
  EXPECT_TRUE(lt::proc::find_job_processes({{"LTRACE_TEST_JOB", token}}, &why).empty());
  EXPECT_NE(why.find("1 process(es) have LTRACE_TEST_JOB=" + token + " but none runs CPython: pid " +
                     std::to_string(sleeper.pid) + " (sleep)"),
            std::string::npos)
      << why;
}
