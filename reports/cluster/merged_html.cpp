#include "reports/cluster/merged_html.h"

#include <algorithm>
#include <cstdio>

#include "reports/aggregate/comm.h"
#include "reports/aggregate/step_slices.h"
#include "reports/cluster/arrivals.h"
#include "reports/cluster/step_align.h"
#include "reports/cluster/step_waits.h"
#include "reports/export/dashboard.h"
#include "reports/export/export_range.h"
#include "reports/export/html_report.h"
#include "reports/export/step_timeline.h"
#include "user/text/json_escape.h"

namespace lt {

// The page's script and style: reports/cluster/js/merged.js and
// reports/cluster/css/merged.css, embedded at build time (tests/tools/embed_asset.py).
constexpr std::string_view kMergedJs =
#include "reports/cluster/js/merged.js.inc"
    ;
constexpr std::string_view kMergedCss =
#include "reports/cluster/css/merged.css.inc"
    ;

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
// The straggler's row (most often last to arrive): outlined, its label says so.
void straggler_row(std::size_t r, int row_h, int label_w, std::size_t cols, double cw, std::ostream& out) {
  out << "<rect class=\"straggler\" x=\"" << label_w - 2 << "\" y=\"" << r * row_h + 1 << "\" width=\""
      << f(cols * cw + 3, "%.2f") << "\" height=\"" << row_h << "\" fill=\"none\" stroke=\"#06c\" "
      << "stroke-width=\"2\"/>\n";
}

std::string row_label(const RankRun& rr, bool slow, bool straggler) {
  std::string s = html_escape(rr.label);
  if (slow) s += " (slowest)";
  if (straggler) s += " (last to arrive)";
  return s;
}

// The ranks' rows of both heat maps: all up to kMaxHeatRows ranks; past
// that the drawn ranks (`keep`) and then the ranks with the longest median
// step, up to kMaxHeatRows, in rank order.
std::vector<std::size_t> heat_rows(const std::vector<ProcessSteps>& steps, const std::vector<std::size_t>& keep) {
  std::vector<std::size_t> rows(steps.size());
  for (std::size_t r = 0; r < rows.size(); ++r) rows[r] = r;
  if (rows.size() <= kMaxHeatRows) return rows;
  std::vector<bool> in(steps.size(), false);
  std::vector<std::size_t> out;
  for (std::size_t r : keep)
    if (r < in.size() && !in[r] && out.size() < kMaxHeatRows) in[r] = true, out.push_back(r);
  std::vector<std::uint64_t> med(steps.size());
  for (std::size_t r = 0; r < steps.size(); ++r) med[r] = median_step(steps[r]);
  std::stable_sort(rows.begin(), rows.end(), [&](std::size_t a, std::size_t b) { return med[a] > med[b]; });
  for (std::size_t r : rows)
    if (out.size() < kMaxHeatRows && !in[r]) in[r] = true, out.push_back(r);
  std::sort(out.begin(), out.end());
  return out;
}

std::string rows_note(const std::vector<std::size_t>& rows, std::size_t nranks) {
  if (rows.size() == nranks) return "";
  return " Rows: " + std::to_string(rows.size()) + " of " + std::to_string(nranks) + " ranks (a page past " +
         std::to_string(kMaxHeatRows) +
         " rows grows with the ranks): the ranks drawn below and those with the longest median step; every rank is "
         "in the cluster summary.";
}

// Where the heat maps' rows put their steps: the ranks' common numbering
// (step_align.h) when measured.  A rank with an offset: common step = own
// + shift; a rank without one, while others have one, keeps its own numbering
// (shift 0) and its row is drawn apart, below the aligned rows.  One bucket
// size for every row (the longest row's, at most kMaxHeatColumns columns),
// buckets of the common numbering, so a cell's data-i is the same step on
// every aligned rank and in both maps.
struct HeatLayout {
  std::size_t bucket = 1, cols = 0;
  std::vector<std::int64_t> shift;  // per rank position
  std::vector<bool> apart;          // per rank position
  std::vector<std::size_t> rows;    // drawn rows: the aligned ones, then those apart
  std::size_t aligned_rows = 0;     // rows[0, aligned_rows): aligned
  bool common = false;              // some rank has an offset: data-i is a common step
};

HeatLayout heat_layout(const std::vector<ProcessSteps>& steps, const StepAlignment& a,
                       const std::vector<std::size_t>& rows) {
  HeatLayout l;
  const std::size_t n = steps.size();
  l.shift.assign(n, 0);
  l.apart.assign(n, false);
  for (std::size_t r = 0; r < n && r < a.has_offset.size(); ++r) l.common |= a.has_offset[r];
  std::size_t most = 0;
  for (std::size_t r = 0; r < n; ++r) {
    if (l.common && r < a.has_offset.size() && a.has_offset[r]) l.shift[r] = a.offset[r];
    l.apart[r] = l.common && !steps[r].train.empty() && !(r < a.has_offset.size() && a.has_offset[r]);
    most = std::max(most, steps[r].train.size() + static_cast<std::size_t>(l.shift[r]));
  }
  l.bucket = std::max<std::size_t>(1, (most + kMaxHeatColumns - 1) / kMaxHeatColumns);
  l.cols = (most + l.bucket - 1) / l.bucket;
  for (std::size_t r : rows)
    if (!l.apart[r]) l.rows.push_back(r);
  l.aligned_rows = l.rows.size();
  for (std::size_t r : rows)
    if (l.apart[r]) l.rows.push_back(r);
  return l;
}

// A row's cells: column c holds the rank's own steps [first, last] (those of
// the common steps [c * bucket, (c + 1) * bucket) it has).
struct HeatCell {
  std::size_t col = 0, first = 0, last = 0;
};
std::vector<HeatCell> row_cells(std::size_t nsteps, std::int64_t shift, std::size_t bucket) {
  std::vector<HeatCell> out;
  if (!nsteps) return out;
  const auto s = static_cast<std::size_t>(shift);
  for (std::size_t c = s / bucket; c * bucket < nsteps + s; ++c) {
    const std::size_t lo = std::max(c * bucket, s), hi = std::min((c + 1) * bucket, nsteps + s);
    out.push_back({c, lo - s, hi - s - 1});
  }
  return out;
}

// The row's y (its top): the aligned rows, then, after a line saying why,
// the rows apart.
int row_y(const HeatLayout& l, std::size_t y, int row_h) {
  return static_cast<int>(y + (y >= l.aligned_rows && l.aligned_rows < l.rows.size() ? 1 : 0)) * row_h;
}
int map_height(const HeatLayout& l, int row_h) {
  return row_y(l, l.rows.size(), row_h) + (l.aligned_rows < l.rows.size() ? row_h : 0) + 4;
}
void apart_line(const HeatLayout& l, int row_h, std::ostream& out) {
  if (l.aligned_rows == l.rows.size()) return;
  out << "<text class=\"apart\" x=\"2\" y=\"" << static_cast<int>(l.aligned_rows) * row_h + 13
      << "\" font-style=\"italic\">Below: ranks whose step offset could not be measured, each in its own "
         "numbering (from its first step seen), not lined up with the rows above</text>\n";
}

// A cell's title: its common step(s), and the rank's own when they differ.
std::string cell_steps(const HeatLayout& l, std::size_t r, const HeatCell& c) {
  const auto own = [&] {
    return std::to_string(c.first) + (c.last > c.first ? "-" + std::to_string(c.last) : std::string());
  };
  if (l.apart[r]) return "its own step " + own() + " (not lined up)";
  const std::size_t i = c.col * l.bucket;
  std::string s = "step " + std::to_string(i) + (l.bucket > 1 ? "+" : "");
  if (l.shift[r] != 0) s += " (its own " + own() + ")";
  return s;
}

// The row's data-i of a cell: the common step of its bucket's start (own
// numbering apart).
std::size_t cell_i(const HeatLayout& l, const HeatCell& c) {
  return c.col * l.bucket;
}

// A path as one shell word: as is when plain, else single-quoted.
std::string shell_word(const std::string& path) {
  if (path.empty()) return "TRACE";
  const bool plain = std::all_of(path.begin(), path.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("_./-+@:,=").find(c) != std::string_view::npos;
  });
  if (plain) return path;
  std::string q = "'";
  for (char c : path) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// A step-time cell's steps as a window of the rank's own recording (its own
// steps, whatever the column): writes its data-window (and, for a bucket,
// data-last: its last own step) attribute.  The command is
// written once per page (export_note) and the waiting map's cells look
// their window up here: a command in every cell of two 64 x 300 maps took
// the page past 20 MB.
void cell_window(const std::vector<StepRecord>& v, const HeatCell& c, const ExportHint& hint, std::ostream& out) {
  const std::string w = window_arg(v[c.first].begin_ns, v[c.last].end_ns, hint.origin_ns);
  if (!w.empty()) out << " data-window=\"" << w << "\"";
  if (!w.empty() && c.last != c.first) out << " data-last=\"" << c.last << "\"";  // a bucket: its last own step
}

// How to export a cell's steps: the command with its rank's trace, which
// the script fills in on a click (`#cell-cmd`); the traces by rank index
// (`#rank-traces`, JSON).
void export_note(const MergePlan& plan, const std::vector<ExportHint>& hint, const HeatLayout& l, std::ostream& out) {
  out << "<p class=\"note\" id=\"cell-export\">A cell's steps as a Perfetto/Chrome file: <code>ltrace-bpf report "
         "RANK_TRACE --window S,E --perfetto OUT</code>, S,E its window (its title, <code>data-window</code>: "
         "seconds after that rank's attach). Clicked: <code id=\"cell-cmd\"></code></p>\n"
         "<script type=\"application/json\" id=\"rank-traces\">{";
  for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
    std::string q = json_string(hint[r].trace);
    for (std::size_t at = q.find('<'); at != std::string::npos; at = q.find('<', at)) q.replace(at, 1, "\\u003c");
    out << (r ? "," : "") << "\"" << plan.ranks[r].index << "\":" << q;
  }
  // Each rank's shift into the common numbering (null: drawn apart, its own),
  // so a clicked cell's command names the rank's own steps.
  out << "}</script>\n<script type=\"application/json\" id=\"rank-offsets\">{";
  for (std::size_t r = 0; r < plan.ranks.size(); ++r)
    out << (r ? "," : "") << "\"" << plan.ranks[r].index
        << "\":" << (l.apart[r] ? std::string("null") : std::to_string(l.shift[r]));
  out << "}</script>\n";
}

