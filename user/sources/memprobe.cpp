#include "user/sources/memprobe.h"

#include <bpf/libbpf.h>

#include <cerrno>

#include "memprobe.skel.h"
#include "user/sources/bpf_errors.h"

namespace lt {

void SkeletonDestroy::operator()(lt_memprobe* s) const {
  lt_memprobe__destroy(s);
}

MemProbeSource::MemProbeSource(const ProcTrackSource& shared, int op_stacks_fd) : skel_(lt_memprobe__open()) {
  if (!skel_) throw bpf_error("open memprobe", errno);
  if (int err = shared.share_with(skel_->obj)) throw bpf_error("share maps with memprobe", -err);
  // Allocations see the same per-thread op stacks as the op probes.
  if (op_stacks_fd >= 0)
    if (int err = bpf_map__reuse_fd(skel_->maps.lt_op_stacks, op_stacks_fd))
      throw bpf_error("share op stacks with memprobe", -err);
  if (int err = lt_memprobe__load(skel_.get())) throw bpf_error("load memprobe", -err);
}

MemProbeSource::~MemProbeSource() = default;

std::size_t MemProbeSource::attach(const std::string& path, pid_t pid, const std::vector<Site>& sites) {
  std::size_t n = 0;
  for (const auto& s : sites) {
    LIBBPF_OPTS(bpf_uprobe_opts, o);
    o.bpf_cookie = s.kind;
    LinkPtr l(bpf_program__attach_uprobe_opts(skel_->progs.lt_mem_hook, pid, path.c_str(),
                                              static_cast<std::size_t>(s.offset), &o));
    if (!l) throw bpf_error("attach memory probe in " + path, errno);
    links_.push_back(std::move(l));
    ++n;
  }
  return n;
}

}  // namespace lt
