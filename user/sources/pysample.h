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
  // when ops are traced, else -1.  full_rate_hz over rate_hz: targets may be
  // sampled at that rate while set_full_rate() is on (watch's escalation);
  // the period is then the full rate's, and the cheap events' period a
  // whole multiple of it (rate_hz rounded so), each of their samples
  // weighing that many.  Throws lt::Error(bpf|permission).
  PySampleSource(const ProcTrackSource& shared, unsigned rate_hz, bool off_cpu, int op_stacks_fd = -1,
                 unsigned full_rate_hz = 0);
  ~PySampleSource();
  PySampleSource(const PySampleSource&) = delete;
  PySampleSource& operator=(const PySampleSource&) = delete;
  // What one unit of sample weight stands for (SAMPLER_INFO's period).
  std::uint64_t period_ns() const { return period_ns_; }
  // The cheap events' samples' weight (1 without a full rate).
  unsigned cheap_weight() const { return cheap_weight_; }
  bool weighted() const { return full_rate_; }
  // The full-rate events on every CPU (they sample only targets flagged
  // LT_TARGET_SAMPLE_FULL), or off.  Throws lt::Error(bpf) when on fails.
  void set_full_rate(bool on);

 private:
  std::vector<LinkPtr> open_per_cpu(std::uint64_t period_ns, std::uint64_t cookie);
  // Destroyed in reverse: links, then perf events, then the skeleton.
  SkeletonPtr<lt_pysample> skel_;
  // Per CPU: its program's link, which owns the perf event (libbpf closes
  // it at the link's destroy: a second close here closed whatever another
  // thread had opened under that number since, a watch capture's report
  // directory at a de-escalation).
  std::vector<LinkPtr> cheap_, full_;
  std::vector<LinkPtr> links_;
  std::uint64_t period_ns_ = 0;
  unsigned cheap_weight_ = 1;
  bool full_rate_ = false;
};

}  // namespace lt