// The maps' note on what a column is.
std::string numbering_note(const HeatLayout& l) {
  if (!l.common) return "Steps counted from each rank's first step seen (<a href=\"#step-numbering\">not lined up</a>)";
  return std::string(
             "Steps in the ranks' common numbering (<a href=\"#step-numbering\">measured offsets</a>): a "
             "column is the same step on every rank") +
         (l.aligned_rows < l.rows.size() ? ", except the rows drawn apart below (no offset measured: their own numbers)"
                                         : "");
}

void heat_map(const MergePlan& plan, const std::vector<ProcessSteps>& steps, const HeatLayout& l, int slowest,
              int straggler, const std::vector<ExportHint>& hint, std::ostream& out) {
  if (!l.cols) return;
  const std::size_t bucket = l.bucket, cols = l.cols;
  std::vector<std::vector<HeatCell>> at(steps.size());
  std::vector<std::vector<std::uint64_t>> cell(steps.size());
  std::uint64_t lo = UINT64_MAX, hi = 0;
  for (std::size_t r : l.rows) {
    const auto& v = steps[r].train;
    at[r] = row_cells(v.size(), l.shift[r], bucket);
    for (const auto& c : at[r]) {
      std::uint64_t sum = 0;
      for (std::size_t i = c.first; i <= c.last; ++i) sum += v[i].duration_ns();
      cell[r].push_back(sum / (c.last - c.first + 1));
      lo = std::min(lo, cell[r].back());
      hi = std::max(hi, cell[r].back());
    }
  }
  const int label_w = 150, row_h = 16;
  const double cw = 940.0 / static_cast<double>(cols);
  out << "<h3 id=\"heatmap\">Training step time, rank &times; step</h3>\n<p class=\"note\">" << numbering_note(l)
      << "; colour from " << f(lo / 1e6) << " ms (light) to " << f(hi / 1e6) << " ms (dark)"
      << (bucket > 1 ? "; each cell the mean of " + std::to_string(bucket) + " consecutive steps" : std::string())
      << "." << rows_note(l.rows, steps.size()) << "</p>\n<svg class=\"chart heatmap\" data-ranks=\"" << l.rows.size()
      << "\" data-bucket=\"" << bucket << "\" data-straggler=\"" << (straggler >= 0 ? plan.ranks[straggler].index : -1)
      << "\" data-common=\"" << (l.common ? 1 : 0) << "\" data-apart=\"" << l.rows.size() - l.aligned_rows
      << "\" width=\"" << label_w + 950 << "\" height=\"" << map_height(l, row_h) << "\" role=\"img\">\n";
  apart_line(l, row_h, out);
  for (std::size_t y = 0; y < l.rows.size(); ++y) {
    const std::size_t r = l.rows[y];
    const auto& rr = plan.ranks[r];
    const bool slow = static_cast<int>(r) == slowest, strag = static_cast<int>(r) == straggler;
    const int y0 = row_y(l, y, row_h);
    out << "<text x=\"2\" y=\"" << y0 + 13 << "\"" << (slow || strag ? " font-weight=\"bold\"" : "")
        << (slow ? " class=\"slow\"" : "") << ">" << row_label(rr, slow, strag) << (l.apart[r] ? " (own steps)" : "")
        << "</text>\n";
    for (std::size_t k = 0; k < at[r].size(); ++k) {
      const HeatCell& c = at[r][k];
      const double t = hi > lo ? static_cast<double>(cell[r][k] - lo) / static_cast<double>(hi - lo) : 0.0;
      const int light = static_cast<int>(92 - 57 * t);
      out << "<rect class=\"cell\" x=\"" << f(label_w + c.col * cw, "%.2f") << "\" y=\"" << y0 + 2 << "\" width=\""
          << f(std::max(0.5, cw - 0.3), "%.2f") << "\" height=\"" << row_h - 2 << "\" fill=\"hsl(8,75%," << light
          << "%)\" data-rank=\"" << rr.index << "\" data-i=\"" << cell_i(l, c) << "\" data-ns=\"" << cell[r][k] << "\""
          << (l.apart[r] ? " data-apart=\"1\"" : "");
      cell_window(steps[r].train, c, hint[r], out);
      out << "><title>" << html_escape(rr.label) << ", " << cell_steps(l, r, c) << ": " << f(cell[r][k] / 1e6)
          << " ms</title></rect>";
    }
    out << "\n";
    if (strag) straggler_row(y0 / row_h, row_h, label_w, cols, cw, out);  // over the cells
  }
  out << "</svg>\n";
}

