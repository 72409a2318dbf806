#include "reports/advanced/advanced_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>
#include <tuple>

#include "user/text/numbers.h"

namespace lt {

std::optional<LineRestriction> parse_line_restriction(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno != 0 || !std::isfinite(v) || v < 0) return std::nullopt;
  LineRestriction r;
  // pstats tells an int from a float by type; on the command line, by the
  // absence of a decimal point or exponent.
  r.is_integer = text.find_first_of(".eE") == std::string::npos;
  r.value = v;
  // Shown as Python's repr would show the value: "0.50" -> "0.5", "20" -> "20".
  char buf[64];
  auto res = r.is_integer ? std::to_chars(buf, buf + sizeof buf, static_cast<long long>(v))
                          : std::to_chars(buf, buf + sizeof buf, v);
  r.text.assign(buf, res.ptr);
  if (!r.is_integer && r.text.find_first_of(".e") == std::string::npos) r.text += ".0";
  return r;
}

std::size_t restricted_rows(std::size_t rows, const LineRestriction& r) {
  if (r.is_integer) return r.value < static_cast<double>(rows) ? static_cast<std::size_t>(r.value) : rows;
  if (r.value < 1.0) return std::min(rows, static_cast<std::size_t>(static_cast<double>(rows) * r.value + 0.5));
  return rows;
}

namespace {

std::string base_name(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

using FunctionKey = std::tuple<std::string, std::string, int, bool>;  // function, file, first line, native

// pstats' strip_dirs merges functions whose base name, line and name agree.
FunctionKey key_of(const StackFrame& f) {
  return {f.function, base_name(f.file), f.native ? 0 : f.first_line, f.native};
}

// pstats' "filename:lineno(function)", with strip_dirs' base names.
// Frames with no file (ours: "[no Python frames]") get pstats' "~" for builtins.
std::string row_label(const StackFrame& f) {
  return (f.file.empty() ? std::string("~") : base_name(f.file)) + ":" + std::to_string(f.native ? 0 : f.first_line) +
         "(" + f.function + ")";
}

std::string table(const StackProfile& p, const LineRestriction& r, bool samples) {
  auto rows = function_rows(p);
  const std::uint64_t total = p.total_weight();
  std::size_t keep = restricted_rows(rows.size(), r);
  std::string out;
  out += samples ? "   Ordered by: cumulative samples\n" : "   Ordered by: cumulative off-CPU time\n";
  if (keep < rows.size())
    out += "   List reduced from " + std::to_string(rows.size()) + " to " + std::to_string(keep) +
           " due to restriction <" + r.text + ">\n";
  out += "\n";
  out += samples ? "   self_n    cum_n    self%     cum%  tottime~  cumtime~ filename:lineno(function)\n"
                 : "  periods    self_s     cum_s    self%     cum% filename:lineno(function)\n";
  const double sec_per_unit = samples ? p.period_ns / 1e9 : 1e-9;
  auto pct = [&](std::uint64_t w) { return total ? 100.0 * static_cast<double>(w) / static_cast<double>(total) : 0.0; };
  for (std::size_t i = 0; i < keep; ++i) {
    const auto& row = rows[i];
    if (samples)
      out += fmt::format("{:9}{:9}{:8.2f}%{:8.2f}%{:10.3f}{:10.3f} ", row.self, row.cumulative, pct(row.self),
                         pct(row.cumulative), row.self * sec_per_unit, row.cumulative * sec_per_unit);
    else
      out += fmt::format("{:9}{:10.3f}{:10.3f}{:8.2f}%{:8.2f}% ", row.count, row.self * sec_per_unit,
                         row.cumulative * sec_per_unit, pct(row.self), pct(row.cumulative));
    out += row_label(row.function) + "\n";
  }
  out += "\n\n";
  return out;
}

}  // namespace

std::vector<FunctionRow> function_rows(const StackProfile& p) {
  std::map<FunctionKey, FunctionRow> rows;
  for (const auto& s : p.stacks) {
    std::set<FunctionKey> seen;  // recursion counts once per stack
    for (std::size_t i = 0; i < s.frames.size(); ++i) {
      if (s.frames[i] >= p.frames.size()) continue;
      const StackFrame& f = p.frames[s.frames[i]];
      auto k = key_of(f);
      auto& row = rows[k];
      if (row.function.function.empty()) {
        row.function = f;
        row.function.line = 0;
      }
      if (seen.insert(k).second) {
        row.cumulative += s.weight;
        row.count += s.count;
      }
      if (i + 1 == s.frames.size()) row.self += s.weight;
    }
  }
  std::vector<FunctionRow> out;
  out.reserve(rows.size());
  for (auto& [k, r] : rows) out.push_back(std::move(r));
  std::stable_sort(out.begin(), out.end(), [](const FunctionRow& a, const FunctionRow& b) {
    if (a.cumulative != b.cumulative) return a.cumulative > b.cumulative;
    if (a.self != b.self) return a.self > b.self;
    return row_label(a.function) < row_label(b.function);
  });
  return out;
}

std::string render_advanced_report(const AdvancedReportInput& in) {
  std::string out = in.stage_title.empty() ? "Profiler Report\n" : in.stage_title + " Profiler Report\n";
  if (!in.stacks) return out;
  const double period_ms = in.period_ns / 1e6;
  for (const auto& p : in.stacks->on_cpu) {
    out += "Profile stats for: " + p.name + in.rank_suffix + "\n";
    const std::uint64_t n = p.total_weight();
    std::uint64_t taken = 0;
    for (const auto& s : p.stacks) taken += s.count;
    // Weighted samples (watch: the cheap tier's each stand for several
    // periods, an escalated target's for one): the periods are the unit.
    std::string head = taken == n ? "         " + std::to_string(n) + " samples = " + fixed(n * in.period_ns / 1e9, 3) +
                                        " s on-CPU (estimated: one sample every " + fixed(period_ms, 3) + " ms of CPU)"
                                  : "         " + std::to_string(taken) + " samples weighing " + std::to_string(n) +
                                        " periods = " + fixed(n * in.period_ns / 1e9, 3) +
                                        " s on-CPU (estimated: a period is " + fixed(period_ms, 3) +
                                        " ms of CPU; stacks were sampled at two rates)";
    if (auto t = in.action_time.find(p.name); t != in.action_time.end())
      head += " while innermost; the action ran " + std::to_string(t->second.calls) + " time(s), " +
              fixed(t->second.seconds, 3) + " s in total";
    out += head + "\n\n" + table(p, in.restriction, true);
  }
  for (const auto& p : in.stacks->off_cpu) {
    out += "Off-CPU stats for: " + p.name + in.rank_suffix + "\n";
    std::uint64_t periods = 0;
    for (auto& s : p.stacks) periods += s.count;
    out += "         " + std::to_string(periods) + " blocking period(s), " + fixed(p.total_weight() / 1e9, 3) +
           " s off-CPU (measured at sched_switch)\n\n" + table(p, in.restriction, false);
  }
  return out;
}

}  // namespace lt
