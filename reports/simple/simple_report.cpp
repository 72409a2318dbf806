#include "reports/simple/simple_report.h"

#include <algorithm>
#include <numeric>

#include "reports/simple/number_format.h"
#include "user/text/code_points.h"

namespace lt {

std::vector<SimpleRow> simple_rows(const SimpleReportInput& in) {
  struct Stat {
    const ActionSeries* a;
    double sum, mean, pct;
  };
  std::vector<Stat> stats;
  std::size_t total_calls = 0;
  for (auto& a : in.actions) {
    double sum = a.total_s.value();
    double mean = a.calls == 0 ? 0.0 : sum / static_cast<double>(a.calls);
    double pct = in.total_seconds > 0 ? 100.0 * sum / in.total_seconds : 0.0;
    stats.push_back({&a, sum, mean, pct});
    total_calls += a.calls;
  }
  // Python's sorted(..., reverse=True) is stable: ties keep insertion order.
  std::stable_sort(stats.begin(), stats.end(),
                   [&](const Stat& x, const Stat& y) { return in.extended ? x.pct > y.pct : x.mean > y.mean; });
  std::vector<SimpleRow> rows;
  if (in.extended)
    rows.push_back({"Total", "-", std::to_string(total_calls), python_format_5(in.total_seconds), "100 %"});
  for (auto& s : stats)
    rows.push_back({s.a->name, python_format_5(s.mean), std::to_string(s.a->calls), python_format_5(s.sum),
                    python_format_5(s.pct)});
  return rows;
}

std::string render_simple_report(const SimpleReportInput& in) {
  const std::string NL = "\n";
  std::string out = in.stage_title.empty() ? "Profiler Report" : in.stage_title + " Profiler Report";
  out += NL;
  if (in.actions.empty()) return out + NL;

  std::size_t K = 0;
  for (auto& a : in.actions) K = std::max(K, cp_len(a.name));
  auto row = [&](const std::vector<std::string>& cells) {
    std::string r = NL + "|  " + pad_right(cells[0], K) + "\t|";
    for (std::size_t i = 1; i < cells.size(); ++i) r += "  " + pad_right(cells[i], 15) + "\t|";
    return r;
  };
  std::string header = in.extended ? row({"Action", "Mean duration (s)", "Num calls", "Total time (s)", "Percentage %"})
                                   : row({"Action", "Mean duration (s)", "Total time (s)"});
  std::string sep = NL + std::string(expand_tabs(header).size(), '-');

  out += sep + header + sep;
  auto rows = simple_rows(in);
  std::size_t i = 0;
  if (in.extended) {
    auto& t = rows[i++];
    out += row({t.name, t.mean, t.calls, t.total, t.pct}) + sep;
  }
  for (; i < rows.size(); ++i) {
    auto& r = rows[i];
    out += in.extended ? row({r.name, r.mean, r.calls, r.total, r.pct}) : row({r.name, r.mean, r.total});
  }
  out += sep + NL;
  return out;
}

int lightning_local_rank(int world_size, int local_rank) {
  return world_size > 1 ? std::max(local_rank, 0) : -1;
}

std::string lightning_rank_suffix(int world_size, int local_rank) {
  const int r = lightning_local_rank(world_size, local_rank);
  return r >= 0 ? " rank: " + std::to_string(r) : "";
}

std::string lightning_report_filename(const std::string& stage, const std::string& filename, int local_rank,
                                      const std::string& extension, const std::string& action) {
  std::vector<std::string> parts;
  if (!stage.empty()) parts.push_back(stage);
  if (!filename.empty()) parts.push_back(filename);
  if (local_rank >= 0) parts.push_back(std::to_string(local_rank));
  if (!action.empty()) parts.push_back(action);
  std::string joined;
  for (std::size_t i = 0; i < parts.size(); ++i) joined += (i ? "-" : "") + parts[i];
  // 2.6.1+: unsafe characters -> '_', then collapse runs of '_', then strip.
  std::string clean;
  for (char c : joined) {
    bool unsafe = std::string("\\/:*?\"<>|\n\r\t").find(c) != std::string::npos;
    char d = unsafe ? '_' : c;
    if (d == '_' && !clean.empty() && clean.back() == '_') continue;
    clean.push_back(d);
  }
  auto b = clean.find_first_not_of(" \f\v");
  auto e = clean.find_last_not_of(" \f\v");
  clean = b == std::string::npos ? "" : clean.substr(b, e - b + 1);
  if (clean.empty()) clean = "profile";
  return clean + extension;
}

}  // namespace lt