// Rank x step: one cell per (rank, bucket of steps), the mean time it
// waited in collectives entered during those steps (measured arrivals).
void wait_map(const MergePlan& plan, const std::vector<ProcessSteps>& steps, const std::vector<RankStepWaits>& waits,
              const HeatLayout& l, int straggler, std::ostream& out) {
  std::size_t instances = 0;
  for (const auto& w : waits) instances += w.instances;
  if (!l.cols || !instances) return;
  const std::size_t bucket = l.bucket, cols = l.cols;
  std::vector<std::vector<HeatCell>> at(steps.size());
  std::vector<std::vector<std::int64_t>> cell(steps.size());
  std::int64_t hi = 0;
  for (std::size_t r : l.rows) {
    const auto& v = waits[r].step_ns;
    at[r] = row_cells(v.size(), l.shift[r], bucket);
    for (const auto& c : at[r]) {
      std::int64_t sum = 0;
      for (std::size_t i = c.first; i <= c.last; ++i) sum += v[i];
      cell[r].push_back(sum / static_cast<std::int64_t>(c.last - c.first + 1));
      hi = std::max(hi, cell[r].back());
    }
  }
  const int label_w = 150, row_h = 16;
  const double cw = 940.0 / static_cast<double>(cols);
  out << "<h3 id=\"waitmap\">Time waiting in collectives, rank &times; step</h3>\n<p class=\"note\">Measured: at "
         "each collective recorded by every rank of its process group, a rank waits from its own arrival (its c10d "
         "call's entry) until the last rank's, on the common clock (<a href=\"#hosts\">clock corrections</a>); the "
         "wait counts in the training step whose span holds the rank's own entry. "
      << numbering_note(l) << "; colour from 0 (light) to " << f(hi / 1e6) << " ms (dark)"
      << (bucket > 1 ? "; each cell the mean of " + std::to_string(bucket) + " consecutive steps" : std::string())
      << ". Waits at collectives entered in no training step (setup, validation, the end) are in each row's "
         "total, not in its cells."
      << rows_note(l.rows, steps.size()) << "</p>\n<svg class=\"chart waitmap\" data-ranks=\"" << l.rows.size()
      << "\" data-bucket=\"" << bucket << "\" data-straggler=\"" << (straggler >= 0 ? plan.ranks[straggler].index : -1)
      << "\" data-common=\"" << (l.common ? 1 : 0) << "\" data-apart=\"" << l.rows.size() - l.aligned_rows
      << "\" width=\"" << label_w + 950 << "\" height=\"" << map_height(l, row_h) << "\" role=\"img\">\n";
  apart_line(l, row_h, out);
  for (std::size_t y = 0; y < l.rows.size(); ++y) {
    const std::size_t r = l.rows[y];
    const auto& rr = plan.ranks[r];
    const auto& w = waits[r];
    const bool strag = static_cast<int>(r) == straggler;
    const int y0 = row_y(l, y, row_h);
    out << "<g class=\"wrow\" data-rank=\"" << rr.index << "\" data-in-steps-ns=\"" << w.in_steps_ns
        << "\" data-outside-ns=\"" << w.outside_ns << "\" data-instances=\"" << w.instances << "\" data-outside=\""
        << w.outside << "\" data-last=\"" << w.last << "\"" << (strag ? " data-straggler=\"1\"" : "") << ">\n";

    out << "<text x=\"2\" y=\"" << y0 + 13 << "\"" << (strag ? " font-weight=\"bold\"" : "") << ">"
        << row_label(rr, false, strag) << (l.apart[r] ? " (own steps)" : "") << "<title>" << html_escape(rr.label)
        << ": waited " << f((w.in_steps_ns + w.outside_ns) / 1e9) << " s at " << w.instances << " collectives ("
        << f(w.outside_ns / 1e9) << " s outside training steps); last to arrive at " << w.last << "</title></text>\n";
    for (std::size_t k = 0; k < at[r].size(); ++k) {
      const HeatCell& c = at[r][k];
      const double t = hi > 0 ? static_cast<double>(cell[r][k]) / static_cast<double>(hi) : 0.0;
      const int light = static_cast<int>(95 - 60 * t);
      out << "<rect class=\"wcell\" x=\"" << f(label_w + c.col * cw, "%.2f") << "\" y=\"" << y0 + 2 << "\" width=\""
          << f(std::max(0.5, cw - 0.3), "%.2f") << "\" height=\"" << row_h - 2 << "\" fill=\"hsl(210,70%," << light
          << "%)\" data-rank=\"" << rr.index << "\" data-i=\"" << cell_i(l, c) << "\" data-ns=\"" << cell[r][k] << "\""
          << (l.apart[r] ? " data-apart=\"1\"" : "");
      out << "><title>" << html_escape(rr.label) << ", " << cell_steps(l, r, c) << ": waited " << f(cell[r][k] / 1e6)
          << " ms</title></rect>";
    }
    out << "\n";
    if (strag) straggler_row(y0 / row_h, row_h, label_w, cols, cw, out);  // over the cells
    out << "</g>\n";
  }
  out << "</svg>\n";
}

