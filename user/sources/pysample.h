// Python stack source (bpf/pysample.bpf.c): a cpu-clock perf event per CPU
// running the BPF stack walker, and optionally the sched_switch probe for
// off-CPU time.  Which processes are sampled is decided per target
// (LT_TARGET_SAMPLE / LT_TARGET_OFF_CPU in the shared target table).
#pragma once
#include <cstdint>
#include <vector>

#include "user/sources/bpf_owner.h"
#include "user/sources/proctrack.h"

struct lt_pysample;
struct bpf_link;

namespace lt {

// Its skeleton's destroy, defined where the skeleton is (user/sources/pysample.cpp).
template <>
void SkeletonDestroy<lt_pysample>::operator()(lt_pysample* s) const;

class PySampleSource {
 public:
  // rate_hz 0: no on-CPU sampling.  op_stacks_fd: OpProbeSource::stacks_fd()
  // when ops are traced, else -1.  Throws lt::Error(bpf|permission).
  PySampleSource(const ProcTrackSource& shared, unsigned rate_hz, bool off_cpu, int op_stacks_fd = -1);
  ~PySampleSource();
  PySampleSource(const PySampleSource&) = delete;
  PySampleSource& operator=(const PySampleSource&) = delete;
  std::uint64_t period_ns() const { return period_ns_; }

 private:
  // Destroyed in reverse: links, then perf events, then the skeleton.
  SkeletonPtr<lt_pysample> skel_;
  std::vector<OwnedFd> perf_fds_;
  std::vector<LinkPtr> links_;
  std::uint64_t period_ns_ = 0;
};

}  // namespace lt
