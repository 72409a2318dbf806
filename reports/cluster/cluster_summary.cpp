#include "reports/cluster/cluster_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>
#include <map>

#include "reports/aggregate/comm.h"
#include "reports/cluster/arrivals.h"
#include "user/text/code_points.h"
#include "user/text/numbers.h"
#include "user/text/stats.h"

namespace lt {

namespace {

constexpr std::int64_t kNoTol = std::numeric_limits<std::int64_t>::max();

// Index of the element of sorted `v` nearest to t, or -1 when none is
// closer than tol.
long nearest(const std::vector<std::int64_t>& v, std::int64_t t, std::int64_t tol) {
  auto it = std::lower_bound(v.begin(), v.end(), t);
  long best = -1;
  std::int64_t d = tol;
  if (it != v.end() && *it - t < d) {
    best = it - v.begin();
    d = *it - t;
  }
  if (it != v.begin() && t - *(it - 1) < d) best = (it - 1) - v.begin();
  return best;
}

}  // namespace

StepSkew analyze_steps(const MergePlan& plan) {
  StepSkew out;
  out.steps = training_steps(plan);
  const std::size_t n = plan.ranks.size();
  out.ranks.resize(n);
  const auto& per = out.steps.per_rank;
  if (out.steps.step_action.empty() || n == 0) return out;
  const bool sync = !out.steps.sync_action.empty();

  // Match steps across ranks: each rank's steps shift by one constant
  // against the rank with the most steps, the shift most of its steps vote
  // for (nearest end within 40% of a step).
  std::size_t ref = 0;
  for (std::size_t r = 1; r < n; ++r)
    if (per[r].size() > per[ref].size()) ref = r;
  if (per[ref].empty()) return out;
  std::vector<std::int64_t> ref_ends;
  for (auto& s : per[ref]) ref_ends.push_back(s.end_ns);
  std::sort(ref_ends.begin(), ref_ends.end());
  std::vector<std::int64_t> gaps;
  for (std::size_t i = 1; i < ref_ends.size(); ++i) gaps.push_back(ref_ends[i] - ref_ends[i - 1]);
  const std::int64_t period = median_of(gaps);
  const std::int64_t tol = period > 0 ? period * 2 / 5 : kNoTol;

  std::vector<long> shift(n, 0);
  long lo = std::numeric_limits<long>::max(), hi = std::numeric_limits<long>::min();
  for (std::size_t r = 0; r < n; ++r) {
    if (per[r].empty()) continue;
    if (r != ref) {
      std::map<long, std::size_t> votes;
      for (std::size_t i = 0; i < per[r].size(); ++i) {
        const long j = nearest(ref_ends, per[r][i].end_ns, tol);
        if (j >= 0) ++votes[j - static_cast<long>(i)];
      }
      if (votes.empty()) {
        // No step of it near the reference's: place it by time.
        shift[r] = std::lower_bound(ref_ends.begin(), ref_ends.end(), per[r][0].end_ns) - ref_ends.begin();
      } else {
        auto best = votes.begin();
        for (auto it = votes.begin(); it != votes.end(); ++it)
          if (it->second > best->second ||
              (it->second == best->second && std::labs(it->first) < std::labs(best->first)))
            best = it;
        shift[r] = best->first;
      }
    }
    lo = std::min(lo, shift[r]);
    hi = std::max(hi, shift[r] + static_cast<long>(per[r].size()) - 1);
  }
  out.cluster.resize(static_cast<std::size_t>(hi - lo + 1));
  for (std::size_t g = 0; g < out.cluster.size(); ++g) {
    auto& c = out.cluster[g];
    c.index = static_cast<std::int64_t>(g);
    c.at.assign(n, -1);
    c.wait_s.assign(n, 0.0);
    c.load_s.assign(n, 0.0);
  }
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t i = 0; i < per[r].size(); ++i)
      out.cluster[static_cast<std::size_t>(static_cast<long>(i) + shift[r] - lo)].at[r] = static_cast<int>(i);

