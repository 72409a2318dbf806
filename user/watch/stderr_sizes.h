// Each watched process's stderr size, where that is a regular file (a
// batch script's slurm-N.out, nohup.out, a redirected log), sampled once a
// second from the drain's ticks: an escaped exception's traceback (exception_line.h) is
// looked for in what the process wrote after the exception, from the size
// its stderr had before it, so that an older traceback in a log that many
// runs append to is never this run's. Reads /proc only; never throws.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <map>
#include <utility>
#include <vector>

namespace lt {

class StderrSizes {
 public:
  StderrSizes() = default;
  StderrSizes(const StderrSizes&) = delete;
  StderrSizes& operator=(const StderrSizes&) = delete;
  ~StderrSizes();
  // `pids`: the processes watched now (the others' files are closed).
  void sample(const std::vector<std::uint32_t>& pids, std::uint64_t now_ns);
  // The size sampled last at or before `ts_ns`, else the first one kept
  // (what came after it is this process's: it was watched); -1 when none
  // was (not a file).
  off_t before(std::uint32_t pid, std::uint64_t ts_ns) const;
  // A file descriptor of pid's stderr file, the caller's to close (a
  // process that has exited is still read: its file is held here); -1 when
  // none is held.
  int dup_file(std::uint32_t pid) const;
  // Samples older than this go: one at or before 5 s ago is always kept.
  static constexpr std::uint64_t kKeepNs = 6'000'000'000;
  static constexpr std::size_t kProcesses = 4096;  // at most this many files held open
  // A size a second is enough for where 5 s before an exception was (the
  // drain ticks ten times a second).
  static constexpr std::uint64_t kSampleEveryNs = 1'000'000'000;

 private:
  struct Proc {
    int fd = -1;  // -1: its stderr is no regular file (not opened again)
    std::deque<std::pair<std::uint64_t, off_t>> sizes;
  };
  std::map<std::uint32_t, Proc> procs_;
};

}  // namespace lt
