// Puts the memory probes on the libc10 of each target: the allocator hooks
// (user/torch/mem_sites.h), found once per libc10 file and attached per
// target (or for every process mapping the file, with --children).  With
// only the out-of-memory source asked for (watch's OOM trigger), only the
// hooks torch calls before an allocation fails: nothing runs until one does.
#pragma once
#include <sys/types.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "bpf/events.h"
#include "user/collector/tracer.h"
#include "user/torch/mem_sites.h"

namespace lt {

class MemProbeSource;
class ProcTrackSource;

class MemTracer final : public Tracer {
 public:
  // Loads its BPF objects (allocator hooks; the op stacks of `op_stacks_fd`
  // when ops are traced too, else -1).
  explicit MemTracer(const TracerContext& ctx);
  ~MemTracer() override;
  std::string_view name() const override { return "memory"; }
  bool library() const override { return true; }
  // Out-of-memory hooks alone: no reason to hold a process at its exec
  // until libc10 loads (nothing to miss before its first failed allocation).
  bool holds_at_load() const override { return !oom_only_; }
  // Probes pid's libc10 (pid_filter -1: every process mapping it).
  // Returns false when the process has no libc10 mapped (yet).  Throws
  // lt::Error (io: unreadable; unsupported: no CPU allocator hooks; bpf).
  bool attach(pid_t pid, pid_t pid_filter) override;
  const char* lost() const override { return "its memory is missing from the report"; }
  std::size_t probes() const override { return probes_; }
  std::string describe(pid_t) const override { return last_; }
  void detach() override;
  void fill_target(pid_t pid, lt_target& t) const override;
  // watch (the out-of-memory hooks alone): while escalated, every
  // allocation and free of pid, with its Python stack where it can be read.
  std::string escalate(pid_t pid, bool on) override;
  void forget(pid_t pid) override;

 private:
  const TracerContext& ctx_;
  bool stacks_;    // the Python stack of each allocation
  bool oom_only_;  // the out-of-memory hooks alone
  struct Lib {
    std::string open_path;
    std::pair<unsigned long, unsigned long> file;  // (dev, inode): its sites in sites_
  };
  std::map<pid_t, Lib> libs_;  // each target's libc10, once found
  std::set<pid_t> escalated_;  // its allocations probed now
  std::unique_ptr<MemProbeSource> source_;
  std::map<std::pair<unsigned long, unsigned long>, std::vector<MemHookSite>> sites_;  // per (dev, inode)
  std::set<std::tuple<unsigned long, unsigned long, pid_t>> attached_;
  std::size_t probes_ = 0;
  std::string last_;
};

}  // namespace lt
