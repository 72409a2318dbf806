#include "reports/diff/step_diff.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>

#include "reports/aggregate/steps.h"
#include "reports/format/code_points.h"
#include "reports/format/utf8_text.h"

namespace lt {

namespace {

struct Side {
  std::vector<double> steps;
  std::array<std::vector<double>, kStepParts> parts;
  std::map<std::string, std::vector<double>> actions;  // per call
};

Side collect(const ActionsReport& r) {
  Side s;
  for (const auto& p : r.processes) {
    const ProcessSteps ps = step_records(p);
    for (const auto& st : ps.train) {
      s.steps.push_back(st.duration_ns() / 1e9);
      for (std::size_t i = 0; i < kStepParts; ++i) s.parts[i].push_back(st.part_ns[i] / 1e9);
    }
    for (const auto& iv : p.intervals) s.actions[p.actions[iv.action].name].push_back((iv.end_ns - iv.begin_ns) / 1e9);
  }
  return s;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double sum(const std::vector<double>& v) {
  double t = 0;
  for (double x : v) t += x;
  return t;
}

DiffRow row(std::string what, DiffRow::Kind kind, const std::vector<double>& a, const std::vector<double>& b,
            std::size_t steps_a, std::size_t steps_b) {
  DiffRow r;
  r.what = std::move(what);
  r.kind = kind;
  r.n_a = a.size();
  r.n_b = b.size();
  r.per_step_a = steps_a ? sum(a) / steps_a : 0;
  r.per_step_b = steps_b ? sum(b) / steps_b : 0;
  r.median_a = median(a);
  r.median_b = median(b);
  r.test = rank_test(a, b);
  return r;
}

std::string ms(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", s * 1e3);
  return b;
}

std::string signed_ms(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%+.3f", s * 1e3);
  return b;
}

}  // namespace

StepDiff diff_steps(const ActionsReport& a, const ActionsReport& b, double alpha, double min_effect) {
  const Side sa = collect(a), sb = collect(b);
  StepDiff d;
  d.alpha = alpha;
  d.min_effect = min_effect;
  d.steps_a = sa.steps.size();
  d.steps_b = sb.steps.size();
  std::vector<DiffRow> rows;
  rows.push_back(row("train step", DiffRow::Kind::step, sa.steps, sb.steps, d.steps_a, d.steps_b));
  for (std::size_t i = 0; i < kStepParts; ++i)
    rows.push_back(row(std::string("part: ") + step_part_name(static_cast<StepPart>(i)), DiffRow::Kind::part,
                       sa.parts[i], sb.parts[i], d.steps_a, d.steps_b));
  std::map<std::string, bool> names;
  for (const auto& [n, v] : sa.actions) names[n] = true;
  for (const auto& [n, v] : sb.actions) names[n] = true;
  static const std::vector<double> none;
  for (const auto& [n, _] : names) {
    auto ia = sa.actions.find(n);
    auto ib = sb.actions.find(n);
    rows.push_back(row(n, DiffRow::Kind::action, ia == sa.actions.end() ? none : ia->second,
                       ib == sb.actions.end() ? none : ib->second, d.steps_a, d.steps_b));
  }
  // Rows with no time on either side say nothing.
  rows.erase(std::remove_if(rows.begin() + 1, rows.end(),
                            [](const DiffRow& r) { return r.per_step_a == 0 && r.per_step_b == 0; }),
             rows.end());
  std::vector<double> p;
  for (const auto& r : rows) p.push_back(r.n_a && r.n_b ? r.test.p : 1.0);
  const auto adj = holm(p);
  // The floor per step, and per sample for each row (an action called k
  // times a step moves the step k times its shift).
  const double floor = min_effect * rows[0].median_a;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    DiffRow& r = rows[i];
    r.p_holm = adj[i];
    if (!r.n_a || !r.n_b || adj[i] >= alpha || !d.steps_a) continue;
    const double per_step = static_cast<double>(r.n_a) / static_cast<double>(d.steps_a);
    if (r.test.lo * per_step >= floor) r.verdict = 1;
    if (r.test.hi * per_step <= -floor) r.verdict = -1;
  }
  std::stable_sort(rows.begin() + 1, rows.end(), [](const DiffRow& x, const DiffRow& y) {
    return std::fabs(x.per_step_b - x.per_step_a) > std::fabs(y.per_step_b - y.per_step_a);
  });
  d.rows = std::move(rows);
  return d;
}

std::string render_step_diff(const StepDiff& d, const std::string& label_a, const std::string& label_b) {
  std::string out = "ltrace-bpf diff: A = " + utf8_text(label_a) + " (" + std::to_string(d.steps_a) +
                    " train steps), B = " + utf8_text(label_b) + " (" + std::to_string(d.steps_b) + " train steps)\n";
  char head[400];
  std::snprintf(head, sizeof head,
                "Mann-Whitney U, two-sided, per step (step, parts) or per call (actions), Holm-corrected over %zu "
                "rows; shift: Hodges-Lehmann median of B - A per sample, 95%% interval; '~': not significant "
                "(p >= %.2f), or the interval reaches within %.1f%% of A's median step of no change. Times in ms.\n\n",
                d.rows.size(), d.alpha, 100 * d.min_effect);
  out += head;
  const double step_a = d.step() ? d.step()->per_step_a : 0;
  std::vector<std::vector<std::string>> table = {{"", "Row", "A per step", "B per step", "change per step",
                                                  "of A's step", "shift per sample (95% CI)", "p (Holm)"}};
  for (const auto& r : d.rows) {
    const double change = r.per_step_b - r.per_step_a;
    char pct[32], pv[32];
    std::snprintf(pct, sizeof pct, "%+.2f%%", step_a > 0 ? 100 * change / step_a : 0.0);
    std::snprintf(pv, sizeof pv, r.p_holm < 0.001 ? "%.1e" : "%.3f", r.p_holm);
    const std::string mark = r.verdict > 0 ? "slower" : r.verdict < 0 ? "faster" : "~";
    const std::string shift =
        !r.n_a || !r.n_b ? (r.n_a ? "gone in B" : "new in B")
                         : signed_ms(r.test.shift) + " (" + signed_ms(r.test.lo) + ", " + signed_ms(r.test.hi) + ")";
    table.push_back({mark, utf8_text(r.what), ms(r.per_step_a), ms(r.per_step_b), signed_ms(change), pct, shift, pv});
  }
  std::vector<std::size_t> width(table[0].size(), 0);
  for (const auto& line : table)
    for (std::size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], cp_len(line[i]));
  for (const auto& line : table) {
    std::string l;
    for (std::size_t i = 0; i < line.size(); ++i) {
      // Text left, numbers right.
      l += i <= 1 ? pad_right(line[i], width[i]) : pad_left(line[i], width[i]);
      l += i + 1 < line.size() ? "  " : "";
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  }
  return out;
}

}  // namespace lt