  // Per step: skew, spread of the all-reduce ends, wait and load.
  std::vector<std::int64_t> skews, spreads;
  // "Every rank": every rank with steps that did not end early (all of
  // them when all did); a rank that ended early compares over its part.
  std::vector<bool> counted(n, false);
  bool all_early = true;
  for (std::size_t r = 0; r < n; ++r) all_early = all_early && (per[r].empty() || plan.ranks[r].ended_early);
  std::size_t with_steps = 0;
  for (std::size_t r = 0; r < n; ++r) {
    counted[r] = !per[r].empty() && (all_early || !plan.ranks[r].ended_early);
    with_steps += counted[r];
  }
  auto full = [&](const ClusterStep& c) {
    for (std::size_t r = 0; r < n; ++r)
      if (counted[r] && c.at[r] < 0) return false;
    return true;
  };
  for (auto& c : out.cluster) {
    std::int64_t b_min = std::numeric_limits<std::int64_t>::max(), b_max = std::numeric_limits<std::int64_t>::min();
    std::int64_t e_min = b_min, e_max = b_max, d_min = b_min;
    for (std::size_t r = 0; r < n; ++r) {
      if (c.at[r] < 0) continue;
      const RankStep& s = per[r][c.at[r]];
      ++c.present;
      b_min = std::min(b_min, s.begin_ns);
      b_max = std::max(b_max, s.begin_ns);
      const std::int64_t mark = sync ? (s.has_sync ? s.sync_end_ns : s.end_ns) : s.end_ns;
      e_min = std::min(e_min, mark);
      e_max = std::max(e_max, mark);
      if (!sync)
        d_min = std::min(d_min, s.end_ns - s.begin_ns);
      else if (s.has_sync)
        d_min = std::min(d_min, s.sync_end_ns - s.sync_begin_ns);
    }
    if (c.present == 0) continue;
    c.start_skew_ns = b_max - b_min;
    c.sync_spread_ns = e_max - e_min;
    const bool shared = c.present >= 2;
    if (shared) {
      ++out.shared_steps;
      skews.push_back(c.start_skew_ns);
      spreads.push_back(c.sync_spread_ns);
      if (c.start_skew_ns > out.max_skew_ns || out.max_skew_step < 0) {
        out.max_skew_ns = c.start_skew_ns;
        out.max_skew_step = c.index;
      }
    }
    if (with_steps && full(c)) ++out.common_steps;
    for (std::size_t r = 0; r < n; ++r) {
      if (c.at[r] < 0) continue;
      const RankStep& s = per[r][c.at[r]];
      const double dur = (s.end_ns - s.begin_ns) / 1e9;
      double wait = 0;
      if (shared && d_min != std::numeric_limits<std::int64_t>::max()) {
        if (!sync)
          wait = (s.end_ns - s.begin_ns - d_min) / 1e9;
        else if (s.has_sync)
          wait = (s.sync_end_ns - s.sync_begin_ns - d_min) / 1e9;
      }
      c.wait_s[r] = wait;
      c.load_s[r] = sync ? dur - wait + (s.begin_ns - b_min) / 1e9 : dur;
    }
  }
  out.median_skew_ns = median_of(skews);
  out.median_sync_spread_ns = median_of(spreads);

  // Per rank, over the steps every rank has, so that all are compared over
  // the same steps (else over the steps shared by two or more; else all).
  std::vector<double> load_sum(n, 0.0);
  for (std::size_t r = 0; r < n; ++r) out.ranks[r].seen = per[r].size();
  for (auto& c : out.cluster) {
    if (out.common_steps && !full(c)) continue;
    if (!out.common_steps && out.shared_steps && c.present < 2) continue;
    for (std::size_t r = 0; r < n; ++r) {
      if (c.at[r] < 0) continue;
      const RankStep& s = per[r][c.at[r]];
      auto& st = out.ranks[r];
      ++st.steps;
      st.step_s += (s.end_ns - s.begin_ns) / 1e9;
      st.wait_s += c.wait_s[r];
      load_sum[r] += c.load_s[r];
    }
  }
  std::vector<double> loads;
  for (std::size_t r = 0; r < n; ++r) {
    auto& st = out.ranks[r];
    if (!st.steps) continue;
    st.mean_step_s = st.step_s / st.steps;
    st.mean_wait_s = st.wait_s / st.steps;
    st.mean_load_s = load_sum[r] / st.steps;
    loads.push_back(st.mean_load_s);
  }
  if (loads.size() >= 2) {
    out.median_load_s = median_of(loads);
    int worst = -1;
    for (std::size_t r = 0; r < n; ++r)
      if (out.ranks[r].steps && (worst < 0 || out.ranks[r].mean_load_s > out.ranks[worst].mean_load_s))
        worst = static_cast<int>(r);
    if (worst >= 0 && out.median_load_s > 0 && out.ranks[worst].mean_load_s > out.median_load_s * 1.05) {
      out.straggler = worst;
      out.straggler_excess = out.ranks[worst].mean_load_s / out.median_load_s - 1;
    }
  }
  return out;
}

