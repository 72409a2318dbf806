// `--report comm` as text, from a CommReport (reports/aggregate/comm.h):
// per process (rank) the c10d calls by kind and message size in
// nccl-tests' column order (size, count, type; then calls and bytes), the
// calls per Lightning action, and the process groups with the sequence
// numbers seen.  Exact counts; where the trace has COMM_MARK records, the
// joined times (in flight, blocked, enqueue) and nccl-tests' algbw / busbw.
//
//   Collectives (c10d backend calls while attached: ...)
//
//   pid 4242 rank 0 (python)
//     collective  size (B)  count  type  calls  bytes
//     ...
//     per Lightning action (innermost action open on the calling thread)
//     action  collective  calls  bytes
//     ...
//     process groups: pg 0: 42 calls, seq 1-42 (ours, since the attach)
#pragma once
#include <string>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/comm.h"

namespace lt {

struct CommRenderOptions {
  const ActionsReport* actions = nullptr;  // process labels (rank, comm)
};

std::string render_comm_report(const CommReport& rep, const CommRenderOptions& opt = {});

}  // namespace lt
