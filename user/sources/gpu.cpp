#include "user/sources/gpu.h"

#include <bpf/libbpf.h>
#include <sys/stat.h>

#include <cerrno>

#include "gpu.skel.h"
#include "user/sources/bpf_errors.h"

namespace lt {

GpuSource::GpuSource(const ProcTrackSource& shared, int op_stacks_fd, std::uint64_t launch_stack_interval_ns) {
  skel_ = lt_gpu__open();
  if (!skel_) throw bpf_error("open gpu", errno);
  auto fail = [this](const char* what, int err) {
    lt_gpu__destroy(skel_);
    skel_ = nullptr;
    throw bpf_error(what, err);
  };
  if (int err = shared.share_with(skel_->obj)) fail("share maps with gpu", -err);
  // Launches see the same per-thread op stacks as the op probes.
  if (op_stacks_fd >= 0)
    if (int err = bpf_map__reuse_fd(skel_->maps.lt_op_stacks, op_stacks_fd)) fail("share op stacks with gpu", -err);
  skel_->rodata->lt_launch_stack_interval_ns = launch_stack_interval_ns;
  if (int err = lt_gpu__load(skel_)) fail("load gpu", -err);
}

GpuSource::~GpuSource() {
  release_sessions();
  for (auto* l : links_) bpf_link__destroy(l);
  if (skel_) lt_gpu__destroy(skel_);
}

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
  std::vector<bpf_link*> made;
  auto undo = [&made] {
    for (auto* l : made) bpf_link__destroy(l);
  };
  for (const auto& p : probes) {
    bpf_link* l = bpf_program__attach_usdt(p.prog, -1, path.c_str(), "ltrace", p.name, nullptr);
    if (!l) {
      int err = errno;
      undo();
      throw bpf_error(std::string("attach USDT ltrace:") + p.name + " in " + path, err);
    }
    made.push_back(l);
  }
  bpf_link* session =
      bpf_program__attach_usdt(skel_->progs.lt_gpu_session, -1, path.c_str(), "ltrace", "session", nullptr);
  if (!session) {
    int err = errno;
    undo();
    throw bpf_error("attach USDT ltrace:session in " + path, err);
  }
  links_.insert(links_.end(), made.begin(), made.end());
  session_links_.push_back(session);
  bridges_.insert(file);
}

std::size_t GpuSource::attach_entries(const std::string& path, pid_t pid, const std::vector<Site>& sites) {
  std::size_t n = 0;
  for (const auto& s : sites) {
    LIBBPF_OPTS(bpf_uprobe_opts, o);
    o.bpf_cookie = static_cast<std::uint64_t>(s.api & 0xff) | static_cast<std::uint64_t>(s.source & 0xff) << 8 |
                   static_cast<std::uint64_t>(s.index) << 16;
    bpf_link* l = bpf_program__attach_uprobe_opts(skel_->progs.lt_cuda_entry, pid, path.c_str(),
                                                  static_cast<std::size_t>(s.offset), &o);
    if (!l) continue;  // one missing site must not cost the others
    links_.push_back(l);
    ++n;
  }
  return n;
}

void GpuSource::release_sessions() {
  for (auto* l : session_links_) bpf_link__destroy(l);
  session_links_.clear();
}

}  // namespace lt
