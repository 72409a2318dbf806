#include "user/watch/stderr_sizes.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <string>

namespace lt {

StderrSizes::~StderrSizes() {
  for (auto& [pid, p] : procs_)
    if (p.fd >= 0) close(p.fd);
}

void StderrSizes::sample(const std::vector<std::uint32_t>& pids, std::uint64_t now_ns) {
  const std::set<std::uint32_t> live(pids.begin(), pids.end());
  for (auto it = procs_.begin(); it != procs_.end();) {
    if (live.count(it->first)) {
      ++it;
      continue;
    }
    if (it->second.fd >= 0) close(it->second.fd);
    it = procs_.erase(it);
  }
  for (std::uint32_t pid : pids) {
    auto [it, fresh] = procs_.try_emplace(pid);
    Proc& p = it->second;
    if (fresh) {
      if (procs_.size() > kProcesses) {
        procs_.erase(it);
        continue;
      }
      // Opened once: the file it had then (a process that reopens its
      // stderr later is read no more). O_PATH would do for fstat, but the
      // reader wants the same file: a plain read-only open, never written.
      const int fd = open(("/proc/" + std::to_string(pid) + "/fd/2").c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
      struct stat st {};
      if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
        p.fd = fd;
      else if (fd >= 0)
        close(fd);
    }
    if (p.fd < 0) continue;
    if (!p.sizes.empty() && p.sizes.back().first + kSampleEveryNs > now_ns) continue;
    struct stat st {};
    if (fstat(p.fd, &st) != 0) continue;
    p.sizes.emplace_back(now_ns, st.st_size);
    while (p.sizes.size() > 1 && p.sizes.front().first + kKeepNs < now_ns) p.sizes.pop_front();
  }
}

off_t StderrSizes::before(std::uint32_t pid, std::uint64_t ts_ns) const {
  const auto it = procs_.find(pid);
  if (it == procs_.end()) return -1;
  const auto& sizes = it->second.sizes;
  if (sizes.empty()) return -1;
  off_t size = sizes.front().second;
  for (const auto& [ts, s] : sizes)
    if (ts <= ts_ns) size = s;
  return size;
}

int StderrSizes::dup_file(std::uint32_t pid) const {
  const auto it = procs_.find(pid);
  return it == procs_.end() || it->second.fd < 0 ? -1 : fcntl(it->second.fd, F_DUPFD_CLOEXEC, 0);
}

}  // namespace lt
