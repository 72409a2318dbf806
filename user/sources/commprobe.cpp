#include "user/sources/commprobe.h"

#include <bpf/libbpf.h>

#include <cerrno>

#include "commprobe.skel.h"
#include "user/sources/bpf_errors.h"

namespace lt {

void SkeletonDestroy::operator()(lt_commprobe* s) const {
  lt_commprobe__destroy(s);
}

CommProbeSource::CommProbeSource(const ProcTrackSource& shared) : skel_(lt_commprobe__open()) {
  if (!skel_) throw bpf_error("open commprobe", errno);
  if (int err = shared.share_with(skel_->obj)) throw bpf_error("share maps with commprobe", -err);
  if (int err = lt_commprobe__load(skel_.get())) throw bpf_error("load commprobe", -err);
}

CommProbeSource::~CommProbeSource() = default;

std::size_t CommProbeSource::attach(const std::string& path, pid_t pid, const std::vector<Site>& sites) {
  std::size_t n = 0;
  for (const auto& s : sites) {
    LIBBPF_OPTS(bpf_uprobe_opts, o);
    o.bpf_cookie = s.cookie;
    LinkPtr l(bpf_program__attach_uprobe_opts(skel_->progs.lt_comm_enter, pid, path.c_str(),
                                              static_cast<std::size_t>(s.offset), &o));
    if (!l) throw bpf_error("attach comm probe in " + path, errno);
    links_.push_back(std::move(l));
    ++n;
  }
  return n;
}

}  // namespace lt
