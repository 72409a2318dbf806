#include "reports/gpu/gpu_actions.h"

#include <algorithm>

#include "user/text/code_points.h"
#include "user/text/numbers.h"

namespace lt {

namespace {

std::string seconds(std::uint64_t ns) {
  return ns_as_s(static_cast<double>(ns), 6);
}

std::string megabytes(std::uint64_t bytes) {
  return fixed(static_cast<double>(bytes) / 1e6, 3);
}

}  // namespace

std::string render_gpu_actions(std::vector<GpuActionRow> rows, bool with_times) {
  if (rows.empty()) return "";
  std::stable_sort(rows.begin(), rows.end(), [&](const GpuActionRow& a, const GpuActionRow& b) {
    return with_times ? a.kernel_ns + a.copy_ns > b.kernel_ns + b.copy_ns : a.launches > b.launches;
  });
  std::vector<std::string> head = with_times ? std::vector<std::string>{"Action",   "Kernels",       "Kernel time (s)",
                                                                        "Copies",   "Copy time (s)", "Copied (MB)",
                                                                        "Launches", "Syncs",         "Sync wait (s)"}
                                             : std::vector<std::string>{"Action", "Launches", "Syncs"};
  std::vector<std::vector<std::string>> cells;
  for (const auto& r : rows) {
    const std::string name = r.action.empty() ? "(outside any action)" : r.action;
    if (with_times)
      cells.push_back({name, std::to_string(r.kernels), seconds(r.kernel_ns), std::to_string(r.copies),
                       seconds(r.copy_ns), megabytes(r.copy_bytes), std::to_string(r.launches), std::to_string(r.syncs),
                       seconds(r.sync_ns)});
    else
      cells.push_back({name, std::to_string(r.launches), std::to_string(r.syncs)});
  }
  std::vector<std::size_t> w(head.size());
  // Widths in code points (action names may be any text).
  for (std::size_t i = 0; i < head.size(); ++i) w[i] = cp_len(head[i]);
  for (auto& row : cells)
    for (std::size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], cp_len(row[i]));
  auto line = [&](const std::vector<std::string>& row) {
    std::string out;
    for (std::size_t i = 0; i < row.size(); ++i)
      out += i == 0 ? pad_right(row[i], w[i]) : "  |  " + pad_left(row[i], w[i]);
    return out + "\n";
  };
  std::string out = line(head);
  std::size_t width = cp_len(out) - 1;
  out += std::string(width, '-') + "\n";
  for (auto& row : cells) out += line(row);
  return out;
}

}  // namespace lt
