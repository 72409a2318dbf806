#include "reports/gpu/gpu_tables.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <tuple>
#include <utility>

#include "user/text/code_points.h"
#include "user/text/numbers.h"

namespace lt {
namespace {

constexpr std::size_t kMaxTextWidth = 100;     // nsys's default limit for auto-width columns
const char* const kEllipsis = "\xE2\x80\xA6";  // U+2026 "…"

std::string limit_text(const std::string& s) {
  return cp_len(s) > kMaxTextWidth ? cp_prefix(s, kMaxTextWidth - 1) + kEllipsis : s;
}

struct Summary {
  std::uint64_t count = 0, total = 0, min = 0, max = 0;
  double mean = 0, median = 0, stddev = 0;
};

Summary summarize(std::vector<std::uint64_t> v) {
  Summary s;
  s.count = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  for (std::uint64_t x : v) s.total += x;
  // SQLite's avg(): the sum over the count, in doubles.
  s.mean = static_cast<double>(s.total) / static_cast<double>(s.count);
  const std::size_t mid = v.size() / 2;
  s.median = v.size() % 2 ? static_cast<double>(v[mid])
                          : static_cast<double>((static_cast<long double>(v[mid - 1]) + v[mid]) / 2);
  if (v.size() > 1) {
    // Two passes in long double: the sample deviation (n - 1).
    const long double mean = static_cast<long double>(s.total) / v.size();
    long double ss = 0;
    for (std::uint64_t x : v) ss += (x - mean) * (x - mean);
    s.stddev = static_cast<double>(std::sqrt(ss / (v.size() - 1)));
  }
  return s;
}

struct Column {
  std::string header;
  bool text = false;  // left-aligned (names), else right-aligned (numbers)
};

std::string render(const std::vector<Column>& cols, const std::vector<std::vector<std::string>>& rows) {
  if (rows.empty()) return "";
  std::vector<std::size_t> w(cols.size());
  for (std::size_t c = 0; c < cols.size(); ++c) {
    w[c] = cp_len(cols[c].header);
    for (const auto& r : rows) w[c] = std::max(w[c], cp_len(r[c]));
  }
  auto line = [&](auto cell) {
    std::string out = " ";
    for (std::size_t c = 0; c < cols.size(); ++c) {
      if (c) out += "  ";
      out += cell(c);
    }
    return out + "\n";
  };
  std::string out = line([&](std::size_t c) {  // "{:^w}": the odd space goes right
    const std::size_t pad = w[c] - cp_len(cols[c].header);
    return std::string(pad / 2, ' ') + cols[c].header + std::string(pad - pad / 2, ' ');
  });
  out += line([&](std::size_t c) { return std::string(w[c], '-'); });
  for (const auto& r : rows) {
    out += line([&](std::size_t c) {
      const std::string pad(w[c] - cp_len(r[c]), ' ');
      return cols[c].text ? r[c] + pad : pad + r[c];
    });
  }
  return out;
}

struct Row {
  std::string name, style;
  Summary s;
};

// Merges entries by (shown name, style), drops the empty ones, summarizes and
// sorts them by total descending (ties: name, then style).
std::vector<Row> collect(std::vector<DurationStat>& in, bool nvtx, bool sizes) {
  std::map<std::pair<std::string, std::string>, std::vector<std::uint64_t>> merged;
  for (DurationStat& d : in) {
    std::vector<std::uint64_t>& src = sizes ? d.bytes : d.durations_ns;
    if (src.empty()) continue;
    std::string name = nvtx && !d.domain.empty() ? d.domain + ":" + d.name : d.name;
    std::vector<std::uint64_t>& dst = merged[{std::move(name), nvtx ? d.style : std::string()}];
    dst.insert(dst.end(), src.begin(), src.end());
  }
  std::vector<Row> rows;
  for (auto& [key, values] : merged) rows.push_back({key.first, key.second, summarize(std::move(values))});
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.s.total > b.s.total; });
  return rows;
}

// The tables with Time (%) and nanosecond columns.
std::string render_time_table(std::vector<DurationStat>& in, const char* count_header, bool nvtx,
                              const char* name_header) {
  const std::vector<Row> rows = collect(in, nvtx, false);
  std::vector<Column> cols = {{"Time (%)"}, {"Total Time (ns)"}, {count_header}, {"Avg (ns)"},
                              {"Med (ns)"}, {"Min (ns)"},        {"Max (ns)"},   {"StdDev (ns)"}};
  if (nvtx) cols.push_back({"Style", true});
  cols.push_back({name_header, true});
  double grand = 0;
  for (const Row& r : rows) grand += static_cast<double>(r.s.total);
  std::vector<std::vector<std::string>> cells;
  for (const Row& r : rows) {
    std::vector<std::string> c = {grouped_fixed(grand > 0 ? 100.0 * static_cast<double>(r.s.total) / grand : 0.0, 1),
                                  grouped(r.s.total),
                                  grouped(r.s.count),
                                  grouped_fixed(r.s.mean, 1),
                                  grouped_fixed(r.s.median, 1),
                                  grouped(r.s.min),
                                  grouped(r.s.max),
                                  grouped_fixed(r.s.stddev, 1)};
    if (nvtx) c.push_back(limit_text(r.style));
    c.push_back(limit_text(r.name));
    cells.push_back(std::move(c));
  }
  return render(cols, cells);
}

}  // namespace

std::string render_gpu_kern_sum(std::vector<DurationStat> kernels) {
  return render_time_table(kernels, "Instances", false, "Name");
}

std::string render_gpu_mem_time_sum(std::vector<DurationStat> operations) {
  return render_time_table(operations, "Count", false, "Operation");
}

std::string render_api_sum(std::vector<DurationStat> calls) {
  return render_time_table(calls, "Num Calls", false, "Name");
}

std::string render_nvtx_sum(std::vector<DurationStat> ranges) {
  return render_time_table(ranges, "Instances", true, "Range");
}

std::string render_gpu_mem_size_sum(std::vector<DurationStat> operations) {
  const std::vector<Row> rows = collect(operations, false, true);
  const std::vector<Column> cols = {{"Total (MB)"}, {"Count"},    {"Avg (MB)"},    {"Med (MB)"},
                                    {"Min (MB)"},   {"Max (MB)"}, {"StdDev (MB)"}, {"Operation", true}};
  constexpr double kMB = 1e6;  // nsys's MB: 10^6 bytes
  std::vector<std::vector<std::string>> cells;
  for (const Row& r : rows) {
    cells.push_back(
        {grouped_fixed(static_cast<double>(r.s.total) / kMB, 3), grouped(r.s.count), grouped_fixed(r.s.mean / kMB, 3),
         grouped_fixed(r.s.median / kMB, 3), grouped_fixed(static_cast<double>(r.s.min) / kMB, 3),
         grouped_fixed(static_cast<double>(r.s.max) / kMB, 3), grouped_fixed(r.s.stddev / kMB, 3), limit_text(r.name)});
  }
  return render(cols, cells);
}

}  // namespace lt