namespace {

std::string utc(std::int64_t ns) {
  const std::time_t s = static_cast<std::time_t>(ns / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char b[64];
  std::strftime(b, sizeof b, "%Y-%m-%d %H:%M:%S", &tm);
  char m[16];
  std::snprintf(m, sizeof m, ".%03lld", static_cast<long long>((ns % 1'000'000'000) / 1'000'000));
  return std::string(b) + m + " UTC";
}

// A plain text table: the first column left-aligned, the others right.
std::string table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> w(head.size());
  for (std::size_t i = 0; i < head.size(); ++i) w[i] = cp_len(head[i]);  // code points: names may be any text
  for (auto& r : rows)
    for (std::size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], cp_len(r[i]));
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s = "|";
    for (std::size_t i = 0; i < w.size(); ++i) {
      const std::string c = i < cells.size() ? cells[i] : "";
      s += " " + (i == 0 ? pad_right(c, w[i]) : pad_left(c, w[i])) + " |";
    }
    return s + "\n";
  };
  std::string out = line(head) + "|";
  for (auto x : w) out += std::string(x + 2, '-') + "|";
  out += "\n";
  for (auto& r : rows) out += line(r);
  return out;
}

std::string rank_list(const std::vector<int>& v) {
  // "0, 2-5, 7"
  std::string s;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!s.empty()) s += ", ";
    s += std::to_string(v[i]);
    if (j > i) s += (j == i + 1 ? ", " : "-") + std::to_string(v[j]);
    i = j + 1;
  }
  return s;
}

std::string who(const RankRun& r) {
  return r.label + " (pid " + std::to_string(r.proc->meta.pid) + "@" + r.host + ")";
}

bool early_any(const MergePlan& plan) {
  for (auto& r : plan.ranks)
    if (r.ended_early) return true;
  return false;
}

