// Memory source (bpf/memprobe.bpf.c): entry uprobes on torch's allocator
// hooks in libc10 (the CPU allocator's ProfiledCPUMemoryReporter, the
// CUDA caching allocator's reportMemoryUsageToProfiler).  Which processes
// report is decided per target (LT_TARGET_MEM in the shared target table).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "user/sources/bpf_owner.h"
#include "user/sources/proctrack.h"
#include "user/sources/uprobe_multi.h"

struct lt_memprobe;

namespace lt {

// Its skeleton's destroy, defined where the skeleton is (user/sources/memprobe.cpp).
template <>
void SkeletonDestroy<lt_memprobe>::operator()(lt_memprobe* s) const;

class MemProbeSource {
 public:
  // op_stacks_fd: OpProbeSource::stacks_fd() when ops are traced, else -1.
  // Throws lt::Error(bpf|permission).
  MemProbeSource(const ProcTrackSource& shared, int op_stacks_fd);
  ~MemProbeSource();
  MemProbeSource(const MemProbeSource&) = delete;
  MemProbeSource& operator=(const MemProbeSource&) = delete;

  struct Site {
    std::uint64_t offset;  // file offset of the hook's entry
    std::uint32_t kind;    // enum lt_mem_site
  };
  // Entry uprobes at `sites` of `path` (a path this process can open);
  // pid -1: every process mapping the file (BPF keeps only targets).
  // Returns how many attached.
  std::size_t attach(const std::string& path, pid_t pid, const std::vector<Site>& sites);
  std::size_t probes() const { return uprobes_.probes(); }
  // Entry uprobes at `sites` of `path` for pid alone, until drop(pid):
  // watch's escalated window (its allocations while it lasts).
  std::size_t attach_for(pid_t pid, const std::string& path, const std::vector<Site>& sites);
  void drop(pid_t pid) { for_pid_.erase(pid); }

 private:
  SkeletonPtr<lt_memprobe> skel_;
  EntryUprobes uprobes_;                                    // released before the skeleton
  std::map<pid_t, std::unique_ptr<EntryUprobes>> for_pid_;  // likewise
};

}  // namespace lt
