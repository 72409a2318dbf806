#include "user/proc/fork_finder.h"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "user/proc/census.h"
#include "user/proc/procfs.h"

namespace lt::proc {

namespace {
struct Seen {
  pid_t pid, ppid;
  unsigned long long start;
};

bool forkserver(const std::string& root, pid_t pid) {
  // A forkserver's line: python -c 'from multiprocessing.forkserver import main; main(...)' ...
  const std::string cmd = read_bounded(root + "/" + std::to_string(pid) + "/cmdline", 8192);
  return cmd.find("multiprocessing.forkserver") != std::string::npos;
}
}  // namespace

const std::vector<ForkFinder::Fork>& ForkFinder::scan(const std::vector<pid_t>& targets) {
  forks_.clear();
  ok_ = false;
  if (targets.empty()) return forks_;
  const std::set<pid_t> is_target(targets.begin(), targets.end());
  std::vector<Seen> all;
  if (DIR* d = opendir(root_.c_str())) {
    ok_ = true;
    while (dirent* e = readdir(d)) {
      char* end = nullptr;
      const long p = std::strtol(e->d_name, &end, 10);
      if (*end != '\0' || p <= 0) continue;
      const auto st = parse_stat(read_bounded(root_ + "/" + e->d_name + "/stat", 1024));
      if (!st || st->zombie() || st->kernel_thread()) continue;
      all.push_back({static_cast<pid_t>(p), st->ppid, st->starttime});
    }
    closedir(d);
  }
  // Judged once: a fork's cmdline and vDSO read once, not every scan.
  std::map<std::pair<pid_t, unsigned long long>, bool> still;
  auto judged = [&](const Seen& s, pid_t parent) {
    const auto key = std::make_pair(s.pid, s.start);
    auto it = same_.find(key);
    const bool same = it != same_.end() ? it->second : same_image(s.pid, parent);
    still[key] = same;
    return same;
  };
  std::set<pid_t> servers;  // a target's forkserver children
  for (const auto& s : all) {
    if (is_target.count(s.pid) || !is_target.count(s.ppid)) continue;
    if (judged(s, s.ppid))
      forks_.push_back({s.pid, s.ppid, false});
    else if (forkserver(root_, s.pid))
      servers.insert(s.pid);
  }
  if (!servers.empty()) {
    std::map<pid_t, pid_t> server_of;  // server -> its target
    for (const auto& s : all)
      if (servers.count(s.pid)) server_of[s.pid] = s.ppid;
    for (const auto& s : all)
      if (auto it = server_of.find(s.ppid); it != server_of.end() && !is_target.count(s.pid) && judged(s, s.ppid))
        forks_.push_back({s.pid, it->second, true});
  }
  same_ = std::move(still);  // the gone ones forgotten: bounded by the live forks
  std::sort(forks_.begin(), forks_.end(), [](const Fork& a, const Fork& b) { return a.pid < b.pid; });
  return forks_;
}

}  // namespace lt::proc
