#include "reports/cluster/merged_html.h"

#include <algorithm>
#include <cstdio>

#include "reports/format/json_escape.h"

namespace lt {

namespace {

std::string f(double v, const char* fm = "%.3f") {
  char b[64];
  std::snprintf(b, sizeof b, fm, v);
  return b;
}

std::uint64_t median_step(const ProcessSteps& s) {
  std::vector<std::uint64_t> d;
  for (const auto& x : s.train) d.push_back(x.duration_ns());
  return percentile_ns(d, 0.5);
}

// Rank x step: one cell per (rank, bucket of steps), its mean step time.
void heat_map(const MergePlan& plan, const std::vector<ProcessSteps>& steps, int slowest, std::ostream& out) {
  std::size_t most = 0;
  for (const auto& s : steps) most = std::max(most, s.train.size());
  if (!most) return;
  const std::size_t bucket = std::max<std::size_t>(1, (most + kMaxHeatColumns - 1) / kMaxHeatColumns);
  const std::size_t cols = (most + bucket - 1) / bucket;
  std::vector<std::vector<std::uint64_t>> cell(steps.size());
  std::uint64_t lo = UINT64_MAX, hi = 0;
  for (std::size_t r = 0; r < steps.size(); ++r) {
    const auto b = bucket_steps(steps[r].train, kMaxHeatColumns);
    for (const auto& row : b.rows) {
      cell[r].push_back(row.duration_ns());
      lo = std::min(lo, row.duration_ns());
      hi = std::max(hi, row.duration_ns());
    }
  }
  const int label_w = 110, row_h = 16;
  const double cw = 980.0 / static_cast<double>(cols);
  out << "<h3 id=\"heatmap\">Training step time, rank &times; step</h3>\n<p class=\"note\">Steps counted from each "
         "rank's first step seen; colour from "
      << f(lo / 1e6) << " ms (light) to " << f(hi / 1e6) << " ms (dark)"
      << (bucket > 1 ? "; each cell the mean of " + std::to_string(bucket) + " consecutive steps" : std::string())
      << ".</p>\n<svg class=\"chart heatmap\" data-ranks=\"" << steps.size() << "\" data-bucket=\"" << bucket
      << "\" width=\"" << label_w + 990 << "\" height=\"" << steps.size() * row_h + 4 << "\" role=\"img\">\n";
  for (std::size_t r = 0; r < steps.size(); ++r) {
    const auto& rr = plan.ranks[r];
    const bool slow = static_cast<int>(r) == slowest;
    out << "<text x=\"2\" y=\"" << r * row_h + 13 << "\"" << (slow ? " class=\"slow\" font-weight=\"bold\"" : "") << ">"
        << html_escape(rr.label) << (slow ? " (slowest)" : "") << "</text>\n";
    for (std::size_t c = 0; c < cell[r].size(); ++c) {
      const double t = hi > lo ? static_cast<double>(cell[r][c] - lo) / static_cast<double>(hi - lo) : 0.0;
      const int light = static_cast<int>(92 - 57 * t);
      out << "<rect class=\"cell\" x=\"" << f(label_w + c * cw, "%.2f") << "\" y=\"" << r * row_h + 2 << "\" width=\""
          << f(std::max(0.5, cw - 0.3), "%.2f") << "\" height=\"" << row_h - 2 << "\" fill=\"hsl(8,75%," << light
          << "%)\" data-rank=\"" << rr.index << "\" data-i=\"" << c * bucket << "\" data-ns=\"" << cell[r][c]
          << "\"><title>" << html_escape(rr.label) << ", step " << c * bucket << (bucket > 1 ? "+" : "") << ": "
          << f(cell[r][c] / 1e6) << " ms</title></rect>";
    }
    out << "\n";
  }
  out << "</svg>\n";
}

}  // namespace

std::vector<Verdict> slow_rank_verdicts(const MergePlan& plan, const std::vector<ProcessSteps>& steps, int* slowest) {
  if (slowest) *slowest = -1;
  std::vector<std::uint64_t> medians;
  std::size_t worst = 0;
  std::uint64_t worst_ns = 0;
  for (std::size_t r = 0; r < steps.size(); ++r) {
    if (steps[r].train.empty()) continue;
    const std::uint64_t m = median_step(steps[r]);
    medians.push_back(m);
    if (m > worst_ns) worst_ns = m, worst = r;
  }
  if (medians.size() < 2) return {};
  const std::uint64_t mid = percentile_ns(medians, 0.5);
  if (!mid || worst_ns < mid * (1 + kSlowRankVerdict)) return {};
  const double above = static_cast<double>(worst_ns) / static_cast<double>(mid) - 1;
  if (slowest) *slowest = static_cast<int>(worst);
  return {{"slow_rank",
           plan.ranks[worst].label + " is the slowest: median training step " + f(worst_ns / 1e6) + " ms, " +
               f(100 * above, "%.1f") + "% above the ranks' median " + f(mid / 1e6) +
               " ms (shown when >= " + f(100 * kSlowRankVerdict, "%.0f") + "%)",
           "#heatmap", above}};
}

void write_merged_html(const MergePlan& plan, const std::string& summary_text, std::ostream& out) {
  std::vector<ProcessSteps> steps;
  for (const auto& r : plan.ranks) steps.push_back(step_records(*r.proc, r.gpu));
  int slowest = -1;
  std::vector<Verdict> verdicts = slow_rank_verdicts(plan, steps, &slowest);
  for (std::size_t r = 0; r < steps.size(); ++r)
    for (auto v : step_verdicts(steps[r], "r" + std::to_string(plan.ranks[r].index))) {
      v.text = plan.ranks[r].label + ": " + v.text;
      verdicts.push_back(v);
    }
  std::uint64_t lost = 0;
  for (const auto& r : plan.ranks) lost += r.proc->lost_action_records();
  if (lost)
    verdicts.push_back({"lost", std::to_string(lost) + " action records lost: counts and times undercount", "#lost",
                        static_cast<double>(lost)});

  out << "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>ltrace-bpf merged report</title>\n"
         "<style>body{font:14px system-ui,sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin:8px "
         "0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}.note{color:#666}pre{font-size:12px}</style>\n";
  write_dashboard_head(out);
  out << "</head><body>\n<h1>ltrace-bpf merged report</h1>\n<section id=\"overview\"><h2>Overview</h2>\n"
         "<table class=\"overview\"><tr><th>Host</th><th>Ranks</th><th>Clock correction</th></tr>\n";
  for (const auto& h : plan.hosts) {
    std::string ranks;
    for (const auto& r : plan.ranks)
      if (&plan.hosts[r.host_index] == &h) ranks += (ranks.empty() ? "" : ", ") + r.label;
    out << "<tr><td>" << html_escape(h.host) << "</td><td>" << html_escape(ranks) << "</td><td>"
        << f(h.clock_offset_ns / 1e6) << " ms (" << clock_source_name(h.source)
        << (h.residual_ns >= 0 ? ", residual " + f(h.residual_ns / 1e3, "%.1f") + " us" : std::string())
        << ")</td></tr>\n";
  }
  out << "</table>\n<p>" << plan.ranks.size() << " rank(s)"
      << (plan.world_size > 0 ? " of world size " + std::to_string(plan.world_size) : std::string()) << "; window "
      << f((plan.end_ns - plan.begin_ns) / 1e9) << " s; <span id=\"lost\">" << lost
      << " action records lost</span></p>\n<h3>Findings</h3>\n<ul class=\"verdicts\">\n";
  if (verdicts.empty()) out << "<li class=\"none\">No finding passed its threshold.</li>\n";
  for (const auto& v : verdicts)
    out << "<li class=\"verdict\" data-verdict=\"" << v.kind << "\" data-value=\"" << f(v.value, "%.6f")
        << "\"><a href=\"" << v.href << "\">" << html_escape(v.text) << "</a></li>\n";
  out << "</ul></section>\n";
  heat_map(plan, steps, slowest, out);
  for (std::size_t r = 0; r < steps.size(); ++r)
    write_step_charts(steps[r], "r" + std::to_string(plan.ranks[r].index), "Steps of " + plan.ranks[r].label, out);
  out << "<h2>Cluster summary</h2>\n<pre>" << html_escape(summary_text) << "</pre>\n</body></html>\n";
}

}  // namespace lt
