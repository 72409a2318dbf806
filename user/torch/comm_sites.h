// The c10d backend methods of a libtorch_cpu.so that the comm probes attach
// to (read with user/proc/elf_image.h): every collective and point-to-point
// method of c10d::ProcessGroupGloo, by its mangled name's prefix (the
// parameter types never change where the tensor argument is), with the file
// offset a uprobe takes and the cookie that tells BPF the call's kind and
// its tensor argument (docs/design-comm.md).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lt {

struct CommSite {
  std::uint64_t file_offset = 0;
  std::uint64_t cookie = 0;  // LT_COMM_COOKIE(kind, backend, register, form) (bpf/events.h), or a mark's what
  std::string symbol;
  bool mark = false;  // a COMM_MARK site (lt_comm_mark): cookie = enum lt_comm_mark_what
};

// Throws lt::Error(io) if the file cannot be read.  A file without
// ProcessGroupGloo gives an empty list.  The list holds the collectives
// (mark false) and, when the file has them, the COMM_MARK sites: enqueue,
// finishWorkGloo(Error), Work::wait and DDP's Reducer points (mark true).
std::vector<CommSite> find_comm_sites(const std::string& libtorch_cpu_path);

// The defined functions of the ELF file at `path` (dynamic symbols) that
// `classify` gives a cookie (0: not a site), one site per address, with
// `mark` from the second member.  Throws lt::Error(io) if the file cannot be
// opened; a file that is not a 64-bit ELF gives an empty list.  Shared by
// the c10d and the NCCL site finders.
using SiteClassifier = std::function<std::pair<std::uint64_t, bool>(std::string_view symbol)>;
std::vector<CommSite> find_function_sites(const std::string& path, const SiteClassifier& classify);

// The cookie of a mangled symbol, or 0 (exposed for unit tests).
std::uint64_t comm_site_cookie(std::string_view mangled);
// The enum lt_comm_mark_what of a mangled symbol, or 0 (exposed for unit tests).
std::uint32_t comm_mark_what(std::string_view mangled);

}  // namespace lt
