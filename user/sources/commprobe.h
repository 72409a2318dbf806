// Communication source (bpf/commprobe.bpf.c): entry uprobes on c10d's
// process-group backend methods (user/torch/comm_sites.h) and on NCCL's API
// (user/torch/nccl_sites.h).  Which processes
// report is decided per target (LT_TARGET_COMM in the shared target table).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "user/sources/bpf_owner.h"
#include "user/sources/proctrack.h"
#include "user/sources/uprobe_multi.h"

struct lt_commprobe;

namespace lt {

// Its skeleton's destroy, defined where the skeleton is (user/sources/commprobe.cpp).
template <>
void SkeletonDestroy<lt_commprobe>::operator()(lt_commprobe* s) const;

class CommProbeSource {
 public:
  // Throws lt::Error(bpf|permission).
  // op_stacks_fd: the op probes' per-thread op stacks (or -1), which the
  // Python stacks of --launch-stacks read too.
  CommProbeSource(const ProcTrackSource& shared, int op_stacks_fd);
  ~CommProbeSource();
  CommProbeSource(const CommProbeSource&) = delete;
  CommProbeSource& operator=(const CommProbeSource&) = delete;

  // Which BPF program a site runs: lt_comm_enter (COMM), lt_comm_mark
  // (COMM_MARK) or lt_nccl_enter (NCCL).
  enum class Program { call, mark, nccl };
  struct Site {
    std::uint64_t offset;  // file offset of the function's entry
    std::uint64_t cookie;  // LT_COMM_COOKIE, the enum lt_comm_mark_what of a mark, the enum lt_nccl_fn
    Program program = Program::call;
  };
  // Entry uprobes at `sites` of `path` (a path this process can open);
  // pid -1: every process mapping the file (BPF keeps only targets).
  // Returns how many attached.
  std::size_t attach(const std::string& path, pid_t pid, const std::vector<Site>& sites);
  std::size_t probes() const { return uprobes_.probes(); }

 private:
  SkeletonPtr<lt_commprobe> skel_;
  EntryUprobes uprobes_;  // released before the skeleton
};

}  // namespace lt
