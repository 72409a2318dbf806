#include "user/sources/uprobe_multi.h"

#include <bpf/libbpf.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

#include "user/sources/bpf_errors.h"

namespace lt {

namespace {

// libbpf 1.1 (Debian 12) predates BPF_TRACE_UPROBE_MULTI and the system UAPI
// headers lack it, so the attach type and the BPF_LINK_CREATE attributes are
// spelled out here, as in the kernel's include/uapi/linux/bpf.h (our
// vmlinux/vmlinux.h).
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

void expect_uprobe_multi(bpf_program* prog) {
  bpf_program__set_expected_attach_type(prog, static_cast<bpf_attach_type>(kTraceUprobeMulti));
}

OwnedFd attach_uprobe_multi(bpf_program* prog, const std::string& path, const std::vector<std::uint64_t>& offsets,
                            const std::vector<std::uint64_t>& cookies, pid_t pid, const std::string& what) {
  if (offsets.empty()) return OwnedFd{};
  if (cookies.size() != offsets.size())
    throw Error(ExitCode::bpf, "attach " + what + " in " + path + ": one cookie per offset needed");
  UprobeMultiAttr a{};
  a.prog_fd = static_cast<std::uint32_t>(bpf_program__fd(prog));
  a.attach_type = kTraceUprobeMulti;
  a.path = reinterpret_cast<std::uintptr_t>(path.c_str());
  a.offsets = reinterpret_cast<std::uintptr_t>(offsets.data());
  a.cookies = reinterpret_cast<std::uintptr_t>(cookies.data());
  a.cnt = static_cast<std::uint32_t>(offsets.size());
  a.pid = pid > 0 ? static_cast<std::uint32_t>(pid) : 0;
  const long fd = syscall(__NR_bpf, kLinkCreate, &a, sizeof a);
  if (fd < 0) throw bpf_error("attach " + std::to_string(offsets.size()) + " " + what + " in " + path, errno);
  return OwnedFd(static_cast<int>(fd));
}

}  // namespace lt
