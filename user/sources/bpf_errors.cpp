#include "user/sources/bpf_errors.h"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

namespace lt {

namespace {
bool has_cap(int cap) {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  return (data[cap / 32].effective >> (cap % 32)) & 1u;
}
}  // namespace

Error bpf_error(const std::string& what, int err) {
  if (err == EPERM || err == EACCES)
    return Error(ExitCode::permission,
                 "cannot " + what + ": permission denied (need CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE, or root)");
  return Error(ExitCode::bpf, "cannot " + what + ": " + std::strerror(err));
}

void check_bpf_privileges() {
  if (geteuid() == 0 && has_cap(CAP_SYS_ADMIN)) return;
  std::string missing;
  if (!has_cap(CAP_BPF) && !has_cap(CAP_SYS_ADMIN)) missing += " CAP_BPF";
  if (!has_cap(CAP_PERFMON) && !has_cap(CAP_SYS_ADMIN)) missing += " CAP_PERFMON";
  if (!has_cap(CAP_SYS_PTRACE)) missing += " CAP_SYS_PTRACE";
  if (!missing.empty()) throw Error(ExitCode::permission, "missing capabilities:" + missing + " (run with sudo)");
}

}  // namespace lt
