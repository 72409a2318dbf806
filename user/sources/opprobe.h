// aten operator source (bpf/opprobe.bpf.c): one entry probe per
// at::_ops::<op>::call of a libtorch file, attached as a single uprobe_multi
// link (all ~3000 ops in well under a second).  Which processes report ops is
// decided per target (LT_TARGET_OPS in the shared target table).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "user/sources/bpf_owner.h"
#include "user/sources/proctrack.h"

struct lt_opprobe;

namespace lt {

// Its skeleton's destroy, defined where the skeleton is (user/sources/opprobe.cpp).
template <>
void SkeletonDestroy<lt_opprobe>::operator()(lt_opprobe* s) const;

class OpProbeSource {
 public:
  explicit OpProbeSource(const ProcTrackSource& shared);  // throws lt::Error(bpf|permission)
  ~OpProbeSource();
  OpProbeSource(const OpProbeSource&) = delete;
  OpProbeSource& operator=(const OpProbeSource&) = delete;

  // The per-thread op stacks, shared with the sampler (pysample).
  int stacks_fd() const;
  // One entry probe at each file offset of `path` (a path this process can
  // open, e.g. under /proc/PID/root); a hit reports cookies[i].  pid -1:
  // every process mapping the file (BPF keeps only targets).
  void attach(const std::string& path, const std::vector<std::uint64_t>& offsets,
              const std::vector<std::uint64_t>& cookies, pid_t pid);
  std::size_t probes() const { return probes_; }
  // Attaches a program to ltrace:ops in the bridge at `path` (a path this
  // process can open) for pid: its semaphore up asks that process's bridge
  // for the op observer until the link goes (our detach, or our death).
  // Throws lt::Error(bpf).
  void raise_observer_semaphore(const std::string& path, pid_t pid);
  // Drops pid's link (the bridge removes its observer at its next poll).
  void lower_observer_semaphore(pid_t pid);

 private:
  SkeletonPtr<lt_opprobe> skel_;
  std::vector<OwnedFd> link_fds_;  // closed before the skeleton is destroyed
  std::map<pid_t, LinkPtr> observer_links_;
  std::size_t probes_ = 0;
};

}  // namespace lt
