// Puts the comm probes on the libtorch_cpu of each target: the c10d backend
// methods (user/torch/comm_sites.h), found once per file and attached per
// target (or for every process mapping the file, with --children).
#pragma once
#include <sys/types.h>

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "user/torch/comm_sites.h"

namespace lt {

class CommProbeSource;

class CommTracer {
 public:
  explicit CommTracer(CommProbeSource& source) : source_(source) {}
  // Probes pid's libtorch_cpu (pid_filter -1: every process mapping it).
  // Returns false when the process has no libtorch_cpu mapped (yet).
  // Throws lt::Error (io: unreadable; unsupported: no c10d backend; bpf).
  bool attach(pid_t pid, pid_t pid_filter);
  std::size_t probes() const { return probes_; }
  const std::string& describe() const { return last_; }  // for --verbose

 private:
  CommProbeSource& source_;
  std::map<std::pair<unsigned long, unsigned long>, std::vector<CommSite>> sites_;  // per (dev, inode)
  std::set<std::tuple<unsigned long, unsigned long, pid_t>> attached_;
  std::size_t probes_ = 0;
  std::string last_;
};

}  // namespace lt
