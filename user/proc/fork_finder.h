// The forks of a set of processes that are not themselves followed: the
// DataLoader workers of a trainer attached with --pid and no --children,
// whose CPU the verdict still judges from /proc (StatsSampler's FORK_STATS).
// A fork is a child with no exec since (same_image), or a child of the
// trainer's multiprocessing forkserver (Python 3.14's default start method:
// the server is exec'd, its children are forks of it). Reads /proc only;
// never throws.
#pragma once
#include <sys/types.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace lt::proc {

class ForkFinder {
 public:
  struct Fork {
    pid_t pid = 0;
    pid_t target = 0;  // the process of `targets` it is a fork of
    bool via_forkserver = false;
  };
  explicit ForkFinder(std::string proc_root = "/proc") : root_(std::move(proc_root)) {}
  // One scan of every process's ppid. Targets are never each other's forks
  // here. A process is judged once (by pid and start time): a reused pid is
  // judged again.
  const std::vector<Fork>& scan(const std::vector<pid_t>& targets);
  const std::vector<Fork>& forks() const { return forks_; }
  // The last scan read the process list (else no fork says nothing).
  bool ok() const { return ok_; }

 private:
  std::string root_;
  std::vector<Fork> forks_;
  bool ok_ = false;
  // (pid, starttime) -> its verdict for its parent: a fork of it or not
  std::map<std::pair<pid_t, unsigned long long>, bool> same_;
};

}  // namespace lt::proc