void header(std::string& o, const MergePlan& plan, const ClockEstimate* clock) {
  std::size_t ranked = 0;
  for (auto& r : plan.ranks) ranked += r.rank >= 0;
  o += "Cluster Summary\n\n";
  o += "Ranks: " + std::to_string(ranked);
  if (plan.world_size > 0) o += " of world size " + std::to_string(plan.world_size);
  if (ranked != plan.ranks.size()) o += ", and " + std::to_string(plan.ranks.size() - ranked) + " unranked process(es)";
  o += ", on " + std::to_string(plan.hosts.size()) + " host(s)\n";
  for (std::size_t h = 0; h < plan.hosts.size(); ++h) {
    std::string list;
    for (auto& r : plan.ranks)
      if (r.host_index == h)
        list += (list.empty() ? "" : ", ") + r.label + " (pid " + std::to_string(r.proc->meta.pid) +
                (r.host != plan.hosts[h].host ? ", node " + r.host : "") + ")";
    o += "  " + plan.hosts[h].host + ": " + (list.empty() ? "no ranks" : list) + "\n";
  }
  bool wall = true;
  for (auto& h : plan.hosts) wall = wall && h.clock_pair;
  if (!plan.ranks.empty()) {
    o += "Window: " + (wall ? utc(plan.begin_ns) + ", " : std::string()) + ns_as_s(plan.end_ns - plan.begin_ns, 3) +
         " s; recorded on every rank" + (early_any(plan) ? " that did not end early" : "") + ": " +
         ns_as_s(plan.overlap_end_ns - plan.overlap_begin_ns, 3) + " s\n";
  }
  if (plan.missing_ranks.empty()) {
    o += "Missing: none\n";
  } else {
    o += "Missing: rank" + std::string(plan.missing_ranks.size() > 1 ? "s " : " ") + rank_list(plan.missing_ranks) +
         " (no trace)";
    if (!plan.missing_nodes.empty()) {
      o += "; by " + std::to_string(plan.local_world_size) + " ranks per node, no trace of node";
      for (std::size_t i = 0; i < plan.missing_nodes.size(); ++i) {
        const auto& m = plan.missing_nodes[i];
        o += (i ? ", " : " ") + std::to_string(m.node) + " (ranks " + std::to_string(m.first_rank) + "-" +
             std::to_string(m.last_rank) + ")";
      }
      o += " (its agent failed, or it was not recorded)";
    }
    o += "\n";
  }
  std::string early;
  for (auto& r : plan.ranks) {
    if (!r.ended_early) continue;
    early += "  " + who(r) + ": " + (r.exited ? "exited" : "its recording ended") + " " +
             ns_as_s(plan.end_ns - r.end_ns(), 3) + " s" +
             " before the end, while other ranks went on training; its data up to then is used\n";
  }
  o += early.empty() ? "Ended early: none\n" : "Ended early:\n" + early;
  for (std::size_t h = 0; h < plan.hosts.size(); ++h)
    for (auto f : plan.hosts[h].files) {
      const RankRun* any = nullptr;
      for (auto& r : plan.ranks)
        if (r.file_index == f) any = &r;
      if (any && any->file_cut)
        o += "Recording ended abruptly: " + any->file + " (" + plan.hosts[h].host +
             "): no detach record; its window ends at its last event\n";
    }

  // Clocks.
  if (plan.hosts.size() > 1 && !plan.ranks.empty()) {
    // Measured by the cluster agents: every host against the coordinator,
    // whose wall clock is then the common one; the reference host is listed
    // like the others.
    const auto& ref = plan.hosts[plan.reference_host];
    const bool by_coordinator = ref.source == ClockSource::measured && !ref.measured_against.empty();
    if (by_coordinator)
      o += "Clock: the common clock is " + ref.measured_against +
           "'s wall clock (the cluster coordinator; each host measured by UDP round trips, bound = half the "
           "least round trip plus half the drift); corrections added to each host's:\n";
    else {
      o += "Clock: the common clock is " + ref.host + "'s wall clock";
      if (ref.clock_offset_ns) o += " " + signed_fixed(ref.clock_offset_ns / 1e6, 3) + " ms";
      o += "; corrections added to each host's:\n";
    }
    for (std::size_t h = 0; h < plan.hosts.size(); ++h) {
      if (h == plan.reference_host && !by_coordinator) continue;
      const auto& hc = plan.hosts[h];
      o += "  " + hc.host + ": " + signed_fixed(hc.clock_offset_ns / 1e6, 3) + " ms, " + clock_source_name(hc.source);
      if (hc.source == ClockSource::measured && !hc.measured_against.empty())
        o += " against " + hc.measured_against + ", within " + ns_as_ms(hc.residual_ns, 3) + " ms (" +
             std::to_string(hc.measurements) + " measurement" + (hc.measurements == 1 ? "" : "s") +
             (hc.measurements > 1 ? ", drift " + signed_fixed(hc.drift_ns / 1e6, 3) + " ms" : std::string()) + ")";
      const HostOffsetEstimate* e = clock && h < clock->hosts.size() ? &clock->hosts[h] : nullptr;
      if (!hc.clock_pair) o += " (no clock pair in its trace: not aligned)";
      if (e && e->estimated) {
        if (hc.source == ClockSource::estimated)
          o += " from " + std::to_string(e->pairs) + " matched " + clock->action + " ends";
        else
          o += "; the " + clock->action + " ends suggest " + signed_fixed(e->change_ns / 1e6, 3) + " ms more (" +
               std::to_string(e->pairs) + " pairs)";
        o += ", residual " + ns_as_ms(e->mad_ns, 3) + " ms median, " + ns_as_ms(e->p95_ns, 3) +
             " ms p95, standard error " + ns_as_ms(e->stderr_ns, 3) + " ms";
        if (e->wake_corrected)
          o += "; its ranks never waited alike with " + plan.hosts[plan.reference_host].host + "'s: corrected by the " +
               ns_as_ms(clock->wake_latency_ns, 3) + " ms" +
               " a waiting rank takes to leave the all-reduce after the last one (seen on one host)";
        else if (e->role_bias)
          o += "; its ranks never waited alike with " + plan.hosts[plan.reference_host].host +
               "'s (a straggler): off by about the time a waiting rank takes to leave the all-reduce after the "
               "last one (~0.1 ms with gloo on CPU), which no host shows here; a measured offset avoids this";
      } else if (e && !e->why_not.empty()) {
        o += ": not estimated: " + e->why_not;
      }
      o += "\n";
    }
  }
  for (auto& n : plan.notes) o += "Note: " + n + "\n";
}