// "rank 3 is last to arrive in 97.5% of all_reduces (pg 0)", each linked
// to the waiting heat map.
std::vector<Verdict> last_arrival_verdicts(const MergePlan& plan, const std::vector<LastArrival>& found) {
  std::vector<Verdict> out;
  for (const auto& a : found) {
    if (out.size() == 4) break;  // one per (group, kind); a page needs the worst few
    out.push_back({"last_arrival",
                   plan.ranks[a.rank].label + " is last to arrive in " + f(100 * a.share(), "%.1f") + "% of " +
                       comm_kind_name(a.kind) + "s (pg " + std::to_string(a.group) + "): " + std::to_string(a.last) +
                       " of " + std::to_string(a.instances) +
                       " recorded by every rank, measured from call entries on the common clock (shown when >= " +
                       f(100 * a.threshold(), "%.1f") + "% of at least " + std::to_string(kLastArrivalMinInstances) +
                       ", for " + std::to_string(a.ranks) + " ranks: halfway between chance, 1/" +
                       std::to_string(a.ranks) +
                       ", and always; ties and gaps within the clock bounds count as no rank's)",
                   "#waitmap", a.share()});
  }
  return out;
}

// Each host's correction, next to the arrival findings: they are only as
// good as the common clock.
std::string clock_note(const MergePlan& plan) {
  std::string s = "clock corrections: ";
  for (std::size_t h = 0; h < plan.hosts.size(); ++h) {
    const auto& x = plan.hosts[h];
    s += (h ? "; " : "") + x.host + " " + f(x.clock_offset_ns / 1e6) + " ms (" + clock_source_name(x.source) +
         (x.residual_ns >= 0 ? ", +-" + f(x.residual_ns / 1e3, "%.1f") + " us" : std::string()) + ")";
  }
  return s;
}

