#include "user/sources/commprobe.h"

#include <bpf/libbpf.h>

#include <cerrno>

#include "commprobe.skel.h"
#include "user/sources/bpf_errors.h"
#include "user/sources/uprobe_multi.h"

namespace lt {

template <>
void SkeletonDestroy<lt_commprobe>::operator()(lt_commprobe* s) const {
  lt_commprobe__destroy(s);
}

CommProbeSource::CommProbeSource(const ProcTrackSource& shared, int op_stacks_fd) : skel_(lt_commprobe__open()) {
  if (!skel_) throw bpf_error("open commprobe", errno);
  if (int err = shared.share_with(skel_->obj)) throw bpf_error("share maps with commprobe", -err);
  if (op_stacks_fd >= 0)
    if (int err = bpf_map__reuse_fd(skel_->maps.lt_op_stacks, op_stacks_fd))
      throw bpf_error("share op stacks with commprobe", -err);
  uprobes_.prepare(skel_->progs.lt_comm_enter);
  uprobes_.prepare(skel_->progs.lt_comm_mark);
  uprobes_.prepare(skel_->progs.lt_nccl_enter);
  if (int err = lt_commprobe__load(skel_.get())) throw bpf_error("load commprobe", -err);
}

CommProbeSource::~CommProbeSource() = default;

std::size_t CommProbeSource::attach(const std::string& path, pid_t pid, const std::vector<Site>& sites) {
  // one set per program: the collectives (COMM), the timing points
  // (COMM_MARK), NCCL's API (NCCL)
  struct Offsets {
    std::vector<std::uint64_t> offsets, cookies;
  } calls, marks, nccl;
  for (const auto& s : sites) {
    auto& to = s.program == Program::mark ? marks : s.program == Program::nccl ? nccl : calls;
    to.offsets.push_back(s.offset);
    to.cookies.push_back(s.cookie);
  }
  if (!calls.offsets.empty())
    uprobes_.attach(skel_->progs.lt_comm_enter, path, calls.offsets, calls.cookies, pid, "comm probes");
  if (!marks.offsets.empty())
    uprobes_.attach(skel_->progs.lt_comm_mark, path, marks.offsets, marks.cookies, pid, "comm timing probes");
  if (!nccl.offsets.empty())
    uprobes_.attach(skel_->progs.lt_nccl_enter, path, nccl.offsets, nccl.cookies, pid, "NCCL probes");
  return calls.offsets.size() + marks.offsets.size() + nccl.offsets.size();
}

}  // namespace lt
