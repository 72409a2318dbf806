#include "user/sources/xlaprobe.h"

#include <bpf/libbpf.h>

#include <cerrno>

#include "user/sources/bpf_errors.h"
#include "user/sources/uprobe_multi.h"
#include "xlaprobe.skel.h"

namespace lt {

template <>
void SkeletonDestroy<lt_xlaprobe>::operator()(lt_xlaprobe* s) const {
  lt_xlaprobe__destroy(s);
}

XlaProbeSource::XlaProbeSource(const ProcTrackSource& shared) : skel_(lt_xlaprobe__open()) {
  if (!skel_) throw bpf_error("open xlaprobe", errno);
  if (int err = shared.share_with(skel_->obj)) throw bpf_error("share maps with xlaprobe", -err);
  uprobes_.prepare(skel_->progs.lt_xla_hook);
  if (int err = lt_xlaprobe__load(skel_.get())) throw bpf_error("load xlaprobe", -err);
}

XlaProbeSource::~XlaProbeSource() = default;

std::size_t XlaProbeSource::attach(const std::string& path, pid_t pid, const std::vector<Site>& sites) {
  std::vector<std::uint64_t> offsets, cookies;
  for (const auto& s : sites) {
    offsets.push_back(s.offset);
    cookies.push_back(s.kind);
  }
  if (offsets.empty()) return 0;
  uprobes_.attach(skel_->progs.lt_xla_hook, path, offsets, cookies, pid, "XLA probes");
  return offsets.size();
}

}  // namespace lt
