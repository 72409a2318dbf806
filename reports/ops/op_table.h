// torch's operator table (prof.key_averages().table(sort_by=..., row_limit=...),
// i.e. _build_table in torch/autograd/profiler_util.py, torch 2.15), byte for
// byte, for the CPU-only case: no device time, no memory columns, no stacks,
// no overload names, no node ids, no FLOPs.  A pure function: no I/O.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lt {

// One aggregated operator, like torch's FunctionEventAvg.
struct OpRow {
  std::string name;          // "aten::add"
  std::string input_shapes;  // torch's str(list), e.g. "[[2, 3], [2, 3], []]"; "" when not grouped by shapes
  double self_cpu_us = 0;    // self CPU time total, microseconds
  double cpu_total_us = 0;   // CPU time total, microseconds
  std::uint64_t calls = 0;
};

struct OpTableOptions {
  // torch's sort_by: cpu_time (the per-call average), cpu_time_total,
  // self_cpu_time_total, count, and the cuda_/xpu_/privateuse1_ time and
  // memory keys (all zero here, so they keep the input order).  "" = no sort.
  // Anything else throws std::invalid_argument (torch raises AttributeError).
  std::string sort_by = "cpu_time_total";
  int row_limit = 20;  // negative = all rows
  // Adds torch's "Input Shapes" column.  As in torch, the column is only shown
  // when at least one row has a non-empty shape list (not "" and not "[]").
  bool with_input_shapes = false;
  // The times are sampled estimates: the five time headers and the footer get
  // a "~" suffix ("Self CPU~", "Self CPU time total~: ...").  A column whose
  // header then outgrows torch's 12 characters ("CPU time avg~") is widened to
  // fit it, so the table stays aligned.
  bool estimated = false;
};

// The table text, ending in "\n" like torch's; "" when there are no rows.
std::string render_op_table(std::vector<OpRow> rows, const OpTableOptions& opt);

}  // namespace lt
