#include "user/torch/nccl_sites.h"

#include <algorithm>

#include "bpf/events.h"

namespace lt {

namespace {

struct Fn {
  std::string_view name;
  std::uint32_t fn;
};

// ncclCommInitRankScalable(out, nranks, rank, nIds, ids, config) has out,
// nranks and rank in the same registers as ncclCommInitRank (torch uses it
// past TORCH_NCCL_RANKS_PER_ROOT ranks).  ncclCommSplit and ncclCommShrink
// also make communicators, but their size is not an argument: their calls
// show nranks unknown.  ncclGroupSimulateEnd closes a group that never
// runs (torch's time estimator); the signal calls launch NCCL work, so they
// bound the launch windows of the calls before them.
constexpr Fn kFns[] = {
    {"ncclAllReduce", LT_NCCL_ALLREDUCE},
    {"ncclBroadcast", LT_NCCL_BROADCAST},
    {"ncclBcast", LT_NCCL_BCAST},
    {"ncclReduce", LT_NCCL_REDUCE},
    {"ncclAllGather", LT_NCCL_ALLGATHER},
    {"ncclReduceScatter", LT_NCCL_REDUCESCATTER},
    {"ncclAlltoAll", LT_NCCL_ALLTOALL},
    {"ncclGather", LT_NCCL_GATHER},
    {"ncclScatter", LT_NCCL_SCATTER},
    {"ncclSend", LT_NCCL_SEND},
    {"ncclRecv", LT_NCCL_RECV},
    {"ncclGroupStart", LT_NCCL_GROUP_START},
    {"ncclGroupEnd", LT_NCCL_GROUP_END},
    {"ncclCommInitRank", LT_NCCL_COMM_INIT},
    {"ncclCommInitRankConfig", LT_NCCL_COMM_INIT},
    {"ncclCommInitRankScalable", LT_NCCL_COMM_INIT},
    {"ncclGroupSimulateEnd", LT_NCCL_GROUP_SIMULATE_END},
    {"ncclPutSignal", LT_NCCL_SIGNAL},
    {"ncclSignal", LT_NCCL_SIGNAL},
    {"ncclWaitSignal", LT_NCCL_SIGNAL},
    {"ncclCommDestroy", LT_NCCL_COMM_DESTROY},
    {"ncclCommAbort", LT_NCCL_COMM_DESTROY},
};

}  // namespace

std::uint32_t nccl_site_fn(std::string_view name) {
  for (const Fn& f : kFns)
    if (f.name == name) return f.fn;
  return 0;
}

std::vector<CommSite> find_nccl_sites(const std::string& path) {
  auto out = find_function_sites(path, [](std::string_view name) {
    return std::pair<std::uint64_t, bool>{nccl_site_fn(name), false};
  });
  if (std::none_of(out.begin(), out.end(), [](const CommSite& s) { return s.cookie == LT_NCCL_ALLREDUCE; }))
    out.clear();
  return out;
}

}  // namespace lt
