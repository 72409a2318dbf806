#include "user/sources/memprobe.h"

#include <bpf/libbpf.h>

#include <cerrno>

#include "memprobe.skel.h"
#include "user/sources/bpf_errors.h"
#include "user/sources/uprobe_multi.h"

namespace lt {

template <>
void SkeletonDestroy<lt_memprobe>::operator()(lt_memprobe* s) const {
  lt_memprobe__destroy(s);
}

MemProbeSource::MemProbeSource(const ProcTrackSource& shared, int op_stacks_fd) : skel_(lt_memprobe__open()) {
  if (!skel_) throw bpf_error("open memprobe", errno);
  if (int err = shared.share_with(skel_->obj)) throw bpf_error("share maps with memprobe", -err);
  // Allocations see the same per-thread op stacks as the op probes.
  if (op_stacks_fd >= 0)
    if (int err = bpf_map__reuse_fd(skel_->maps.lt_op_stacks, op_stacks_fd))
      throw bpf_error("share op stacks with memprobe", -err);
  uprobes_.prepare(skel_->progs.lt_mem_hook);
  if (int err = lt_memprobe__load(skel_.get())) throw bpf_error("load memprobe", -err);
}

MemProbeSource::~MemProbeSource() = default;

std::size_t MemProbeSource::attach(const std::string& path, pid_t pid, const std::vector<Site>& sites) {
  std::vector<std::uint64_t> offsets, cookies;
  for (const auto& s : sites) {
    offsets.push_back(s.offset);
    cookies.push_back(s.kind);
  }
  if (offsets.empty()) return 0;
  uprobes_.attach(skel_->progs.lt_mem_hook, path, offsets, cookies, pid, "memory probes");
  return offsets.size();
}

std::size_t MemProbeSource::attach_for(pid_t pid, const std::string& path, const std::vector<Site>& sites) {
  std::vector<std::uint64_t> offsets, cookies;
  for (const auto& s : sites) {
    offsets.push_back(s.offset);
    cookies.push_back(s.kind);
  }
  if (offsets.empty()) return 0;
  auto group = std::make_unique<EntryUprobes>();
  group->attach(skel_->progs.lt_mem_hook, path, offsets, cookies, pid, "memory probes");
  for_pid_[pid] = std::move(group);
  return offsets.size();
}

}  // namespace lt