// A heat map cell chooses its common step on every aligned rank's timeline
// (own step = common - that rank's data-tl-offset); a cell of a row drawn
// apart, its own step on that rank's only.  #step=N in the address (on load
// and when it changes) chooses common step N (the tests use it).
void write_merged_script(std::ostream& out) {
  out << "<script>" << kMergedJs << "</script>\n";
}

}  // namespace

std::vector<std::size_t> merged_chart_ranks(const std::vector<ProcessSteps>& steps, int slowest, int straggler) {
  std::vector<std::size_t> out;
  if (steps.size() <= kMergedChartRanks) {
    for (std::size_t r = 0; r < steps.size(); ++r) out.push_back(r);
    return out;
  }
  auto add = [&](long r) {
    if (r >= 0 && static_cast<std::size_t>(r) < steps.size() &&
        std::find(out.begin(), out.end(), static_cast<std::size_t>(r)) == out.end())
      out.push_back(static_cast<std::size_t>(r));
  };
  add(straggler);
  add(slowest);
  // Fastest and median by median training step, over the ranks with steps.
  std::vector<std::pair<std::uint64_t, std::size_t>> by;
  for (std::size_t r = 0; r < steps.size(); ++r)
    if (!steps[r].train.empty()) by.push_back({median_step(steps[r]), r});
  std::stable_sort(by.begin(), by.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  if (!by.empty()) {
    add(static_cast<long>(by.back().second));  // the slowest, when no finding named one
    add(static_cast<long>(by.front().second));
    add(static_cast<long>(by[(by.size() - 1) / 2].second));
  }
  add(0);
  std::sort(out.begin(), out.end());
  return out;
}

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

namespace {

// Every rank's verdict findings, ranked together by train step time at
// stake (as --report verdict ranks one process's), each naming its rank
// and linked to its step charts where the page draws them.
std::vector<Verdict> ranked_findings(const MergePlan& plan, const std::vector<std::vector<Finding>>& by_file,
                                     const std::vector<std::size_t>& drawn) {
  std::vector<std::pair<const Finding*, std::size_t>> all;  // (finding, rank position)
  for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
    const auto& rank = plan.ranks[r];
    if (rank.file_index >= by_file.size()) continue;
    for (const Finding& f : by_file[rank.file_index])
      if (f.pid == rank.proc->meta.pid) all.emplace_back(&f, r);
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const auto& a, const auto& b) { return a.first->ms_per_step > b.first->ms_per_step; });
  std::vector<Verdict> out;
  for (const auto& [f, r] : all) {
    const auto& rank = plan.ranks[r];
    std::string kind = f->kind;
    std::replace(kind.begin(), kind.end(), ' ', '-');
    const bool charted = std::find(drawn.begin(), drawn.end(), r) != drawn.end();
    // "rank 3, pid 1234"; a process without a rank is labelled by its pid.
    const std::string who = rank.rank >= 0 ? rank.label + ", pid " + std::to_string(f->pid) : rank.label;
    out.push_back({"ranked-" + kind,
                   "#" + std::to_string(out.size() + 1) + " " + f->kind + " (" + who + "): " + finding_at_stake(*f) +
                       ". " + f->evidence + ". Try: " + f->try_this,
                   charted ? "#r" + std::to_string(rank.index) + "-steps" : "#heatmap", f->share});
  }
  return out;
}

}  // namespace

