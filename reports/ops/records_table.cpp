#include "reports/ops/records_table.h"

#include <map>
#include <utility>

namespace lt {

RecordsTable records_table(const std::vector<OpTableData>& tables) {
  RecordsTable out;
  out.table.title = "records";
  std::map<std::pair<std::string, std::string>, std::size_t> index;  // (name, shapes) -> row
  for (const auto& t : tables) {
    // "outside step functions" has no steps; a stepless process's one
    // table, "records", is its attach window (one window).
    if (t.steps == 0) {
      for (const auto& r : t.rows) out.left_out_calls += r.calls;
      continue;
    }
    out.table.steps += t.steps;
    out.table.samples += t.samples;
    out.table.in_probe += t.in_probe;
    out.table.has_cuda |= t.has_cuda;
    for (const auto& r : t.rows) {
      auto [it, fresh] = index.try_emplace({r.name, r.input_shapes}, out.table.rows.size());
      if (fresh) {
        out.table.rows.push_back(r);
        continue;
      }
      OpRowData& sum = out.table.rows[it->second];
      sum.calls += r.calls;
      sum.self_samples += r.self_samples;
      sum.total_samples += r.total_samples;
      sum.self_cuda_ns += r.self_cuda_ns;
      sum.cuda_total_ns += r.cuda_total_ns;
      sum.cpu_exact_ns += r.cpu_exact_ns;
      sum.device_row = sum.device_row || r.device_row;
    }
  }
  return out;
}

}  // namespace lt
