#include "reports/verdict/findings.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>

#include "reports/aggregate/step_batches.h"
#include "reports/aggregate/steps.h"
#include "reports/format/utf8_text.h"

namespace lt {

namespace {

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}
std::string pct(double share) {
  return fmt("%.1f%%", 100 * share);
}
std::string msf(double ms) {
  return fmt("%.2f ms", ms);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Hook and callback actions' time inside train steps, by name (exclusive
// of nothing: a hook rarely holds another).
std::vector<std::pair<std::string, double>> top_hooks(const ProcessActions& p, const std::vector<StepRecord>& t) {
  std::map<std::string, double> by;
  for (const auto& iv : p.intervals) {
    const std::string& name = p.actions[iv.action].name;
    if (step_part_of(name) != StepPart::hooks) continue;
    // Inside some train step (binary search on begin).
    auto it = std::upper_bound(t.begin(), t.end(), iv.begin_ns,
                               [](std::uint64_t x, const StepRecord& s) { return x < s.begin_ns; });
    if (it == t.begin()) continue;
    --it;
    if (iv.end_ns <= it->end_ns) by[name] += (iv.end_ns - iv.begin_ns) / 1e6;
  }
  std::vector<std::pair<std::string, double>> out(by.begin(), by.end());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (out.size() > 3) out.resize(3);
  return out;
}

void process_findings(const ProcessActions& p, std::vector<Finding>& out) {
  const ProcessSteps s = step_records(p);
  const auto& t = s.train;
  if (t.size() < 5) return;  // too few steps to say anything
  double total = 0;
  std::array<double, kStepParts> part{};
  std::vector<double> durations;
  for (const auto& st : t) {
    total += st.duration_ns() / 1e6;
    durations.push_back(st.duration_ns() / 1e6);
    for (std::size_t i = 0; i < kStepParts; ++i) part[i] += st.part_ns[i] / 1e6;
  }
  const double n = static_cast<double>(t.size());
  auto share = [&](StepPart x) { return part[static_cast<std::size_t>(x)] / total; };
  auto per_step = [&](StepPart x) { return part[static_cast<std::size_t>(x)] / n; };
  const std::string steps = std::to_string(t.size()) + " train steps, median " + msf(median(durations));
  if (share(StepPart::dataloader) >= kInputBound)
    out.push_back({"input-bound", p.meta.pid, per_step(StepPart::dataloader), share(StepPart::dataloader),
                   "the dataloader (fetch + batch transfer) takes " + msf(per_step(StepPart::dataloader)) +
                       " per step, " + pct(share(StepPart::dataloader)) + " of it (" + steps + ")",
                   "more DataLoader workers (num_workers), persistent_workers=True, pin_memory=True, a larger "
                   "prefetch_factor; or make __getitem__ cheaper"});
  if (share(StepPart::hooks) >= kHooks) {
    std::string top;
    for (const auto& [name, ms] : top_hooks(p, t))
      top += (top.empty() ? "" : ", ") + utf8_text(name) + " " + msf(ms / n) + "/step";
    out.push_back({"hooks", p.meta.pid, per_step(StepPart::hooks), share(StepPart::hooks),
                   "callbacks and hooks take " + msf(per_step(StepPart::hooks)) + " per step, " +
                       pct(share(StepPart::hooks)) + " of it" + (top.empty() ? "" : ": " + top) + " (" + steps + ")",
                   "log less often (log_every_n_steps, self.log(..., on_step=False)), avoid .item()/.cpu() in "
                   "hooks, move heavy callbacks to epoch ends"});
  }
  if (share(StepPart::optimizer) >= kOptimizer)
    out.push_back({"optimizer", p.meta.pid, per_step(StepPart::optimizer), share(StepPart::optimizer),
                   "the optimizer step and zero_grad take " + msf(per_step(StepPart::optimizer)) + " per step, " +
                       pct(share(StepPart::optimizer)) + " of it (" + steps + ")",
                   "a fused or foreach optimizer (torch.optim.AdamW(fused=True) / foreach=True), "
                   "zero_grad(set_to_none=True), fewer parameter groups"});
  // Outliers: past the run's own spread, robustly (MAD), and past 1.5x.
  const double med = median(durations);
  std::vector<double> dev;
  for (double d : durations) dev.push_back(std::fabs(d - med));
  const double sigma = 1.4826 * median(dev);
  const double bound = std::max(med + kOutlierSigmas * sigma, kOutlierFactor * med);
  double excess = 0;
  std::size_t count = 0, worst = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (durations[i] > bound) excess += durations[i] - med, ++count;
    if (durations[i] > durations[worst]) worst = i;
  }
  if (count)
    out.push_back({"outliers", p.meta.pid, excess / n, excess / total,
                   std::to_string(count) + " of " + std::to_string(t.size()) + " train steps took over " + msf(bound) +
                       " (median " + msf(med) + " + 6 robust sigmas of this run, and >= 1.5x); the longest, step " +
                       std::to_string(t[worst].index) + ", " + msf(durations[worst]) + "; together " + msf(excess) +
                       " over the median",
                   "look at those steps (ltrace-bpf report FILE --steps A-B --html, or watch's slow-step captures): "
                   "garbage collection, checkpointing, a recompile, another process on the CPU"});
  // Validation: of the fit's span, converted to time per train step.
  if (!s.validation.empty()) {
    const std::uint64_t b = std::min(t.front().begin_ns, s.validation.front().begin_ns);
    const std::uint64_t e = std::max(t.back().end_ns, s.validation.back().end_ns);
    double val = 0;
    for (const auto& v : s.validation) val += v.duration_ns() / 1e6;
    const double span = (e - b) / 1e6;
    if (span > 0 && val / span >= kValidation)
      out.push_back({"validation", p.meta.pid, val / n, val / span,
                     std::to_string(s.validation.size()) + " validation steps take " + msf(val) + ", " +
                         pct(val / span) + " of the fit from its first step to its last",
                     "validate less often (val_check_interval, check_val_every_n_epoch) or on fewer batches "
                     "(limit_val_batches)"});
  }
}

}  // namespace

std::vector<Finding> find_issues(const ActionsReport& rep) {
  std::vector<Finding> out;
  for (const auto& p : rep.processes) process_findings(p, out);
  std::stable_sort(out.begin(), out.end(),
                   [](const Finding& a, const Finding& b) { return a.ms_per_step > b.ms_per_step; });
  return out;
}

std::string render_findings(const ActionsReport& rep, const std::vector<Finding>& f) {
  std::string out = "Findings (ranked by train step time at stake; shown past each one's threshold)\n";
  if (f.empty()) {
    std::size_t procs = 0;
    for (const auto& p : rep.processes) procs += step_records(p).train.size() >= 5;
    out += procs ? "  none: no finding past its threshold\n" : "  none: fewer than 5 train steps recorded\n";
    return out;
  }
  int i = 1;
  for (const auto& x : f) {
    out += "  " + std::to_string(i++) + ". " + x.kind + " (pid " + std::to_string(x.pid) + "): " + msf(x.ms_per_step) +
           " per train step at stake\n";
    out += "     " + x.evidence + "\n";
    out += "     try: " + x.try_this + "\n";
  }
  return out;
}

}  // namespace lt
