// The NCCL API functions of a libnccl.so that the comm probes attach to
// (bpf/commprobe.bpf.c, lt_nccl_enter): collectives, point-to-point,
// group start / end and communicator creation, found by their exported
// names (NCCL's API has been C and stable since 2.x), with the file offset
// a uprobe takes and the enum lt_nccl_fn as cookie (docs/design-comm.md).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "user/torch/comm_sites.h"

namespace lt {

// The enum lt_nccl_fn of an exported name, or 0.
std::uint32_t nccl_site_fn(std::string_view name);

// Throws lt::Error(io) if the file cannot be read.  A file without
// ncclAllReduce gives an empty list.  Sites have mark = false, cookie = fn.
std::vector<CommSite> find_nccl_sites(const std::string& libnccl_path);

}  // namespace lt
