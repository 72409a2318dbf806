#include "reports/export/export_range.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>

#include "reports/aggregate/steps.h"

namespace lt {
namespace {

std::optional<std::uint32_t> parse_index(const std::string& s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  for (char c : s)
    if (c < '0' || c > '9') return std::nullopt;
  return static_cast<std::uint32_t>(std::stoul(s));
}

std::optional<double> parse_seconds(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  // At most a year: seconds past that would overflow the nanosecond clock.
  if (*end != '\0' || errno != 0 || !std::isfinite(v) || v < 0 || v > 366.0 * 86400) return std::nullopt;
  return v;
}

}  // namespace

std::optional<ExportRange> parse_step_range(const std::string& s) {
  const auto dash = s.find('-');
  const auto a = parse_index(s.substr(0, dash));
  const auto b = dash == std::string::npos ? a : parse_index(s.substr(dash + 1));
  if (!a || !b || *b < *a) return std::nullopt;
  ExportRange r;
  r.kind = ExportRange::Kind::steps;
  r.first_step = *a;
  r.last_step = *b;
  return r;
}

std::optional<ExportRange> parse_time_window(const std::string& s) {
  const auto comma = s.find(',');
  if (comma == std::string::npos) return std::nullopt;
  const auto a = parse_seconds(s.substr(0, comma));
  const auto b = parse_seconds(s.substr(comma + 1));
  if (!a || !b || *b <= *a) return std::nullopt;
  ExportRange r;
  r.kind = ExportRange::Kind::window;
  r.start_s = *a;
  r.end_s = *b;
  return r;
}

std::string window_arg(std::uint64_t begin_ns, std::uint64_t end_ns, std::uint64_t origin_ns) {
  if (!origin_ns || begin_ns < origin_ns || end_ns < begin_ns) return "";
  const std::uint64_t b_us = (begin_ns - origin_ns) / 1000, e_us = (end_ns - origin_ns + 999) / 1000;
  char w[64];
  std::snprintf(w, sizeof w, "%llu.%06llu,%llu.%06llu", static_cast<unsigned long long>(b_us / 1000000),
                static_cast<unsigned long long>(b_us % 1000000), static_cast<unsigned long long>(e_us / 1000000),
                static_cast<unsigned long long>(e_us % 1000000));
  return w;
}

std::uint64_t attach_begin_ns(const ActionsReport& rep) {
  if (rep.window_begin_ns) return rep.window_begin_ns;
  std::uint64_t begin = 0;
  for (const auto& p : rep.processes)
    if (p.window_begin_ns && (begin == 0 || p.window_begin_ns < begin)) begin = p.window_begin_ns;
  return begin;
}

RangeFilter::RangeFilter(const ExportRange& range, const ActionsReport& rep) : all_(range.all()) {
  if (all_) return;
  if (range.kind == ExportRange::Kind::window) {
    const std::uint64_t t0 = attach_begin_ns(rep);
    window_ = Span{t0 + static_cast<std::uint64_t>(std::llround(range.start_s * 1e9)),
                   t0 + static_cast<std::uint64_t>(std::llround(range.end_s * 1e9))};
    summary_ = "window " + std::to_string(range.start_s) + " s to " + std::to_string(range.end_s) + " s after attach";
    return;
  }
  // As the job numbers its steps (a watch capture's from its STEP_BASE).
  std::size_t most = 0, procs = 0;
  std::string held;      // what the trace has: "training steps 40-71 of pid 7, ..."
  bool clipped = false;  // a process holds only part of the range asked
  for (const auto& p : rep.processes) {
    if (p.intervals.empty()) continue;
    const ProcessSteps steps = numbered_as_the_job(step_records(p));
    if (steps.train.empty()) continue;
    most = std::max(most, steps.train.size());
    held += std::string(held.empty() ? "" : ", ") + std::to_string(steps.train.front().index) + "-" +
            std::to_string(steps.train.back().index) + " of pid " + std::to_string(p.meta.pid);
    const auto first = std::find_if(steps.train.begin(), steps.train.end(),
                                    [&](const StepRecord& r) { return r.index >= range.first_step; });
    if (first == steps.train.end() || first->index > range.last_step) continue;
    auto last = first;
    while (std::next(last) != steps.train.end() && std::next(last)->index <= range.last_step) ++last;
    spans_.emplace(p.meta.pid, Span{first->begin_ns, last->end_ns});
    ++procs;
    clipped = clipped || range.first_step < steps.train.front().index || range.last_step > steps.train.back().index;
  }
  const std::string asked =
      "training steps " + std::to_string(range.first_step) + "-" + std::to_string(range.last_step);
  // Part of the range outside the recording is said (an audit: --steps
  // 150-250 of a 200-step trace read as 101 steps compared).
  summary_ = procs ? asked + " of " + std::to_string(procs) + " process(es)" +
                         (clipped ? " (the trace holds only steps " + held + ")" : "")
                   : "no " + asked + ": the trace has " + std::to_string(most) +
                         " training step(s) per process at most" + (held.empty() ? "" : " (steps " + held + ")");
}

bool RangeFilter::keeps(std::uint32_t pid, std::uint64_t begin_ns, std::uint64_t end_ns) const {
  if (all_) return true;
  Span s;
  if (window_) {
    s = *window_;
  } else {
    const auto it = spans_.find(pid);
    if (it == spans_.end()) return false;
    s = it->second;
  }
  if (end_ns <= begin_ns) return begin_ns >= s.begin_ns && begin_ns <= s.end_ns;
  return begin_ns < s.end_ns && end_ns > s.begin_ns;
}

}  // namespace lt