void actions_section(std::string& o, const MergePlan& plan, const ClusterSummaryOptions& opt) {
  const std::size_t n = plan.ranks.size();
  // Ranks recorded over different windows (hosts attach at different
  // moments) compare only over the window they share: the calls that began
  // and ended inside it, as if every rank had been recorded over just that
  // window.  Without intervals (not kept), whole totals.
  bool intervals = true;
  for (auto& r : plan.ranks) intervals = intervals && (r.proc->intervals.size() || r.proc->actions.empty());
  const std::int64_t wb = plan.overlap_begin_ns, we = plan.overlap_end_ns;
  std::map<std::string, std::vector<double>> totals;  // name -> per rank
  std::map<std::string, std::vector<bool>> has;
  for (std::size_t r = 0; r < n; ++r) {
    const auto& rr = plan.ranks[r];
    for (auto& a : rr.proc->actions) {
      totals[a.name].resize(n, 0.0);
      has[a.name].resize(n, false);
    }
    if (!intervals) {
      for (auto& a : rr.proc->actions) {
        totals[a.name][r] += a.running_total_s;
        has[a.name][r] = true;
      }
      continue;
    }
    for (auto& iv : rr.proc->intervals) {
      if (rr.common_ns(iv.begin_ns) < wb || rr.common_ns(iv.end_ns) > we) continue;
      const std::string& name = rr.proc->actions[iv.action].name;
      totals[name][r] += (iv.end_ns - iv.begin_ns) / 1e9;
      has[name][r] = true;
    }
  }
  for (auto it = totals.begin(); it != totals.end();) {
    const auto& h = has[it->first];
    if (std::find(h.begin(), h.end(), true) == h.end())
      it = totals.erase(it);
    else
      ++it;
  }
  std::vector<std::pair<std::string, const std::vector<double>*>> rows;
  for (auto& [name, v] : totals) rows.push_back({name, &v});
  std::stable_sort(rows.begin(), rows.end(), [](auto& a, auto& b) {
    return *std::max_element(a.second->begin(), a.second->end()) >
           *std::max_element(b.second->begin(), b.second->end());
  });
  bool all_early = true;
  for (auto& r : plan.ranks) all_early = all_early && r.ended_early;
  const std::size_t cols = std::min(n, opt.max_rank_columns);
  std::vector<std::string> head{"Action"};
  for (std::size_t r = 0; r < cols; ++r) head.push_back(plan.ranks[r].label);
  head.push_back("slowest");
  head.push_back("spread");
  std::vector<std::vector<std::string>> cells;
  for (auto& [name, v] : rows) {
    std::vector<std::string> row{name};
    for (std::size_t r = 0; r < cols; ++r) row.push_back(has[name][r] ? fixed((*v)[r], 4) : "-");
    // Ranks that ended early ran fewer calls: left out, unless all did.
    std::size_t worst = n, m = 0;
    double sum = 0, lo = 0;
    for (std::size_t r = 0; r < n; ++r) {
      if (plan.ranks[r].ended_early && !all_early) continue;
      if (worst == n || (*v)[r] > (*v)[worst]) worst = r;
      lo = m ? std::min(lo, (*v)[r]) : (*v)[r];
      sum += (*v)[r];
      ++m;
    }
    const double mean = m ? sum / m : 0;
    row.push_back(worst < n ? plan.ranks[worst].label : "-");
    row.push_back(m > 1 && mean > 0 ? percent(((*v)[worst] - lo) / mean * 100, 1) : "-");
    cells.push_back(std::move(row));
  }
  o += "\nTime per Lightning action (seconds per rank";
  if (intervals)
    o += ", calls inside the " + ns_as_s(we - wb, 3) + " s recorded on every rank" +
         (early_any(plan) ? " that did not end early" : "");
  o += "; spread = (max - min) / mean; \"-\": not run)\n";
  for (std::size_t r = 0; r < cols; ++r)
    if (plan.ranks[r].ended_early) head[r + 1] += "*";
  o += table(head, cells);
  if (early_any(plan) && !all_early)
    o += "(*: ended early: its calls only up to its end; slowest and spread leave it out)\n";
  if (cols < n)
    o += "(" + std::to_string(n - cols) + " more rank(s) not shown: " + plan.ranks[cols].label + " to " +
         plan.ranks[n - 1].label + "; slowest and spread count them)\n";
}

