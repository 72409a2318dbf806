// GPU source (bpf/gpu.bpf.c): the USDT probes of the bridge library inside
// targets (CUPTI activity, names, launches, NVTX, status, clock), and entry
// uprobes on libcudart / libcuda functions for when CUPTI is not ours.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "user/sources/bpf_owner.h"
#include "user/sources/proctrack.h"
#include "user/sources/uprobe_multi.h"

struct lt_gpu;
struct bpf_link;

namespace lt {

// Its skeleton's destroy, defined where the skeleton is (user/sources/gpu.cpp).
template <>
void SkeletonDestroy<lt_gpu>::operator()(lt_gpu* s) const;

class GpuSource {
 public:
  // op_stacks_fd: OpProbeSource::stacks_fd() when ops are traced, else -1.
  // launch_stack_interval_ns: least time between two launch stacks of one
  // thread.  Throws lt::Error(bpf|permission).
  GpuSource(const ProcTrackSource& shared, int op_stacks_fd, std::uint64_t launch_stack_interval_ns);
  ~GpuSource();
  GpuSource(const GpuSource&) = delete;
  GpuSource& operator=(const GpuSource&) = delete;

  // The bridge's probes in the library at `path` (a path this process can
  // open), for every process that maps it: the kernel bumps the probes'
  // semaphores in each, which wakes their bridge.  Once per file (a second
  // set of probes would deliver every record twice).
  void attach_bridge(const std::string& path);

  struct Site {
    std::uint64_t offset;  // file offset of the function's entry
    std::uint16_t api;     // LT_API_*
    std::uint16_t source;  // LT_LAUNCH_CUDART / LT_LAUNCH_LIBCUDA
    std::uint32_t index;   // names it in user space (cbid field of the record)
  };
  // Entry uprobes in `path` for process `pid`; returns how many attached.
  std::size_t attach_entries(const std::string& path, pid_t pid, const std::vector<Site>& sites);

  // Drops every bridge's session probe: the bridges flush CUPTI, report
  // LT_BRIDGE_DORMANT and release it, while the other probes still carry
  // what they flush.  Call before destroying.
  void release_sessions();

 private:
  // Destroyed in reverse: the session probes first (as release_sessions()),
  // then the data probes, then the skeleton.
  SkeletonPtr<lt_gpu> skel_;
  std::set<std::pair<unsigned long, unsigned long>> bridges_;  // (dev, inode): one file, whatever path names it
  std::vector<LinkPtr> links_;                                 // the bridge's USDT probes
  EntryUprobes entries_;                                       // CUDA API entries
  std::vector<LinkPtr> session_links_;
};

}  // namespace lt
