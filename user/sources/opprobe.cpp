#include "user/sources/opprobe.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "opprobe.skel.h"
#include "user/sources/bpf_errors.h"

namespace lt {

namespace {

// The kernel's link type for many uprobes in one file (Linux 6.6+).  libbpf
// 1.1 (Debian 12) predates it and the system UAPI headers lack it, so the
// attach type and the BPF_LINK_CREATE attributes are spelled out here, as in
// the kernel's include/uapi/linux/bpf.h (our vmlinux/vmlinux.h).
constexpr unsigned kTraceUprobeMulti = 48;  // BPF_TRACE_UPROBE_MULTI
constexpr int kLinkCreate = 28;             // BPF_LINK_CREATE

struct UprobeMultiAttr {
  std::uint32_t prog_fd;
  std::uint32_t target_fd;
  std::uint32_t attach_type;
  std::uint32_t flags;
  std::uint64_t path;
  std::uint64_t offsets;
  std::uint64_t ref_ctr_offsets;
  std::uint64_t cookies;
  std::uint32_t cnt;
  std::uint32_t multi_flags;
  std::uint32_t pid;
  std::uint32_t pad;
  std::uint8_t zero_tail[64];  // the rest of union bpf_attr: must be zero
};
static_assert(offsetof(UprobeMultiAttr, path) == 16 && offsetof(UprobeMultiAttr, pid) == 56,
              "layout of bpf_attr.link_create.uprobe_multi");

}  // namespace

void SkeletonDestroy::operator()(lt_opprobe* s) const {
  lt_opprobe__destroy(s);
}

OpProbeSource::OpProbeSource(const ProcTrackSource& shared) : skel_(lt_opprobe__open()) {
  if (!skel_) throw bpf_error("open opprobe", errno);
  if (int err = shared.share_with(skel_->obj)) throw bpf_error("share maps with opprobe", -err);
  // Loaded as a uprobe_multi program: bpf_get_attach_cookie then reads the
  // per-offset cookie of the link.
  bpf_program__set_expected_attach_type(skel_->progs.lt_op_enter, static_cast<bpf_attach_type>(kTraceUprobeMulti));
  if (int err = lt_opprobe__load(skel_.get())) throw bpf_error("load opprobe (uprobe_multi needs Linux 6.6+)", -err);
}

OpProbeSource::~OpProbeSource() = default;

int OpProbeSource::stacks_fd() const {
  return bpf_map__fd(skel_->maps.lt_op_stacks);
}

void OpProbeSource::attach(const std::string& path, const std::vector<std::uint64_t>& offsets,
                           const std::vector<std::uint64_t>& cookies, pid_t pid) {
  if (offsets.empty()) return;
  UprobeMultiAttr a{};
  a.prog_fd = static_cast<std::uint32_t>(bpf_program__fd(skel_->progs.lt_op_enter));
  a.attach_type = kTraceUprobeMulti;
  a.path = reinterpret_cast<std::uintptr_t>(path.c_str());
  a.offsets = reinterpret_cast<std::uintptr_t>(offsets.data());
  a.cookies = reinterpret_cast<std::uintptr_t>(cookies.data());
  a.cnt = static_cast<std::uint32_t>(offsets.size());
  a.pid = pid > 0 ? static_cast<std::uint32_t>(pid) : 0;
  long fd = syscall(__NR_bpf, kLinkCreate, &a, sizeof a);
  if (fd < 0) throw bpf_error("attach " + std::to_string(offsets.size()) + " op probes in " + path, errno);
  link_fds_.emplace_back(static_cast<int>(fd));
  probes_ += offsets.size();
}

}  // namespace lt
