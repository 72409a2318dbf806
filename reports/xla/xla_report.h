// `--report xla` as text, from an XlaReport (reports/aggregate/xla.h): what
// Lightning's XLAProfiler users ask of torch_xla's metrics report, measured
// from outside, per process and per Lightning action:
//
//   XLA (torch_xla runtime calls while attached, counted at their entry)
//
//   pid 4242 (python): torch_xla 2.9.0, PJRT device CPU
//     action  compiles  compile (ms)  executions  execute (ms)  to device  tensors  to device (ms)  ...
//     ...
//     total   ...
//     compiles: 3 (uncached), 1 recompilation
//       step  at (s)  compile (ms)  action  recompilation
//     torch_xla's timers that ended while attached: CompileTime 3, ExecuteTime 20, ...
#pragma once
#include <string>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/xla.h"

namespace lt {

struct XlaRenderOptions {
  const ActionsReport* actions = nullptr;  // process labels (rank, comm)
};

std::string render_xla_report(const XlaReport& rep, const XlaRenderOptions& opt = {});

}  // namespace lt
