#include "reports/verdict/step_cause.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <vector>

#include "reports/aggregate/run_queue.h"
#include "reports/aggregate/steps.h"
#include "reports/verdict/findings.h"
#include "user/text/utf8_text.h"

namespace lt {

namespace {

// How far over the median, in robust sigmas (1.4826 MAD of the steps), a
// step must be for a part of it to be blamed.
constexpr double kWhyStepSigmas = 3;

// The lower median: a duration some step took (as the findings say it).
double lower_median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

// The loop thread's run-queue wait between the last sample at or before
// the step and the first at or after it, when those lie within a second
// of it (the cheap tier samples every 500 ms): "" otherwise.
std::string cpu_wait_around(const ProcessActions& p, const ProcessSteps& s, const StepRecord& st,
                            const DeviceStatsReport* stats, double over_ms) {
  if (!stats || s.tid != p.meta.pid) return "";
  for (const auto& d : stats->processes) {
    if (d.pid != p.meta.pid) continue;
    const RunQueue rq = run_queue_around(d, st.begin_ns, st.end_ns, 1'000'000'000);
    if (!rq) return "";
    std::string out = "; its thread waited for a CPU " + finding_ms(rq.wait / 1e6) + " of the " +
                      finding_ms(rq.wall / 1e6) + " around it (/proc schedstat samples)";
    if (over_ms > 0 && rq.wait / 1e6 >= 0.5 * over_ms) out += ": much of its excess may be other processes on its CPUs";
    return out;
  }
  return "";
}

std::string one_process(const ProcessActions& p, const ProcessSteps& s, std::size_t at,
                        const DeviceStatsReport* stats) {
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
  // A step within the run's own spread of the median is not slow: no part
  // to blame (a step 0.02 ms over it had one blamed).
  if (t.size() >= 2) {
    std::vector<double> dev;
    for (double d : durations) dev.push_back(std::fabs(d - med));
    const double spread = kWhyStepSigmas * 1.4826 * lower_median(dev);
    if (ms <= med) return out + "; not over the median: no part stands out";
    if (ms - med <= spread)
      return out + "; within the run's own spread (" + finding_ms(ms - med) + " over the median, " +
             std::to_string(static_cast<int>(kWhyStepSigmas)) + " robust sigmas are " + finding_ms(spread) +
             "): no part stands out";
  }
  if (worst == kStepParts) return out + cpu_wait_around(p, s, st, stats, 0);
  const auto part = static_cast<StepPart>(worst);
  out += "; mostly its " + std::string(step_part_name(part)) + " part (" + finding_ms(over) +
         (t.size() >= 2 ? " over that part's median)" : ")");
  // The action of that part inside the step, on the loop thread, with the
  // most time of its own (without the actions inside it: a manual
  // optimizer_step holds its closure's training_step and backward). "other"
  // is the step's own time between its actions: none to name.
  if (part == StepPart::other) return out + cpu_wait_around(p, s, st, stats, t.size() >= 2 ? ms - med : 0);
  std::vector<const ActionInterval*> in_step;
  for (const auto& iv : p.intervals)
    if (iv.tid == s.tid && iv.begin_ns >= st.begin_ns && iv.end_ns <= st.end_ns) in_step.push_back(&iv);
  const ActionInterval* longest = nullptr;
  std::uint64_t longest_own = 0;
  for (const ActionInterval* iv : in_step) {
    if (step_part_of(p.actions[iv->action].name) != part) continue;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> inside;
    for (const ActionInterval* o : in_step)
      if (o != iv && o->begin_ns >= iv->begin_ns && o->end_ns <= iv->end_ns &&
          (o->begin_ns != iv->begin_ns || o->end_ns != iv->end_ns))
        inside.emplace_back(o->begin_ns, o->end_ns);
    std::sort(inside.begin(), inside.end());
    std::uint64_t covered = 0, reach = iv->begin_ns;
    for (const auto& [b, e] : inside) {
      if (e <= reach) continue;
      covered += e - std::max(b, reach);
      reach = e;
    }
    const std::uint64_t own = iv->end_ns - iv->begin_ns - std::min(covered, iv->end_ns - iv->begin_ns);
    if (!longest || own > longest_own) longest = iv, longest_own = own;
  }
  if (longest)
    out += "; its longest action there: " + utf8_text(p.actions[longest->action].name) + " " +
           finding_ms(longest_own / 1e6) + " of its own time";
  return out + cpu_wait_around(p, s, st, stats, t.size() >= 2 ? ms - med : 0);
}

}  // namespace

std::string explain_step(const ActionsReport& rep, std::int64_t step, const DeviceStatsReport* stats) {
  std::string out;
  for (const auto& p : rep.processes) {
    const ProcessSteps s = step_records(p);
    for (std::size_t i = 0; i < s.train.size(); ++i)
      if (static_cast<std::int64_t>(s.train[i].index) + s.train_offset == step) {
        out += "  " + one_process(p, s, i, stats) + "\n";
        break;
      }
  }
  return out;
}

std::string render_step_causes(const ActionsReport& rep, std::int64_t step, const DeviceStatsReport* stats) {
  std::string lines = explain_step(rep, step, stats);
  if (lines.empty()) {
    // Which steps it has, so that the next ask is one of them.
    std::string have;
    for (const auto& p : rep.processes) {
      const ProcessSteps s = step_records(p);
      if (s.train.empty()) continue;
      have += std::string(have.empty() ? "" : ", ") + "pid " + std::to_string(p.meta.pid) + ": " +
              std::to_string(s.train.front().index + s.train_offset) + "-" +
              std::to_string(s.train.back().index + s.train_offset);
    }
    lines =
        "  no process recorded it whole (" + (have.empty() ? "no train step recorded" : "train steps " + have) + ")\n";
  }
  return "Train step " + std::to_string(step) + " (--why-step)\n" + lines;
}

}  // namespace lt
