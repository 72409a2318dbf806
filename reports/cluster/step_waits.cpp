#include "reports/cluster/step_waits.h"

#include <algorithm>
#include <map>

namespace lt {

double last_arrival_threshold(std::size_t k) {
  return k ? (static_cast<double>(k) + 1) / (2 * static_cast<double>(k)) : 1.0;
}

std::vector<RankStepWaits> waits_per_step(const ArrivalReport& rep, const std::vector<ProcessSteps>& steps) {
  std::vector<RankStepWaits> out(steps.size());
  for (std::size_t r = 0; r < steps.size(); ++r) out[r].step_ns.assign(steps[r].train.size(), 0);
  for (const auto& x : rep.instances) {
    if (x.last < 0) continue;  // incomplete: its last arrival is unknown
    const std::int64_t last_t = x.arrival_ns[static_cast<std::size_t>(x.last)];
    for (std::size_t r = 0; r < out.size() && r < x.arrival_ns.size(); ++r) {
      if (x.arrival_ns[r] == CollectiveInstance::kMissing) continue;  // not in this group
      auto& w = out[r];
      const std::int64_t wait = last_t - x.arrival_ns[r];
      ++w.instances;
      if (static_cast<int>(r) == x.last && x.last_decided) ++w.last;
      const long s = step_holding(steps[r].train, x.mono_ns[r]);
      if (s < 0) {
        ++w.outside;
        w.outside_ns += wait;
      } else {
        w.step_ns[static_cast<std::size_t>(s)] += wait;
        w.in_steps_ns += wait;
      }
    }
  }
  return out;
}

std::vector<LastArrival> last_arrivals(const ArrivalReport& rep, std::size_t nranks) {
  // (group, kind) -> complete instances, and per rank how often it was last (decided).
  std::map<std::pair<unsigned, std::uint8_t>, std::pair<std::size_t, std::vector<std::size_t>>> by;
  for (const auto& x : rep.instances) {
    if (x.last < 0) continue;
    auto& [n, last] = by[{x.group, x.kind}];
    last.resize(nranks);
    ++n;
    if (x.last_decided && static_cast<std::size_t>(x.last) < nranks) ++last[static_cast<std::size_t>(x.last)];
  }
  std::vector<LastArrival> out;
  for (const auto& [key, v] : by) {
    const auto& [n, last] = v;
    if (n < kLastArrivalMinInstances) continue;
    std::size_t k = 0;  // the group's ranks
    for (const auto& g : rep.groups)
      if (g.group == key.first)
        for (bool p : g.present) k += p;
    if (k < 2) continue;
    for (std::size_t r = 0; r < last.size(); ++r)
      // last / n >= (k + 1) / 2k, in integers.
      if (last[r] * 2 * k >= n * (k + 1)) out.push_back({key.first, key.second, static_cast<int>(r), last[r], n, k});
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.share() > b.share(); });
  return out;
}

int arrival_straggler(const std::vector<LastArrival>& found, const std::vector<RankStepWaits>& waits) {
  int best = -1;
  for (std::size_t r = 0; r < waits.size(); ++r)
    if (waits[r].last && (best < 0 || waits[r].last > waits[static_cast<std::size_t>(best)].last))
      best = static_cast<int>(r);
  for (const auto& f : found)
    if (f.rank == best) return best;
  return -1;
}

}  // namespace lt
