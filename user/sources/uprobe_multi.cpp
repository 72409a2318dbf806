#include "user/sources/uprobe_multi.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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

UprobeMultiAttr link_attr(int prog_fd, const char* path, const std::uint64_t* offsets, const std::uint64_t* cookies,
                          std::uint32_t cnt, pid_t pid) {
  UprobeMultiAttr a{};
  a.prog_fd = static_cast<std::uint32_t>(prog_fd);
  a.attach_type = kTraceUprobeMulti;
  a.path = reinterpret_cast<std::uintptr_t>(path);
  a.offsets = reinterpret_cast<std::uintptr_t>(offsets);
  a.cookies = reinterpret_cast<std::uintptr_t>(cookies);
  a.cnt = cnt;
  a.pid = pid > 0 ? static_cast<std::uint32_t>(pid) : 0;
  return a;
}

bool probe_uprobe_multi() {
  if (const char* off = std::getenv("LTRACE_NO_UPROBE_MULTI"); off && std::strcmp(off, "1") == 0) return false;
  // The smallest program of the right type: r0 = 0; exit.
  const bpf_insn insns[] = {
      {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .src_reg = 0, .off = 0, .imm = 0},
      {.code = BPF_JMP | BPF_EXIT, .dst_reg = 0, .src_reg = 0, .off = 0, .imm = 0},
  };
  LIBBPF_OPTS(bpf_prog_load_opts, o);
  o.expected_attach_type = static_cast<bpf_attach_type>(kTraceUprobeMulti);
  const int prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "lt_probe_um", "GPL", insns, 2, &o);
  if (prog < 0) return false;  // older kernels refuse the attach type here
  const std::uint64_t offset = 0, cookie = 0;
  UprobeMultiAttr a = link_attr(prog, "/", &offset, &cookie, 1, 0);
  const long fd = syscall(__NR_bpf, kLinkCreate, &a, sizeof a);
  const int err = errno;
  if (fd >= 0) close(static_cast<int>(fd));
  close(prog);
  return fd < 0 && err == EBADF;
}

}  // namespace

bool kernel_has_uprobe_multi() {
  static const bool has = probe_uprobe_multi();
  return has;
}

bool uprobe_multi_scopes_processes() {
  static const bool ok = [] {
    utsname u{};
    int major = 0, minor = 0;
    if (uname(&u) != 0 || std::sscanf(u.release, "%d.%d", &major, &minor) != 2) return false;
    return major > 6 || (major == 6 && minor >= 10);
  }();
  return ok;
}

void expect_uprobe_multi(bpf_program* prog) {
  bpf_program__set_expected_attach_type(prog, static_cast<bpf_attach_type>(kTraceUprobeMulti));
}

OwnedFd attach_uprobe_multi(bpf_program* prog, const std::string& path, const std::vector<std::uint64_t>& offsets,
                            const std::vector<std::uint64_t>& cookies, pid_t pid, const std::string& what) {
  if (offsets.empty()) return OwnedFd{};
  if (cookies.size() != offsets.size())
    throw Error(ExitCode::bpf, "attach " + what + " in " + path + ": one cookie per offset needed");
  UprobeMultiAttr a = link_attr(bpf_program__fd(prog), path.c_str(), offsets.data(), cookies.data(),
                                static_cast<std::uint32_t>(offsets.size()), pid);
  const long fd = syscall(__NR_bpf, kLinkCreate, &a, sizeof a);
  if (fd < 0) {
    const int err = errno;
    throw bpf_error("attach " + std::to_string(offsets.size()) + " " + what + " in " + path +
                        (err == EINVAL && !kernel_has_uprobe_multi() ? " (uprobe_multi needs Linux 6.6+)" : ""),
                    err);
  }
  return OwnedFd(static_cast<int>(fd));
}

void EntryUprobes::prepare(bpf_program* prog) const {
  if (multi_) expect_uprobe_multi(prog);
}

void EntryUprobes::attach(bpf_program* prog, const std::string& path, const std::vector<std::uint64_t>& offsets,
                          const std::vector<std::uint64_t>& cookies, pid_t pid, const std::string& what) {
  if (offsets.empty()) return;
  if (cookies.size() != offsets.size())
    throw Error(ExitCode::bpf, "attach " + what + " in " + path + ": one cookie per offset needed");
  if (multi_) {
    links_.push_back(attach_uprobe_multi(prog, path, offsets, cookies, pid, what));
  } else {
    // Made in full before any is kept: a failure leaves nothing half-attached.
    std::vector<LinkPtr> made;
    for (std::size_t i = 0; i < offsets.size(); ++i) {
      LIBBPF_OPTS(bpf_uprobe_opts, o);
      o.bpf_cookie = cookies[i];
      LinkPtr l(bpf_program__attach_uprobe_opts(prog, pid > 0 ? pid : -1, path.c_str(),
                                                static_cast<std::size_t>(offsets[i]), &o));
      if (!l) throw bpf_error("attach " + what + " in " + path, errno);
      made.push_back(std::move(l));
    }
    for (auto& l : made) perf_.push_back(std::move(l));
  }
  probes_ += offsets.size();
}

EntryUprobes::~EntryUprobes() = default;

}  // namespace lt
