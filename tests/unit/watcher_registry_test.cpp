// One watcher per process on a machine: the overlap rules, the entries'
// locks, stale entries and a registry directory that is not ours.
#include "user/watch/watcher_registry.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "tests/unit/temp_dir.h"
#include "user/cli/watch_selection.h"
#include "user/core/errors.h"
#include "user/proc/thread_status.h"

using namespace lt;

namespace {

WatchSelection pids(pid_t watcher, std::vector<pid_t> p) {
  WatchSelection s;
  s.watcher = watcher;
  s.pids = std::move(p);
  s.dir = "/w/" + std::to_string(watcher);
  return s;
}

WatchSelection job(pid_t watcher, EnvPairs env) {
  WatchSelection s;
  s.watcher = watcher;
  s.env = std::move(env);
  s.dir = "/w/" + std::to_string(watcher);
  return s;
}

// What a selection watches "now": its pids, the processes with every pair
// of its --job-env filter, and with `children` their children.
WatchedNow fake_jobs(std::map<std::string, std::vector<pid_t>> by_value,
                     std::map<pid_t, std::vector<pid_t>> children_of = {}) {
  return [by_value, children_of](const WatchSelection& sel) {
    std::vector<pid_t> out;
    for (std::size_t i = 0; i < sel.env.size(); ++i) {
      const auto it = by_value.find(sel.env[i].first + "=" + sel.env[i].second);
      std::vector<pid_t> these = it == by_value.end() ? std::vector<pid_t>{} : it->second;
      if (i == 0) {
        out = these;
        continue;
      }
      std::erase_if(out, [&](pid_t p) { return std::find(these.begin(), these.end(), p) == these.end(); });
    }
    out.insert(out.end(), sel.pids.begin(), sel.pids.end());
    if (sel.children)
      for (pid_t p : std::vector<pid_t>(out))
        if (auto it = children_of.find(p); it != children_of.end())
          out.insert(out.end(), it->second.begin(), it->second.end());
    return out;
  };
}

struct RegistryDir : testing_support::TempDir {
  RegistryDir() : testing_support::TempDir("lt_registry") {}
};

ExitCode refusal(const WatchSelection& s, const WatchedNow& f, const std::string& dir, std::string* what) {
  try {
    WatcherRegistration r(s, f, dir);
  } catch (const Error& e) {
    *what = e.what();
    return e.code();
  }
  return ExitCode::ok;
}

}  // namespace

TEST(WatcherRegistry, AnEntryReadsBackAsWritten) {
  WatchSelection s = job(42, {{"SLURM_JOB_ID", "7"}, {"A", "b=c\nd\\e"}});
  s.pids = {3, 5};
  s.children = true;
  s.dir = "/odd\ndir name";
  WatchSelection back;
  ASSERT_TRUE(parse_selection(format_selection(s), back));
  EXPECT_EQ(back.watcher, 42);
  EXPECT_EQ(back.pids, (std::vector<pid_t>{3, 5}));
  EXPECT_EQ(back.env, s.env);
  EXPECT_EQ(back.dir, s.dir);
  EXPECT_FALSE(back.all);
  EXPECT_TRUE(back.children);
  WatchSelection junk;
  EXPECT_FALSE(parse_selection("watcher x\ndir /a", junk));
  EXPECT_FALSE(parse_selection("pid 3\n", junk));
  EXPECT_FALSE(parse_selection("watcher 3\nbogus\ndir /a", junk));
  EXPECT_FALSE(parse_selection("all\ndir /a", junk));  // no watcher line
}

TEST(WatcherRegistry, OverlapIsAProcessBothWouldWatch) {
  const auto f =
      fake_jobs({{"SLURM_JOB_ID=7", {10, 11, 12}}, {"SLURMD_NODENAME=n1", {10, 11}}, {"SLURMD_NODENAME=n2", {12}}});
  WatchSelection all;
  all.all = true;
  all.watcher = 1;
  EXPECT_EQ(selection_overlap(pids(2, {5}), all, f), "it watches every process (--all)");
  EXPECT_EQ(selection_overlap(all, pids(2, {5}), f), "--all would take its processes too");
  EXPECT_EQ(selection_overlap(pids(2, {5, 6}), pids(3, {6, 7}), f), "it watches pid 6");
  EXPECT_EQ(selection_overlap(pids(2, {5}), pids(3, {6}), f), "");
  // One Slurm job's nodes on a shared host: one watcher each.
  const auto n1 = job(2, {{"SLURM_JOB_ID", "7"}, {"SLURMD_NODENAME", "n1"}});
  const auto n2 = job(3, {{"SLURM_JOB_ID", "7"}, {"SLURMD_NODENAME", "n2"}});
  EXPECT_EQ(selection_overlap(n1, n2, f), "");
  EXPECT_EQ(selection_overlap(n1, job(4, {{"SLURM_JOB_ID", "7"}}), f), "it watches the processes with SLURM_JOB_ID=7");
  // A filter's processes found now against a watcher of pids.
  EXPECT_EQ(selection_overlap(pids(5, {12}), n2, f), "it watches pid 12");
  EXPECT_EQ(selection_overlap(pids(5, {13}), n2, f), "");
  // A launcher's rank, under a watcher of the launcher with its children.
  const auto g = fake_jobs({{"SLURM_JOB_ID=8", {20}}}, {{20, {21, 22}}});
  auto launcher = job(6, {{"SLURM_JOB_ID", "8"}});
  launcher.children = true;
  EXPECT_EQ(selection_overlap(pids(5, {22}), launcher, g), "it watches pid 22");
  EXPECT_EQ(selection_overlap(launcher, pids(5, {22}), g), "it watches pid 22");
}

