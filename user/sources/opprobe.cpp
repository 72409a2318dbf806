#include "user/sources/opprobe.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>

#include "opprobe.skel.h"
#include "user/sources/bpf_errors.h"
#include "user/sources/uprobe_multi.h"

namespace lt {

template <>
void SkeletonDestroy<lt_opprobe>::operator()(lt_opprobe* s) const {
  lt_opprobe__destroy(s);
}

OpProbeSource::OpProbeSource(const ProcTrackSource& shared) : skel_(lt_opprobe__open()) {
  if (!skel_) throw bpf_error("open opprobe", errno);
  if (int err = shared.share_with(skel_->obj)) throw bpf_error("share maps with opprobe", -err);
  // Loaded as a uprobe_multi program: bpf_get_attach_cookie then reads the
  // per-offset cookie of the link.
  expect_uprobe_multi(skel_->progs.lt_op_enter);
  if (int err = lt_opprobe__load(skel_.get())) throw bpf_error("load opprobe (uprobe_multi needs Linux 6.6+)", -err);
}

OpProbeSource::~OpProbeSource() = default;

int OpProbeSource::stacks_fd() const {
  return bpf_map__fd(skel_->maps.lt_op_stacks);
}

void OpProbeSource::attach(const std::string& path, const std::vector<std::uint64_t>& offsets,
                           const std::vector<std::uint64_t>& cookies, pid_t pid) {
  if (offsets.empty()) return;
  // Before 6.10 a link scoped to a pid fires on that one thread only
  // (uprobe_multi.h): every process then, and BPF keeps the targets.
  link_fds_.push_back(attach_uprobe_multi(skel_->progs.lt_op_enter, path, offsets, cookies,
                                          uprobe_multi_scopes_processes() ? pid : 0, "op probes"));
  probes_ += offsets.size();
}

void OpProbeSource::raise_observer_semaphore(const std::string& path, pid_t pid) {
  LinkPtr l(bpf_program__attach_usdt(skel_->progs.lt_ops_observer, pid, path.c_str(), "ltrace", "ops", nullptr));
  if (!l) {
    const int err = errno;
    throw bpf_error("attach USDT ltrace:ops in " + path, err);
  }
  observer_links_[pid] = std::move(l);
}

void OpProbeSource::lower_observer_semaphore(pid_t pid) {
  observer_links_.erase(pid);
}

}  // namespace lt
