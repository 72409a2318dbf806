// `--report comm`, NCCL part: per process (rank) the NCCL API calls by
// function and message size in nccl-tests' column order (size, count, type,
// redop; then calls), with the GPU time of their NCCL kernels from CUPTI
// (joined by correlation id through the launch on the calling thread) and
// nccl-tests' algbw / busbw; the calls per Lightning action; grouped calls
// (ncclGroupStart ... ncclGroupEnd) by the shape of their group; the
// communicators with their size and rank where their creation was seen.
//
//   NCCL calls (libnccl API entries while attached; GPU times from CUPTI)
//
//   pid 4242 rank 0 (python): 120 calls, 491520 bytes
//     function       size (B)  count  type     calls  grouped  timed  GPU (ms)  avg (us)  algbw (GB/s)  busbw (GB/s)
//     ncclAllReduce  4096      1024   float32  120    0        120    ...
#pragma once
#include <string>

#include "reports/aggregate/nccl.h"
#include "reports/comm/comm_report.h"

namespace lt {

// "" when no process made an NCCL call.
std::string render_nccl_section(const NcclReport& rep, const CommRenderOptions& opt = {});

}  // namespace lt