TEST(WatcherRegistry, ASecondWatcherOfAProcessIsRefusedNamingTheFirst) {
  RegistryDir d;
  const auto f = fake_jobs({});
  {
    WatcherRegistration first(pids(100, {5, 6}), f, d.path);
    std::string what;
    EXPECT_EQ(refusal(pids(200, {6}), f, d.path, &what), ExitCode::watched);
    EXPECT_EQ(what,
              "the watcher pid 100 (on /w/100) runs here and it watches pid 6: one watcher per process on a machine "
              "(ask it: ltrace-bpf watch --dir /w/100 --capture-now)");
    EXPECT_EQ(refusal(pids(200, {7}), f, d.path, &what), ExitCode::ok) << what;  // gone again with its scope
    WatcherRegistration other(pids(300, {8}), f, d.path);
    EXPECT_TRUE(std::filesystem::exists(d.path + "/300"));
  }
  // Both gone: their entries with them.
  EXPECT_FALSE(std::filesystem::exists(d.path + "/100"));
  EXPECT_FALSE(std::filesystem::exists(d.path + "/300"));
  std::string what;
  EXPECT_EQ(refusal(pids(200, {6}), f, d.path, &what), ExitCode::ok) << what;
}

// With --job-env, what a watcher would watch is a scan of every process's
// environment, done under the registry's lock: once, whatever the entries.
TEST(WatcherRegistry, ItsOwnProcessesAreReadOnceWhateverTheEntries) {
  RegistryDir d;
  const auto f = fake_jobs({{"SLURM_JOB_ID=7", {40, 41}}});
  WatcherRegistration a(pids(100, {5}), f, d.path), b(pids(101, {6}), f, d.path), c(pids(102, {8}), f, d.path);
  int mine_reads = 0;
  const WatchedNow counting = [&](const WatchSelection& s) {
    if (s.watcher == 200) ++mine_reads;
    return f(s);
  };
  WatcherRegistration mine(job(200, {{"SLURM_JOB_ID", "7"}}), counting, d.path);
  EXPECT_EQ(mine_reads, 1);
}

TEST(WatcherRegistry, AKilledWatchersEntryIsRemovedNotObeyed) {
  RegistryDir d;
  // An entry no one holds locked: its watcher was killed with SIGKILL.
  std::ofstream(d.path + "/100") << format_selection(pids(100, {5}));
  {
    WatcherRegistration next(pids(200, {5}), fake_jobs({}), d.path);
    EXPECT_FALSE(std::filesystem::exists(d.path + "/100"));
  }
}

TEST(WatcherRegistry, ALiveEntryItCannotReadRefuses) {
  RegistryDir d;
  // Held by a live watcher (this process holds its lock), written by
  // another version.
  const std::string path = d.path + "/100";
  std::ofstream(path) << "watcher 100\nsomething new\ndir /w";
  const int fd = open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX), 0);
  std::string what;
  EXPECT_EQ(refusal(pids(200, {5}), fake_jobs({}), d.path, &what), ExitCode::watched);
  EXPECT_NE(what.find("is not one this ltrace-bpf reads"), std::string::npos) << what;
  close(fd);
}

TEST(WatcherRegistry, ARegistryDirectoryOthersMayWriteIsRefused) {
  RegistryDir d;
  ASSERT_EQ(chmod(d.path.c_str(), 0775), 0);  // others may write in it
  std::string what;
  EXPECT_EQ(refusal(pids(200, {5}), fake_jobs({}), d.path, &what), ExitCode::unsafe_output);
  // Only readable by others (an older ltrace-bpf's 0755): closed to them.
  ASSERT_EQ(chmod(d.path.c_str(), 0755), 0);
  EXPECT_EQ(refusal(pids(200, {5}), fake_jobs({}), d.path, &what), ExitCode::ok) << what;
  struct stat st {};
  ASSERT_EQ(stat(d.path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const std::string link = d.path + "-link";
  std::filesystem::create_directory_symlink(d.path, link);
  ASSERT_EQ(chmod(d.path.c_str(), 0700), 0);
  EXPECT_EQ(refusal(pids(200, {5}), fake_jobs({}), link, &what), ExitCode::unsafe_output);
  std::filesystem::remove(link);
}

// An entry's pids carry their start times: a pid the kernel gave to a new
// process since is not the watched one, and does not refuse its watcher.
TEST(WatcherRegistry, AWatchedPidReusedSinceIsNotItsProcess) {
  const pid_t me = getpid();
  const auto started = proc::start_time(me);
  ASSERT_TRUE(started);
  WatchSelection s = pids(100, {me});
  s.started[me] = *started;
  WatchSelection back;
  ASSERT_TRUE(parse_selection(format_selection(s), back));
  EXPECT_EQ(back.started, s.started);
  auto now = processes_watched_now(back);
  EXPECT_NE(std::find(now.begin(), now.end(), me), now.end());
  back.started[me] = *started + 1;  // the watched process began at another time: this one reuses its pid
  now = processes_watched_now(back);
  EXPECT_EQ(std::find(now.begin(), now.end(), me), now.end());
  // An entry without start times (or one that could not be read) keeps the pid.
  back.started.clear();
  now = processes_watched_now(back);
  EXPECT_NE(std::find(now.begin(), now.end(), me), now.end());
  WatchSelection bad;
  EXPECT_FALSE(parse_selection("watcher 5\npid 7 x\ndir /d", bad));
  EXPECT_FALSE(parse_selection("watcher 5\npid 7 \ndir /d", bad));
}
