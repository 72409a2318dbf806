#include "user/watch/straggler.h"

#include <algorithm>
#include <cmath>

#include "reports/aggregate/comm.h"
#include "reports/cluster/arrivals.h"

namespace lt {

void StragglerWatch::add(std::uint32_t pid, std::uint64_t pg, std::uint64_t seq, std::uint8_t kind,
                         std::int64_t ts_ns) {
  Proc& p = procs_[pid];
  auto [it, fresh] = p.group_of.try_emplace(pg, p.groups.size());
  if (fresh) {
    if (p.groups.size() >= 64) {  // a job has a few groups; a flood of objects is no job's
      p.group_of.erase(it);
      return;
    }
    p.groups.emplace_back();
  }
  auto& calls = p.groups[it->second];
  calls.push_back({ts_ns, seq, kind});
  while (calls.size() > o_.keep) calls.pop_front();
}

void StragglerWatch::forget(std::uint32_t pid) {
  procs_.erase(pid);
}

std::optional<StragglerVerdict> StragglerWatch::check(std::int64_t gap_ns) {
  if (procs_.size() < 2 || o_.window == 0) return std::nullopt;
  gap_ns = std::max(gap_ns, o_.min_gap_ns);
  std::vector<std::uint32_t> pids;
  std::size_t ngroups = 0;
  for (const auto& [pid, p] : procs_) {
    pids.push_back(pid);
    ngroups = std::max(ngroups, p.groups.size());
  }
  ArrivalInput in(ngroups, std::vector<std::vector<ArrivalCall>>(pids.size()));
  KnownOffsets known(ngroups, std::vector<std::optional<std::int64_t>>(pids.size()));
  for (std::size_t r = 0; r < pids.size(); ++r) {
    Proc& p = procs_.at(pids[r]);
    p.offset.resize(p.groups.size());
    for (std::size_t g = 0; g < p.groups.size(); ++g) {
      for (const Call& c : p.groups[g]) in[g][r].push_back({c.t_ns, c.seq, c.kind, 0, 0, 0});
      known[g][r] = p.offset[g];
    }
  }
  const ArrivalReport rep = analyze_arrivals(in, pids.size(), {}, &known);
  // Keep each aligned group's offsets, on the scale of those kept before.
  for (const auto& ga : rep.groups) {
    if (!ga.aligned) continue;
    std::int64_t shift = 0;
    for (std::size_t r = 0; r < pids.size(); ++r)
      if (ga.present[r] && known[ga.group][r]) {
        shift = *known[ga.group][r] - ga.offset[r];
        break;
      }
    for (std::size_t r = 0; r < pids.size(); ++r) {
      auto& kept = procs_.at(pids[r]).offset;
      if (ga.present[r] && ga.group < kept.size() && !kept[ga.group]) kept[ga.group] = ga.offset[r] + shift;
    }
  }
  // The collectives every rank made and someone waited for: the last
  // arrival `gap` or more after the runner-up.
  struct Waited {
    const CollectiveInstance* ci;
    std::int64_t last_ns;
  };
  std::vector<Waited> waited;
  for (const auto& ci : rep.instances) {
    if (ci.last < 0 || !ci.last_decided) continue;
    std::vector<std::int64_t> t = ci.arrival_ns;
    if (std::any_of(t.begin(), t.end(), [](std::int64_t x) { return x == CollectiveInstance::kMissing; })) continue;
    std::sort(t.begin(), t.end());
    if (t[t.size() - 1] - t[t.size() - 2] < gap_ns) continue;
    waited.push_back({&ci, t.back()});
  }
  if (waited.size() < o_.window) return std::nullopt;
  std::sort(waited.begin(), waited.end(), [](const Waited& a, const Waited& b) { return a.last_ns < b.last_ns; });
  waited.erase(waited.begin(), waited.end() - static_cast<std::ptrdiff_t>(o_.window));
  std::vector<std::size_t> lasts(pids.size(), 0);
  for (const auto& w : waited) ++lasts[static_cast<std::size_t>(w.ci->last)];
  const auto top = static_cast<std::size_t>(std::max_element(lasts.begin(), lasts.end()) - lasts.begin());
  if (o_.min_last ? lasts[top] < o_.min_last
                  : static_cast<double>(lasts[top]) < o_.share * static_cast<double>(o_.window))
    return std::nullopt;
  std::vector<std::int64_t> waits;
  std::map<std::uint8_t, std::size_t> kinds;
  for (const auto& w : waited) {
    if (static_cast<std::size_t>(w.ci->last) != top) continue;
    std::int64_t sum = 0;
    for (std::size_t r = 0; r < pids.size(); ++r)
      if (r != top) sum += w.last_ns - w.ci->arrival_ns[r];
    waits.push_back(sum / static_cast<std::int64_t>(pids.size() - 1));
    ++kinds[w.ci->kind];
  }
  std::nth_element(waits.begin(), waits.begin() + static_cast<std::ptrdiff_t>(waits.size() / 2), waits.end());
  const auto kind = std::max_element(kinds.begin(), kinds.end(), [](const auto& a, const auto& b) {
                      return a.second < b.second;
                    })->first;
  return StragglerVerdict{pids[top], lasts[top], o_.window, waits[waits.size() / 2], comm_kind_name(kind), pids.size()};
}

}  // namespace lt
