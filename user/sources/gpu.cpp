#include "user/sources/gpu.h"

#include <bpf/libbpf.h>
#include <sys/stat.h>

#include <cerrno>

#include "gpu.skel.h"
#include "user/sources/bpf_errors.h"
#include "user/sources/uprobe_multi.h"

namespace lt {

template <>
void SkeletonDestroy<lt_gpu>::operator()(lt_gpu* s) const {
  lt_gpu__destroy(s);
}

GpuSource::GpuSource(const ProcTrackSource& shared, int op_stacks_fd, std::uint64_t launch_stack_interval_ns)
    : skel_(lt_gpu__open()) {
  if (!skel_) throw bpf_error("open gpu", errno);
  if (int err = shared.share_with(skel_->obj)) throw bpf_error("share maps with gpu", -err);
  // Launches see the same per-thread op stacks as the op probes.
  if (op_stacks_fd >= 0)
    if (int err = bpf_map__reuse_fd(skel_->maps.lt_op_stacks, op_stacks_fd))
      throw bpf_error("share op stacks with gpu", -err);
  skel_->rodata->lt_launch_stack_interval_ns = launch_stack_interval_ns;
  // CUDA API entries: uprobe_multi links (one grace period to detach, not one
  // per site: user/sources/uprobe_multi.h).  The bridge's USDT probes stay
  // libbpf's.
  entries_.prepare(skel_->progs.lt_cuda_entry);
  if (int err = lt_gpu__load(skel_.get())) throw bpf_error("load gpu", -err);
}

GpuSource::~GpuSource() = default;

void GpuSource::attach_bridge(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) throw bpf_error("attach USDT probes in " + path, errno);
  const std::pair<unsigned long, unsigned long> file{st.st_dev, st.st_ino};
  if (bridges_.count(file)) return;
  struct Probe {
    bpf_program* prog;
    const char* name;
  };
  const Probe probes[] = {
      {skel_->progs.lt_gpu_activity, "activity"}, {skel_->progs.lt_gpu_name, "name"},
      {skel_->progs.lt_gpu_launch, "launch"},     {skel_->progs.lt_gpu_nvtx, "nvtx"},
      {skel_->progs.lt_gpu_status, "status"},     {skel_->progs.lt_gpu_clock, "clock"},
  };
  // Data probes first, the session last: a bridge wakes only once every
  // probe that carries its records is in place.
  // What is made here is dropped again if a later probe fails.
  std::vector<LinkPtr> made;
  for (const auto& p : probes) {
    LinkPtr l(bpf_program__attach_usdt(p.prog, -1, path.c_str(), "ltrace", p.name, nullptr));
    if (!l) {
      const int err = errno;
      throw bpf_error(std::string("attach USDT ltrace:") + p.name + " in " + path, err);
    }
    made.push_back(std::move(l));
  }
  LinkPtr session(
      bpf_program__attach_usdt(skel_->progs.lt_gpu_session, -1, path.c_str(), "ltrace", "session", nullptr));
  if (!session) {
    const int err = errno;
    throw bpf_error("attach USDT ltrace:session in " + path, err);
  }
  for (auto& l : made) links_.push_back(std::move(l));
  session_links_.push_back(std::move(session));
  bridges_.insert(file);
}

std::size_t GpuSource::attach_entries(const std::string& path, pid_t pid, const std::vector<Site>& sites) {
  std::vector<std::uint64_t> offsets, cookies;
  for (const auto& s : sites) {
    offsets.push_back(s.offset);
    cookies.push_back(static_cast<std::uint64_t>(s.api & 0xff) | static_cast<std::uint64_t>(s.source & 0xff) << 8 |
                      static_cast<std::uint64_t>(s.index) << 16);
  }
  if (offsets.empty()) return 0;
  try {
    entries_.attach(skel_->progs.lt_cuda_entry, path, offsets, cookies, pid, "CUDA entries");
    return offsets.size();
  } catch (const Error&) {
  }
  // One site the kernel refuses must not cost the others: one link each.
  std::size_t n = 0;
  for (std::size_t i = 0; i < offsets.size(); ++i) {
    try {
      entries_.attach(skel_->progs.lt_cuda_entry, path, {offsets[i]}, {cookies[i]}, pid, "CUDA entry");
      ++n;
    } catch (const Error&) {
    }
  }
  return n;
}

void GpuSource::release_sessions() {
  session_links_.clear();
}

}  // namespace lt
