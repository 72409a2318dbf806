// The c10d backend methods of a libtorch_cpu.so that the comm probes attach
// to (read with user/proc/elf_image.h): every collective and point-to-point
// method of c10d::ProcessGroupGloo, by its mangled name's prefix (the
// parameter types never change where the tensor argument is), with the file
// offset a uprobe takes and the cookie that tells BPF the call's kind and
// its tensor argument (docs/design-comm.md).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
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

// The cookie of a mangled symbol, or 0 (exposed for unit tests).
std::uint64_t comm_site_cookie(std::string_view mangled);
// The enum lt_comm_mark_what of a mangled symbol, or 0 (exposed for unit tests).
std::uint32_t comm_mark_what(std::string_view mangled);

}  // namespace lt
