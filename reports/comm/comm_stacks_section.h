// `--report comm --launch-stacks`: the c10d calls of each process by the
// Python stack that issued them (reports/aggregate/comm_stacks.h), most
// calls first, each stack innermost frame first as py-spy dump prints it.
//
//   Collectives by Python stack (--launch-stacks: the calling thread's stack at each call's entry)
//
//   pid 4242 rank 0 (python): 124 calls with a stack
//     all_reduce: 120 calls, 480 bytes
//       all_reduce (/.../torch/distributed/distributed_c10d.py:2501)
//       wrapper (/.../torch/distributed/c10d_logger.py:81)
//       sync_grads (/job/train.py:12)
//       ...
#pragma once
#include <string>

#include "reports/aggregate/comm_stacks.h"
#include "reports/comm/comm_report.h"

namespace lt {

// "" when no process has a stack.
std::string render_comm_stacks(const CommStacksReport& rep, const CommRenderOptions& opt = {});

}  // namespace lt
