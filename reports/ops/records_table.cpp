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
    out.table.probe_calls += t.probe_calls;
    out.table.has_cuda |= t.has_cuda;
    out.table.has_memory |= t.has_memory;
    out.table.has_cuda_memory |= t.has_cuda_memory;
    for (const auto& r : t.rows) {
      auto [it, fresh] = index.try_emplace({r.name, r.input_shapes}, out.table.rows.size());
      if (fresh) {
        out.table.rows.push_back(r);
        continue;
      }
      out.table.rows[it->second] += r;
    }
  }
  return out;
}

}  // namespace lt
