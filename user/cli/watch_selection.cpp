#include "user/cli/watch_selection.h"

#include <unistd.h>

#include "user/proc/job_discovery.h"
#include "user/proc/procfs.h"
#include "user/proc/thread_status.h"

namespace lt {

WatchSelection watch_selection(const Options& o) {
  WatchSelection s;
  s.all = o.all;
  s.children = o.children || !o.job_env.empty();
  s.pids = o.pids;
  for (pid_t p : o.pids)
    if (const auto st = proc::start_time(p)) s.started[p] = *st;
  s.env = o.job_env;
  s.dir = o.watch_dir;
  s.watcher = getpid();
  return s;
}

std::vector<pid_t> processes_watched_now(const WatchSelection& s) {
  std::vector<pid_t> roots;
  for (pid_t p : s.pids) {
    const auto st = s.started.find(p);
    // Reused since the watcher began: another process, not watched.
    if (st != s.started.end() && proc::start_time(p) != st->second) continue;
    roots.push_back(p);
  }
  if (!s.env.empty()) {
    auto found = proc::find_job_processes(s.env);
    roots.insert(roots.end(), found.begin(), found.end());
  }
  std::vector<pid_t> all = roots;
  if (s.children)
    for (pid_t p : roots) {
      auto more = proc::descendants(p);
      all.insert(all.end(), more.begin(), more.end());
    }
  return all;
}

}  // namespace lt
