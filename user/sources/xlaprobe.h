// XLA source (bpf/xlaprobe.bpf.c): entry uprobes on torch_xla's runtime in
// its _XLAC extension (the PJRT client, the graph executor's MarkStep and
// the end points of torch_xla's own timers).  Which processes report is
// decided per target (LT_TARGET_XLA in the shared target table).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "user/sources/bpf_owner.h"
#include "user/sources/proctrack.h"
#include "user/sources/uprobe_multi.h"

struct lt_xlaprobe;

namespace lt {

// Its skeleton's destroy, defined where the skeleton is (user/sources/xlaprobe.cpp).
template <>
void SkeletonDestroy<lt_xlaprobe>::operator()(lt_xlaprobe* s) const;

class XlaProbeSource {
 public:
  // Throws lt::Error(bpf|permission).
  explicit XlaProbeSource(const ProcTrackSource& shared);
  ~XlaProbeSource();
  XlaProbeSource(const XlaProbeSource&) = delete;
  XlaProbeSource& operator=(const XlaProbeSource&) = delete;

  struct Site {
    std::uint64_t offset;  // file offset of the function's entry
    std::uint32_t kind;    // enum lt_xla_site
  };
  // Entry uprobes at `sites` of `path` (a path this process can open);
  // pid -1: every process mapping the file (BPF keeps only targets).
  // Returns how many attached.
  std::size_t attach(const std::string& path, pid_t pid, const std::vector<Site>& sites);
  std::size_t probes() const { return uprobes_.probes(); }

 private:
  SkeletonPtr<lt_xlaprobe> skel_;
  EntryUprobes uprobes_;  // released before the skeleton
};

}  // namespace lt
