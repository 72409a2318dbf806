// Puts the memory probes on the libc10 of each target: the allocator hooks
// (user/torch/mem_sites.h), found once per libc10 file and attached per
// target (or for every process mapping the file, with --children).
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
  // Probes pid's libc10 (pid_filter -1: every process mapping it).
  // Returns false when the process has no libc10 mapped (yet).  Throws
  // lt::Error (io: unreadable; unsupported: no CPU allocator hooks; bpf).
  bool attach(pid_t pid, pid_t pid_filter) override;
  const char* lost() const override { return "its memory is missing from the report"; }
  std::size_t probes() const override { return probes_; }
  std::string describe(pid_t) const override { return last_; }
  void detach() override;
  void fill_target(pid_t pid, lt_target& t) const override;

 private:
  bool stacks_;  // the Python stack of each allocation
  std::unique_ptr<MemProbeSource> source_;
  std::map<std::pair<unsigned long, unsigned long>, std::vector<MemHookSite>> sites_;  // per (dev, inode)
  std::set<std::tuple<unsigned long, unsigned long, pid_t>> attached_;
  std::size_t probes_ = 0;
  std::string last_;
};

}  // namespace lt
