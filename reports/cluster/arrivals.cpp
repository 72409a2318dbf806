#include "reports/cluster/arrivals.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

namespace lt {

namespace {

std::int64_t median(std::vector<std::int64_t> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

struct Score {
  bool agrees = false;
  std::size_t shared = 0;
  std::int64_t median_dt = 0;
};

// Rank calls (by seq) against the reference's at offset d (ref seq = seq + d).
Score score(const std::vector<ArrivalCall>& calls, const std::map<std::uint64_t, const ArrivalCall*>& ref,
            std::int64_t d) {
  Score s;
  std::vector<std::int64_t> dts;
  // A subsample keeps it linear in the calls for long captures.
  const std::size_t step = std::max<std::size_t>(1, calls.size() / 4096);
  for (std::size_t i = 0; i < calls.size(); i += step) {
    const auto& c = calls[i];
    const std::int64_t k = static_cast<std::int64_t>(c.seq) + d;
    if (k < 0) continue;
    auto it = ref.find(static_cast<std::uint64_t>(k));
    if (it == ref.end()) continue;
    if (it->second->kind != c.kind || it->second->bytes != c.bytes) return s;  // disagrees
    dts.push_back(std::llabs(c.t_ns - it->second->t_ns));
  }
  s.shared = dts.size();
  s.agrees = s.shared >= 3;
  s.median_dt = median(std::move(dts));
  return s;
}

}  // namespace

std::string instance_name(const std::string& kind_name, std::uint64_t number, unsigned group) {
  return kind_name + " #" + std::to_string(number) + " (pg " + std::to_string(group) + ")";
}

std::int64_t ArrivalClocks::margin_ns(std::size_t a, std::size_t b) const {
  if (a >= host.size() || b >= host.size() || host[a] == host[b]) return 0;
  const auto at = [&](std::size_t r) { return r < bound_ns.size() ? std::max<std::int64_t>(0, bound_ns[r]) : 0; };
  return at(a) + at(b);
}

ArrivalClocks arrival_clocks(const MergePlan& plan) {
  ArrivalClocks c;
  for (const auto& rr : plan.ranks) {
    c.host.push_back(rr.host_index);
    c.bound_ns.push_back(rr.host_index < plan.hosts.size() ? plan.hosts[rr.host_index].residual_ns : -1);
  }
  return c;
}

ArrivalInput arrival_input(const MergePlan& plan) {
  ArrivalInput in;
  for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
    const auto& rr = plan.ranks[r];
    if (!rr.comm) continue;
    for (const auto& c : rr.comm->calls_kept) {
      if (c.pg >= in.size()) in.resize(c.pg + 1);
      in[c.pg].resize(plan.ranks.size());
      in[c.pg][r].push_back({rr.common_ns(c.ts_ns), c.seq, c.kind, c.bytes, c.tid, c.ts_ns});
    }
  }
  for (auto& g : in) g.resize(plan.ranks.size());
  return in;
}

ArrivalReport analyze_arrivals(const ArrivalInput& in, std::size_t nranks, const ArrivalClocks& clocks,
                               const KnownOffsets* known) {
  ArrivalReport out;
  out.ranks.resize(nranks);
  std::vector<std::map<std::uint8_t, std::vector<std::int64_t>>> waited_for(nranks);
  std::vector<std::map<std::uint8_t, ArrivalStats>> stats(nranks);

  for (unsigned g = 0; g < in.size(); ++g) {
    GroupAlignment ga;
    ga.group = g;
    ga.present.assign(nranks, false);
    ga.offset.assign(nranks, 0);
    ga.median_dt_ns.assign(nranks, 0);
    std::vector<std::vector<ArrivalCall>> calls(nranks);
    std::size_t ref = nranks;
    for (std::size_t r = 0; r < nranks && r < in[g].size(); ++r) {
      calls[r] = in[g][r];
      std::sort(calls[r].begin(), calls[r].end(), [](auto& a, auto& b) { return a.seq < b.seq; });
      ga.present[r] = !calls[r].empty();
      if (ga.present[r] && (ref == nranks || calls[r].size() > calls[ref].size())) ref = r;
    }
    std::size_t present = 0;
    for (bool p : ga.present) present += p;
    if (present < 2) {
      ga.why_not = "fewer than 2 ranks used it";
      out.groups.push_back(std::move(ga));
      continue;
    }
    std::map<std::uint64_t, const ArrivalCall*> by_seq;
    std::vector<const ArrivalCall*> by_time;
    for (auto& c : calls[ref]) by_seq.emplace(c.seq, &c), by_time.push_back(&c);
    std::sort(by_time.begin(), by_time.end(), [](auto* a, auto* b) { return a->t_ns < b->t_ns; });

    ga.aligned = true;
    const auto known_offset = [&](std::size_t r) -> std::optional<std::int64_t> {
      if (!known || g >= known->size() || r >= (*known)[g].size()) return std::nullopt;
      return (*known)[g][r];
    };
    for (std::size_t r = 0; r < nranks && ga.aligned; ++r) {
      if (!ga.present[r] || r == ref) continue;
      if (const auto kr = known_offset(r), kref = known_offset(ref); kr && kref) {
        const Score s = score(calls[r], by_seq, *kr - *kref);
        if (s.agrees) {
          ga.offset[r] = *kr - *kref;
          ga.median_dt_ns[r] = s.median_dt;
          continue;
        }
      }
      // Candidates: the reference call nearest in time to a sample of this
      // rank's calls, and two neighbours on each side.
      std::set<std::int64_t> cands;
      const std::size_t step = std::max<std::size_t>(1, calls[r].size() / 32);
      for (std::size_t i = 0; i < calls[r].size(); i += step) {
        const auto& c = calls[r][i];
        auto it = std::lower_bound(by_time.begin(), by_time.end(), c.t_ns,
                                   [](const ArrivalCall* a, std::int64_t t) { return a->t_ns < t; });
        for (auto* n : {it == by_time.begin() ? nullptr : *(it - 1), it == by_time.end() ? nullptr : *it})
          if (n)
            for (int k = -2; k <= 2; ++k)
              cands.insert(static_cast<std::int64_t>(n->seq) - static_cast<std::int64_t>(c.seq) + k);
      }
      Score best, second;
      std::int64_t best_d = 0;
      bool have = false, have2 = false;
      for (std::int64_t d : cands) {
        const Score s = score(calls[r], by_seq, d);
        if (!s.agrees) continue;
        if (!have || s.median_dt < best.median_dt) {
          if (have) second = best, have2 = true;
          best = s, best_d = d, have = true;
        } else if (!have2 || s.median_dt < second.median_dt) {
          second = s, have2 = true;
        }
      }
      if (!have) {
        ga.aligned = false;
        ga.why_not = "not aligned: no offset makes rank position " + std::to_string(r) +
                     "'s call kinds and sizes agree with the reference's over 3 or more calls";
      } else if (have2 && second.median_dt * 2 <= best.median_dt * 3) {
        ga.aligned = false;
        ga.why_not = "not aligned: ambiguous for rank position " + std::to_string(r) +
                     " (two offsets agree on kinds and sizes, arrival differences " +
                     std::to_string(best.median_dt / 1000) + " us vs " + std::to_string(second.median_dt / 1000) +
                     " us)";
      } else {
        ga.offset[r] = best_d;
        ga.median_dt_ns[r] = best.median_dt;
      }
    }
    if (!ga.aligned) {
      out.groups.push_back(std::move(ga));
      continue;
    }

    // Instances, numbered from the first any rank recorded.
    std::int64_t lo = INT64_MAX;
    for (std::size_t r = 0; r < nranks; ++r)
      if (ga.present[r]) lo = std::min(lo, static_cast<std::int64_t>(calls[r].front().seq) + ga.offset[r]);
    std::map<std::int64_t, CollectiveInstance> inst;
    for (std::size_t r = 0; r < nranks; ++r)
      for (auto& c : calls[r]) {
        const std::int64_t k = static_cast<std::int64_t>(c.seq) + ga.offset[r] - lo;
        auto [it, fresh] = inst.try_emplace(k);
        auto& x = it->second;
        if (fresh) {
          x.group = g;
          x.number = static_cast<std::uint64_t>(k);
          x.kind = c.kind;
          x.bytes = c.bytes;
          x.arrival_ns.assign(nranks, CollectiveInstance::kMissing);
          x.tid.assign(nranks, 0);
          x.mono_ns.assign(nranks, 0);
        }
        x.arrival_ns[r] = c.t_ns;
        x.tid[r] = c.tid;
        x.mono_ns[r] = c.mono_ns;
      }
    for (auto& [k, x] : inst) {
      ++ga.instances;
      bool complete = true;
      for (std::size_t r = 0; r < nranks; ++r)
        complete = complete && (!ga.present[r] || x.arrival_ns[r] != CollectiveInstance::kMissing);
      if (complete) {
        ++ga.complete;
        // The latest arrival and the runner-up (a tie: the lower position first).
        std::size_t last = nranks, second = nranks;
        for (std::size_t r = 0; r < nranks; ++r) {
          if (!ga.present[r]) continue;
          if (last == nranks || x.arrival_ns[r] > x.arrival_ns[last])
            second = last, last = r;
          else if (second == nranks || x.arrival_ns[r] > x.arrival_ns[second])
            second = r;
        }
        x.last = static_cast<int>(last);
        x.last_decided = second == nranks || x.arrival_ns[last] - x.arrival_ns[second] > clocks.margin_ns(last, second);
        std::int64_t others = 0;
        for (std::size_t r = 0; r < nranks; ++r) {
          if (!ga.present[r]) continue;
          auto& st = stats[r][x.kind];
          st.kind = x.kind;
          ++st.instances;
          const std::int64_t w = x.arrival_ns[last] - x.arrival_ns[r];
          st.own_wait_ns += w;
          others += w;
        }
        if (x.last_decided) {  // undecided: no rank was last
          auto& sl = stats[last][x.kind];
          ++sl.last;
          sl.waited_for_ns += others;
          waited_for[last][x.kind].push_back(others);
        }
      }
      out.instances.push_back(std::move(x));
    }
    out.groups.push_back(std::move(ga));
  }
  for (std::size_t r = 0; r < nranks; ++r)
    for (auto& [k, st] : stats[r]) {
      st.median_waited_for_ns = median(waited_for[r][k]);
      out.ranks[r].push_back(st);
    }
  return out;
}

}  // namespace lt