void write_merged_html(const MergePlan& plan, const std::string& summary_text, std::ostream& out,
                       const std::vector<std::vector<Finding>>* findings) {
  std::vector<ProcessSteps> steps;
  for (const auto& r : plan.ranks) steps.push_back(step_records(*r.proc, r.gpu));
  int slowest = -1;
  std::vector<Verdict> verdicts = slow_rank_verdicts(plan, steps, &slowest);
  // Measured arrivals at collectives (COMM records), when the traces have them.
  const ArrivalInput arrivals_in = arrival_input(plan);
  const ArrivalReport arrivals =
      arrivals_in.empty() ? ArrivalReport{} : analyze_arrivals(arrivals_in, plan.ranks.size(), arrival_clocks(plan));
  const auto waits = waits_per_step(arrivals, steps);
  const auto found = last_arrivals(arrivals, plan.ranks.size());
  const int straggler = arrival_straggler(found, waits);
  for (auto& v : last_arrival_verdicts(plan, found)) verdicts.push_back(std::move(v));
  // The ranks' common step numbering (step_align.h): the maps' columns, the
  // findings' and timelines' step numbers.
  const StepAlignment align = align_steps(arrivals, steps);
  const std::vector<std::size_t> drawn = merged_chart_ranks(steps, slowest, straggler);
  // The ranks' verdict findings head the list; the charts' own follow.
  if (findings) {
    std::vector<Verdict> ranked = ranked_findings(plan, *findings, drawn);
    verdicts.insert(verdicts.begin(), ranked.begin(), ranked.end());
  }
  const HeatLayout layout = heat_layout(steps, align, heat_rows(steps, drawn));
  for (std::size_t r = 0; r < steps.size(); ++r)
    for (auto v : step_verdicts(steps[r], "r" + std::to_string(plan.ranks[r].index), [&](std::uint32_t i) {
           if (layout.apart[r]) return "its own step " + std::to_string(i) + " (offset not measured)";
           if (!layout.common || !layout.shift[r]) return "step " + std::to_string(i);
           return "step " + std::to_string(i + layout.shift[r]) + " (its own " + std::to_string(i) + ")";
         })) {
      v.text = plan.ranks[r].label + ": " + v.text;
      verdicts.push_back(v);
    }
  std::uint64_t lost = 0;
  for (const auto& r : plan.ranks) lost += r.proc->lost_action_records();
  if (lost)
    verdicts.push_back({"lost", std::to_string(lost) + " action records lost: counts and times undercount", "#lost",
                        static_cast<double>(lost)});

  out << "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>ltrace-bpf merged report</title>\n"
      << "<style>" << page_style() << kMergedCss << "</style>\n";
  write_dashboard_head(out);
  write_step_timeline_head(out);
  write_merged_script(out);
  out << "</head><body>\n<h1>ltrace-bpf merged report</h1>\n<section id=\"overview\"><h2>Overview</h2>\n"
         "<table class=\"overview\" id=\"hosts\"><tr><th>Host</th><th>Ranks</th><th>Clock correction</th></tr>\n";
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
        << "\"><a href=\"" << v.href << "\">" << html_escape(v.text) << "</a>"
        << (v.kind == "last_arrival"
                ? " <a class=\"clock-note\" href=\"#hosts\">(" + html_escape(clock_note(plan)) + ")</a>"
                : std::string())
        << "</li>\n";
  out << "</ul></section>\n";
  // Each rank's export commands name its own recording and count from its attach.
  std::vector<ExportHint> hints;
  for (const auto& rr : plan.ranks)
    hints.push_back(
        {shell_word(rr.file), rr.report ? attach_begin_ns(*rr.report) : 0, "rank" + std::to_string(rr.index) + "-"});
  heat_map(plan, steps, layout, slowest, straggler, hints, out);
  if (!steps.empty()) export_note(plan, hints, layout, out);
  // What the step numbers mean across ranks: per rank since its attach,
  // and the offsets the collectives measure between them (step_align.h).
  if (!steps.empty()) {
    std::vector<std::string> labels;
    std::string offsets;
    for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
      labels.push_back(plan.ranks[r].label);
      offsets += (r ? "," : "") + (align.has_offset[r] ? std::to_string(align.offset[r]) : std::string("-"));
    }
    out << "<p class=\"note\" id=\"step-numbering\" data-measured=\"" << (align.measured ? 1 : 0)
        << "\" data-offsets=\"" << offsets << "\">" << html_escape(step_numbering_note(align, arrivals, labels))
        << "</p>\n";
  }
  wait_map(plan, steps, waits, layout, straggler, out);
  // The drawn ranks' step charts and step timelines (all up to
  // kMergedChartRanks ranks; past that a chosen few, so the page does not
  // grow with the job); a step chosen on one rank's timeline is chosen on
  // all, the same common step (data-tl-offset: common = own + offset; a
  // rank drawn apart is not synced).  Each embeds, after its own, the steps
  // the others embed first (their slowest ...), interleaved and translated
  // to its own numbers, while its budget holds: a step chosen for its being
  // slow somewhere then draws on every rank.
  std::vector<std::vector<std::size_t>> own;
  for (std::size_t r : drawn) own.push_back(timeline_priority(steps[r].train, kTimelineSlowest));
  const std::size_t budget =
      std::min(kTimelineBudgetBytes, kMergedTimelineBudgetBytes / std::max<std::size_t>(1, drawn.size()));
  out << "<div id=\"timelines\" data-tl-sync=\"1\">\n";
  if (drawn.size() < steps.size()) {
    std::string names, left;
    std::size_t nleft = 0;
    for (std::size_t r = 0, d = 0; r < steps.size(); ++r) {
      if (d < drawn.size() && drawn[d] == r) {
        names += (names.empty() ? "" : ", ") + plan.ranks[r].label;
        ++d;
      } else if (++nleft <= 32) {
        left += (left.empty() ? "" : ", ") + plan.ranks[r].label;
      }
    }
    if (nleft > 32) left += ", ... (" + std::to_string(nleft - 32) + " more)";
    out << "<p class=\"note\" id=\"ranks-left-out\" data-drawn=\"" << drawn.size() << "\" data-left-out=\"" << nleft
        << "\">Step charts and timelines of " << drawn.size() << " of " << steps.size() << " ranks (past "
        << kMergedChartRanks
        << " ranks a page draws the last to arrive, the slowest, the fastest and the median rank by median step, "
           "and the first): "
        << html_escape(names) << ". Left out: " << html_escape(left)
        << ". For one of those, <code>ltrace-bpf report TRACE --html FILE</code> of that rank's trace.</p>\n";
  }
  for (std::size_t d = 0; d < drawn.size(); ++d) {
    const std::size_t r = drawn[d];
    std::vector<std::size_t> also;
    for (std::size_t k = 0, more = 1; more; ++k) {
      more = 0;
      for (std::size_t q = 0; q < own.size(); ++q) {
        if (q == d || k >= own[q].size()) continue;
        more = 1;
        if (layout.apart[r] || layout.apart[drawn[q]]) continue;  // not the same step here
        const std::int64_t i =
            static_cast<std::int64_t>(own[q][k]) + layout.shift[drawn[q]] - layout.shift[r];  // own numbers
        if (i >= 0) also.push_back(static_cast<std::size_t>(i));
      }
    }
    const std::string id = "r" + std::to_string(plan.ranks[r].index);
    out << "<div class=\"rank-steps\" data-rank=\"" << plan.ranks[r].index << "\""
        << (layout.apart[r] ? std::string(" data-tl-apart=\"1\"")
                            : " data-tl-offset=\"" + std::to_string(layout.shift[r]) + "\"")
        << ">\n";
    if (layout.apart[r])
      out << "<p class=\"note tl-numbering\">" << html_escape(plan.ranks[r].label)
          << ": its own step numbers (from its first step seen): its offset to the other ranks could not be "
             "measured, so its timeline is not synced with theirs.</p>\n";
    else if (layout.shift[r])
      out << "<p class=\"note tl-numbering\">" << html_escape(plan.ranks[r].label)
          << ": its own step numbers below; its step k is common step k + " << layout.shift[r]
          << " (the heat maps' and the other ranks' timelines' numbering).</p>\n";
    write_step_charts(steps[r], id, "Steps of " + plan.ranks[r].label, out, hints[r]);
    write_step_timeline(*plan.ranks[r].proc, steps[r], id, out, plan.ranks[r].gpu, nullptr, nullptr, plan.ranks[r].comm,
                        also, budget, hints[r].origin_ns);
    out << "</div>\n";
  }
  out << "</div>\n";
  out << "<h2>Cluster summary</h2>\n<pre>" << html_escape(summary_text) << "</pre>\n</body></html>\n";
}

}  // namespace lt