void steps_section(std::string& o, const MergePlan& plan, const StepSkew& sk, const ClusterSummaryOptions& opt) {
  const std::size_t n = plan.ranks.size();
  o += "\nStep-time skew";
  if (sk.steps.step_action.empty()) {
    o += ": no training steps (run_training_batch) in the window\n";
    return;
  }
  o += " (steps: " + sk.steps.step_action + "; " + std::to_string(sk.shared_steps) + " seen on two or more ranks, " +
       std::to_string(sk.common_steps) + " on every rank with steps; on the common clock)\n";
  if (sk.shared_steps) {
    o += "Start skew across ranks (max - min): median " + ns_as_ms(sk.median_skew_ns, 3) + " ms, max " +
         ns_as_ms(sk.max_skew_ns, 3) + " ms" + " (step " + std::to_string(sk.max_skew_step) + ")\n";
    const std::string mark = sk.steps.sync_action.empty() ? sk.steps.step_action : sk.steps.sync_action;
    o += "End of " + mark + " across ranks (max - min): median " + ns_as_ms(sk.median_sync_spread_ns, 3) + " ms" +
         (sk.steps.sync_action.empty() ? "\n"
                                       : " (all-reduce jitter plus what remains of the clock error: an upper bound "
                                         "of that error)\n");
  }
  std::vector<std::vector<std::string>> rows;
  for (std::size_t r = 0; r < n; ++r) {
    const auto& st = sk.ranks[r];
    if (!st.steps) {
      rows.push_back({plan.ranks[r].label, std::to_string(st.seen), "0", "-", "-", "-"});
      continue;
    }
    rows.push_back({plan.ranks[r].label, std::to_string(st.seen), std::to_string(st.steps),
                    fixed(st.mean_step_s * 1e3, 3), fixed(st.mean_wait_s * 1e3, 3), fixed(st.mean_load_s * 1e3, 3)});
  }
  std::size_t used = 0;
  for (auto& st : sk.ranks) used = std::max(used, st.steps);
  o += "Per rank, over the " + std::to_string(used) +
       (sk.common_steps
            ? std::string(" steps every rank") + (early_any(plan) ? " that did not end early" : "") + " has:\n"
        : sk.shared_steps ? " steps shared by two or more ranks:\n"
                          : " steps:\n");
  o += table({"Rank", "steps seen", "compared", "mean step (ms)", "mean wait~ (ms)", "mean load (ms)"}, rows);
  o += sk.steps.sync_action.empty()
           ? "(load = step time; wait~ = step time minus the fastest rank's)\n"
           : "(wait~ = " + sk.steps.sync_action +
                 " time minus the fastest rank's; load = step time - wait~ + how late the rank began the step)\n";
  if (sk.straggler >= 0)
    o += "Straggler: " + who(plan.ranks[sk.straggler]) + ": mean load " +
         fixed(sk.ranks[sk.straggler].mean_load_s * 1e3, 3) + " ms, median of the ranks " +
         fixed(sk.median_load_s * 1e3, 3) + " ms (+" + percent(sk.straggler_excess * 100, 1) + ")\n";
  else
    o += "Straggler: none (no rank's mean load exceeds the median by more than 5%)\n";

  // The steps with the largest start skew, in step order.
  std::vector<const ClusterStep*> worst;
  for (auto& c : sk.cluster)
    if (c.present >= 2) worst.push_back(&c);
  std::stable_sort(worst.begin(), worst.end(), [](auto* a, auto* b) { return a->start_skew_ns > b->start_skew_ns; });
  if (worst.size() > opt.worst_steps) worst.resize(opt.worst_steps);
  std::sort(worst.begin(), worst.end(), [](auto* a, auto* b) { return a->index < b->index; });
  if (!worst.empty()) {
    const std::size_t cols = std::min(n, opt.max_rank_columns);
    std::vector<std::string> head{"Step", "start skew (ms)"};
    for (std::size_t r = 0; r < cols; ++r) head.push_back(plan.ranks[r].label + " (ms)");
    std::vector<std::vector<std::string>> cells;
    for (auto* c : worst) {
      std::vector<std::string> row{std::to_string(c->index), ns_as_ms(c->start_skew_ns, 3)};
      for (std::size_t r = 0; r < cols; ++r) {
        if (c->at[r] < 0) {
          row.push_back("-");
          continue;
        }
        const RankStep& s = sk.steps.per_rank[r][c->at[r]];
        row.push_back(ns_as_ms(s.end_ns - s.begin_ns, 3));
      }
      cells.push_back(std::move(row));
    }
    o += "Steps with the largest start skew (each rank's step time):\n" + table(head, cells);
  }
}

