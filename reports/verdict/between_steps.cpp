#include "reports/verdict/between_steps.h"

#include <algorithm>
#include <map>
#include <string_view>

namespace lt {

namespace {

// The hook an action names: what follows its last '.' ("[Callback]
// EarlyStopping{'monitor': 'validation_loss'}.on_train_epoch_start" is no
// validation action whatever its settings say), or the whole name.
std::string_view hook_of(std::string_view name) {
  const auto dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

// The hooks that open a validation run (the first of each in Lightning's
// order: the sanity check's, in-fit validation's, validate()'s).
bool opens_a_run(std::string_view hook) {
  return hook == "on_sanity_check_start" || hook == "val_dataloader" || hook == "on_validation_model_zero_grad" ||
         hook == "on_validation_model_eval" || hook == "on_validation_start";
}

}  // namespace

bool is_validation_action(const std::string& name) {
  const std::string_view hook = hook_of(name);
  return hook.rfind("on_validation_", 0) == 0 || hook.rfind("on_sanity_check_", 0) == 0 || hook == "validation_step" ||
         hook == "val_next" || hook == "val_dataloader";
}

BetweenSteps between_steps(const ProcessActions& p, const std::vector<StepRecord>& t,
                           const std::vector<StepRecord>& validation, const std::vector<char>& checkpoint,
                           std::uint32_t tid) {
  BetweenSteps out;
  const std::size_t n = t.size();
  if (!n) return out;
  auto on_loop = [tid](const ActionInterval& iv) { return !tid || !iv.tid || iv.tid == tid; };
  // Gap k lies before train step k (k = n: after the last); a time's gap is
  // the number of steps begun by then.
  auto gap_of = [&](std::uint64_t ts) {
    return static_cast<std::size_t>(
        std::upper_bound(t.begin(), t.end(), ts, [](std::uint64_t x, const StepRecord& s) { return x < s.begin_ns; }) -
        t.begin());
  };
  auto inside_step = [&](std::size_t k, const ActionInterval& iv) { return k > 0 && iv.end_ns <= t[k - 1].end_ns; };
  std::vector<Span> ckpt;
  struct Action {
    std::uint64_t begin_ns, end_ns;
    bool opens, closes;  // a hook that opens a run; on_validation_end
  };
  std::map<std::size_t, std::vector<Action>> val;  // gap -> its validation actions
  for (std::size_t i = 0; i < p.intervals.size(); ++i) {
    const auto& iv = p.intervals[i];
    if (i < checkpoint.size() && checkpoint[i]) ckpt.emplace_back(iv.begin_ns, iv.end_ns);
    const std::string& name = p.actions[iv.action].name;
    if (!on_loop(iv) || !is_validation_action(name)) continue;
    const std::size_t k = gap_of(iv.begin_ns);
    if (inside_step(k, iv)) continue;
    const std::string_view hook = hook_of(name);
    val[k].push_back({iv.begin_ns, iv.end_ns, opens_a_run(hook), hook == "on_validation_end"});
  }
  ckpt = merged_spans(std::move(ckpt));
  // A gap's runs: a hook that opens one after an on_validation_end starts
  // the next (fit's last validation, then validate()'s; validate() before
  // fit, then the sanity check). The gap's first run after a train step
  // begins at that step's end (its DataLoader's start comes before any of
  // its hooks); the others at their first action.
  std::vector<std::pair<std::size_t, Span>> runs;  // (gap, span)
  for (auto& [k, actions] : val) {
    std::sort(actions.begin(), actions.end(), [](const Action& a, const Action& b) { return a.begin_ns < b.begin_ns; });
    bool closed = false;
    for (const Action& a : actions) {
      if (runs.empty() || runs.back().first != k || (closed && a.opens)) {
        const bool first = runs.empty() || runs.back().first != k;
        runs.push_back({k, {first && k > 0 ? t[k - 1].end_ns : a.begin_ns, a.end_ns}});
        closed = false;
      }
      runs.back().second.second = std::max(runs.back().second.second, a.end_ns);
      closed = closed || a.closes;
    }
  }
  // Each gap's rest after its validation runs (gaps 1 .. n-1).
  std::vector<Span> rest(n, Span{0, 0});
  for (std::size_t k = 1; k < n; ++k) rest[k] = {t[k - 1].end_ns, std::max(t[k - 1].end_ns, t[k].begin_ns)};
  for (const auto& [k, span] : runs) {
    const std::uint64_t b = span.first;
    const std::uint64_t e = k < n ? std::min(span.second, t[k].begin_ns) : span.second;
    if (e <= b) continue;
    BetweenSteps::Run run{b, e, static_cast<double>(e - b - covered(ckpt, b, e)) / 1e6, 0};
    for (const auto& v : validation)
      if (v.begin_ns >= b && v.end_ns <= e) run.steps_ms += static_cast<double>(v.duration_ns()) / 1e6;
    out.runs.push_back(run);
    ++out.validation_runs;
    out.validation_ms += run.ms;
    out.validation_begin_ns = std::min(out.validation_begin_ns, b);
    out.validation_end_ns = std::max(out.validation_end_ns, e);
    if (k > 0 && k < n) rest[k].first = std::max(rest[k].first, e);
  }
  for (std::size_t k = 1; k < n; ++k) {
    const auto [b, e] = rest[k];
    if (e <= b) continue;
    const double ms = static_cast<double>(e - b - covered(ckpt, b, e)) / 1e6;
    out.gaps_ms += ms;
    out.longest_gap_ms = std::max(out.longest_gap_ms, ms);
    if (ms > BetweenSteps::kLongGapMs) ++out.long_gaps, out.long_gaps_ms += ms;
  }
  // What ran in the rests: the loop thread's actions held whole in one.
  std::map<std::string, double> by;
  std::vector<Span> held;
  for (std::size_t i = 0; i < p.intervals.size(); ++i) {
    const auto& iv = p.intervals[i];
    if (!on_loop(iv) || covered(ckpt, iv.begin_ns, iv.end_ns)) continue;  // a save inside a checkpoint hook too
    const std::size_t k = gap_of(iv.begin_ns);
    if (k == 0 || k >= n || iv.begin_ns < rest[k].first || iv.end_ns > rest[k].second) continue;
    const std::string& name = p.actions[iv.action].name;
    if (is_validation_action(name)) continue;
    by[name] += static_cast<double>(iv.end_ns - iv.begin_ns) / 1e6;
    held.emplace_back(iv.begin_ns, iv.end_ns);
  }
  for (const auto& [b, e] : merged_spans(std::move(held))) out.in_actions_ms += static_cast<double>(e - b) / 1e6;
  out.top_actions.assign(by.begin(), by.end());
  std::sort(out.top_actions.begin(), out.top_actions.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  if (out.top_actions.size() > 3) out.top_actions.resize(3);
  return out;
}

}  // namespace lt
