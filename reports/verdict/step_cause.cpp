#include "reports/verdict/step_cause.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <vector>

#include "reports/aggregate/steps.h"
#include "reports/verdict/findings.h"
#include "user/text/utf8_text.h"

namespace lt {

namespace {

// The lower median: a duration some step took (as the findings say it).
double lower_median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

std::string one_process(const ProcessActions& p, const ProcessSteps& s, std::size_t at) {
  const auto& t = s.train;
  const StepRecord& st = t[at];
  std::vector<double> durations;
  for (const auto& x : t) durations.push_back(x.duration_ns() / 1e6);
  const double ms = st.duration_ns() / 1e6, med = lower_median(durations);
  std::string out = "pid " + std::to_string(p.meta.pid) + ": " + finding_ms(ms);
  if (t.size() >= 2 && med > 0) {
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.1fx", ms / med);
    out += ", " + std::string(ratio) + " the median " + finding_ms(med) + " of the " + std::to_string(t.size()) +
           " train steps recorded";
  }
  // The part furthest over its median (with one step, its largest part).
  std::size_t worst = kStepParts;
  double over = 0;
  for (std::size_t k = 0; k < kStepParts; ++k) {
    std::vector<double> v;
    for (const auto& x : t) v.push_back(x.part_ns[k] / 1e6);
    const double x = st.part_ns[k] / 1e6 - (t.size() >= 2 ? lower_median(v) : 0.0);
    if (x > over) over = x, worst = k;
  }
  if (worst == kStepParts) return out;
  const auto part = static_cast<StepPart>(worst);
  out += "; mostly its " + std::string(step_part_name(part)) + " part (" + finding_ms(over) +
         (t.size() >= 2 ? " over that part's median)" : ")");
  // The longest action of that part inside the step, on the loop thread
  // ("other" is the step's own time between its actions: none to name).
  if (part == StepPart::other) return out;
  const ActionInterval* longest = nullptr;
  for (const auto& iv : p.intervals) {
    if (iv.tid != s.tid || iv.begin_ns < st.begin_ns || iv.end_ns > st.end_ns) continue;
    if (step_part_of(p.actions[iv.action].name) != part) continue;
    if (!longest || iv.end_ns - iv.begin_ns > longest->end_ns - longest->begin_ns) longest = &iv;
  }
  if (longest)
    out += "; its longest action there: " + utf8_text(p.actions[longest->action].name) + " " +
           finding_ms((longest->end_ns - longest->begin_ns) / 1e6);
  return out;
}

}  // namespace

std::string explain_step(const ActionsReport& rep, std::int64_t step) {
  std::string out;
  for (const auto& p : rep.processes) {
    const ProcessSteps s = step_records(p);
    for (std::size_t i = 0; i < s.train.size(); ++i)
      if (static_cast<std::int64_t>(s.train[i].index) + s.train_offset == step) {
        out += "  " + one_process(p, s, i) + "\n";
        break;
      }
  }
  return out;
}

std::string render_step_causes(const ActionsReport& rep, std::int64_t step) {
  const std::string lines = explain_step(rep, step);
  return "Train step " + std::to_string(step) + " (--why-step)\n" +
         (lines.empty() ? "  no process recorded it whole\n" : lines);
}

}  // namespace lt
