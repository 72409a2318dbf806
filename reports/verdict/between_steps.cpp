#include "reports/verdict/between_steps.h"

#include <algorithm>
#include <map>

namespace lt {

bool is_validation_action(const std::string& name) {
  for (const char* s : {"validation", "val_next", "val_dataloader", "sanity_check"})
    if (name.find(s) != std::string::npos) return true;
  return false;
}

namespace {

using Span = std::pair<std::uint64_t, std::uint64_t>;

// Sorted, disjoint spans; the time of [a, b) they cover.
std::uint64_t covered(const std::vector<Span>& spans, std::uint64_t a, std::uint64_t b) {
  if (b <= a) return 0;
  auto it = std::upper_bound(spans.begin(), spans.end(), a, [](std::uint64_t x, const Span& s) { return x < s.first; });
  if (it != spans.begin()) --it;
  std::uint64_t ns = 0;
  for (; it != spans.end() && it->first < b; ++it)
    if (it->second > a) ns += std::min(it->second, b) - std::max(it->first, a);
  return ns;
}

std::vector<Span> merged(std::vector<Span> v) {
  std::sort(v.begin(), v.end());
  std::vector<Span> out;
  for (const auto& x : v)
    if (!out.empty() && x.first <= out.back().second)
      out.back().second = std::max(out.back().second, x.second);
    else
      out.push_back(x);
  return out;
}

}  // namespace

BetweenSteps between_steps(const ProcessActions& p, const std::vector<StepRecord>& t,
                           const std::vector<char>& checkpoint, std::uint32_t tid) {
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
  std::map<std::size_t, Span> val;  // gap -> (first begin, last end) of its validation actions
  for (std::size_t i = 0; i < p.intervals.size(); ++i) {
    const auto& iv = p.intervals[i];
    if (i < checkpoint.size() && checkpoint[i]) ckpt.emplace_back(iv.begin_ns, iv.end_ns);
    if (!on_loop(iv) || !is_validation_action(p.actions[iv.action].name)) continue;
    const std::size_t k = gap_of(iv.begin_ns);
    if (inside_step(k, iv)) continue;
    auto [it, fresh] = val.try_emplace(k, iv.begin_ns, iv.end_ns);
    if (!fresh) it->second = {std::min(it->second.first, iv.begin_ns), std::max(it->second.second, iv.end_ns)};
  }
  ckpt = merged(std::move(ckpt));
  // Each gap's rest after its validation run (gaps 1 .. n-1).
  std::vector<Span> rest(n, Span{0, 0});
  for (std::size_t k = 1; k < n; ++k) rest[k] = {t[k - 1].end_ns, std::max(t[k - 1].end_ns, t[k].begin_ns)};
  for (const auto& [k, span] : val) {
    const std::uint64_t b = k > 0 ? t[k - 1].end_ns : span.first;
    const std::uint64_t e = k < n ? std::min(span.second, t[k].begin_ns) : span.second;
    if (e <= b) continue;
    ++out.validation_runs;
    out.validation_ms += static_cast<double>(e - b - covered(ckpt, b, e)) / 1e6;
    out.validation_begin_ns = std::min(out.validation_begin_ns, b);
    out.validation_end_ns = std::max(out.validation_end_ns, e);
    if (k > 0 && k < n) rest[k].first = e;
  }
  for (std::size_t k = 1; k < n; ++k) {
    const auto [b, e] = rest[k];
    if (e <= b) continue;
    const double ms = static_cast<double>(e - b - covered(ckpt, b, e)) / 1e6;
    out.gaps_ms += ms;
    out.longest_gap_ms = std::max(out.longest_gap_ms, ms);
    out.long_gaps += ms > BetweenSteps::kLongGapMs;
  }
  // What ran in the rests: the loop thread's actions held whole in one.
  std::map<std::string, double> by;
  std::vector<Span> held;
  for (std::size_t i = 0; i < p.intervals.size(); ++i) {
    const auto& iv = p.intervals[i];
    if (!on_loop(iv) || (i < checkpoint.size() && checkpoint[i])) continue;
    const std::size_t k = gap_of(iv.begin_ns);
    if (k == 0 || k >= n || iv.begin_ns < rest[k].first || iv.end_ns > rest[k].second) continue;
    const std::string& name = p.actions[iv.action].name;
    if (is_validation_action(name)) continue;
    by[name] += static_cast<double>(iv.end_ns - iv.begin_ns) / 1e6;
    held.emplace_back(iv.begin_ns, iv.end_ns);
  }
  for (const auto& [b, e] : merged(std::move(held))) out.in_actions_ms += static_cast<double>(e - b) / 1e6;
  out.top_actions.assign(by.begin(), by.end());
  std::sort(out.top_actions.begin(), out.top_actions.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  if (out.top_actions.size() > 3) out.top_actions.resize(3);
  return out;
}

}  // namespace lt