void wait_section(std::string& o, const MergePlan& plan, const StepSkew& sk) {
  if (sk.steps.step_action.empty() || !sk.shared_steps) return;
  const std::string what = sk.steps.sync_action.empty() ? sk.steps.step_action : sk.steps.sync_action;
  o += "\nTime waiting in collectives (estimate: per step, a rank's " + what +
       " time minus the fastest rank's, summed: the wait at the gradient all-reduce for the slowest rank";
  o += sk.steps.sync_action.empty() ? "; without a backward action in the steps this misses waits that every rank's "
                                      "step time includes)\n"
                                    : ")\n";
  std::vector<std::vector<std::string>> rows;
  double wait = 0, step = 0;
  for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
    const auto& st = sk.ranks[r];
    if (!st.steps) continue;
    wait += st.wait_s;
    step += st.step_s;
    rows.push_back(
        {plan.ranks[r].label, fixed(st.wait_s, 3), st.step_s > 0 ? percent(st.wait_s / st.step_s * 100, 1) : "-"});
  }
  o += table({"Rank", "waited~ (s)", "of its step time"}, rows);
  o += "Total: " + fixed(wait, 3) + " s of " + fixed(step, 3) + " s step time" +
       (step > 0 ? " (" + percent(wait / step * 100, 1) + ")" : "") + ", over the steps compared above\n";
}

// Measured from the COMM records (reports/cluster/arrivals.h): who arrived
// last at each collective and how long the others waited for it.
void arrivals_section(std::string& o, const MergePlan& plan) {
  const ArrivalInput in = arrival_input(plan);
  if (in.empty()) return;
  const ArrivalReport rep = analyze_arrivals(in, plan.ranks.size(), arrival_clocks(plan));
  o += "\nLast to arrive at collectives (measured: each rank's c10d call entry on the common clock; the k-th "
       "call of a process group is one collective on every rank; supersedes the wait~ estimate above)\n";
  for (const auto& g : rep.groups) {
    o += "pg " + std::to_string(g.group) + ": ";
    if (!g.aligned) {
      o += g.why_not + "\n";
      continue;
    }
    std::size_t ranks = 0;
    for (bool p : g.present) ranks += p;
    o += std::to_string(g.instances) + " collectives on " + std::to_string(ranks) + " ranks, " +
         std::to_string(g.complete) + " recorded by every one of them (the others are left out: a rank not yet " +
         "attached, or a record lost, could have been the last)\n";
  }
  std::vector<std::vector<std::string>> rows;
  for (std::size_t r = 0; r < plan.ranks.size(); ++r)
    for (const auto& st : rep.ranks[r])
      rows.push_back(
          {plan.ranks[r].label, comm_kind_name(st.kind), std::to_string(st.instances), std::to_string(st.last),
           st.instances ? percent(100.0 * static_cast<double>(st.last) / st.instances, 1) : "-",
           fixed(st.waited_for_ns / 1e9, 3), fixed(st.median_waited_for_ns / 1e6, 3), fixed(st.own_wait_ns / 1e9, 3)});
  if (rows.empty()) return;
  o += table({"Rank", "collective", "instances", "last", "last share", "others waited for it (s)",
              "median per time last (ms)", "it waited (s)"},
             rows);
  o += "(wait = the last arrival - a rank's own arrival, entry times; others waited for it: summed over the "
       "other ranks; median over the collectives it was last at; last: only where it arrived after the runner-up "
       "by more than their hosts' clock bounds: a tie, or a closer call, counts as no rank's)\n";
}

}  // namespace

std::string render_cluster_summary(const MergePlan& plan, const ClockEstimate* clock,
                                   const ClusterSummaryOptions& opt) {
  std::string o;
  header(o, plan, clock);
  if (plan.ranks.empty()) {
    o += "\nNo process in these traces ran Lightning actions.\n";
    return o;
  }
  actions_section(o, plan, opt);
  const StepSkew sk = analyze_steps(plan);
  steps_section(o, plan, sk, opt);
  wait_section(o, plan, sk);
  arrivals_section(o, plan);
  return o;
}

}  // namespace lt
