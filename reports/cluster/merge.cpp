#include "reports/cluster/merge.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>

#include "user/text/stats.h"

namespace lt {

const char* clock_source_name(ClockSource s) {
  switch (s) {
    case ClockSource::measured:
      return "measured";
    case ClockSource::estimated:
      return "estimated";
    default:
      return "recorded";
  }
}

std::int64_t RankRun::common_ns(std::uint64_t mono_ns) const {
  const HostMeta& h = report->host;
  std::int64_t t = static_cast<std::int64_t>(mono_ns);
  if (h.realtime_ns != 0)
    t = static_cast<std::int64_t>(mono_ns - h.monotonic_ns) + static_cast<std::int64_t>(h.realtime_ns);
  return t + clock_offset_ns;
}

const RankRun* MergePlan::find_rank(int r) const {
  for (auto& x : ranks)
    if (x.rank == r) return &x;
  return nullptr;
}

namespace {

bool starts_with(const std::string& s, const char* p) {
  return s.rfind(p, 0) == 0;
}
bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}
bool is_strategy_step(const std::string& n) {
  return starts_with(n, "[Strategy]") && ends_with(n, ".training_step");
}
bool is_strategy_backward(const std::string& n) {
  return starts_with(n, "[Strategy]") && ends_with(n, ".backward");
}

int action_index(const ProcessActions& p, bool (*match)(const std::string&)) {
  for (std::size_t i = 0; i < p.actions.size(); ++i)
    if (match(p.actions[i].name)) return static_cast<int>(i);
  return -1;
}

bool is_training_batch(const std::string& n) {
  return n == "run_training_batch";
}

std::vector<const ActionInterval*> intervals_of(const ProcessActions& p, int action) {
  std::vector<const ActionInterval*> v;
  if (action < 0) return v;
  for (auto& iv : p.intervals)
    if (iv.action == static_cast<std::uint32_t>(action)) v.push_back(&iv);
  std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->begin_ns < b->begin_ns; });
  return v;
}

// Windows, the shared part, and which ranks ended while the others trained.
void refresh(MergePlan& plan) {
  plan.begin_ns = plan.end_ns = plan.overlap_begin_ns = plan.overlap_end_ns = 0;
  if (plan.ranks.empty()) return;
  plan.begin_ns = plan.ranks[0].begin_ns();
  plan.end_ns = plan.ranks[0].end_ns();
  for (auto& r : plan.ranks) {
    plan.begin_ns = std::min(plan.begin_ns, r.begin_ns());
    plan.end_ns = std::max(plan.end_ns, r.end_ns());
  }

  const TrainingSteps steps = training_steps(plan);
  for (std::size_t i = 0; i < plan.ranks.size(); ++i) {
    auto& r = plan.ranks[i];
    r.ended_early = false;
    if (!r.exited && !r.file_cut) continue;
    const std::int64_t end = r.end_ns();
    if (!steps.step_action.empty()) {
      // Another rank began a training step after this one's data ends.
      for (std::size_t j = 0; j < plan.ranks.size() && !r.ended_early; ++j)
        if (j != i)
          for (auto& s : steps.per_rank[j])
            if (s.begin_ns > end) {
              r.ended_early = true;
              break;
            }
    } else {
      // No training steps: another rank's actions went on for over a second.
      for (std::size_t j = 0; j < plan.ranks.size() && !r.ended_early; ++j)
        if (j != i)
          for (auto& iv : plan.ranks[j].proc->intervals)
            if (plan.ranks[j].common_ns(iv.begin_ns) > end + 1'000'000'000) {
              r.ended_early = true;
              break;
            }
    }
  }

  // The shared window: of the ranks that did not end early (all, if all did).
  bool all_early = true;
  for (auto& r : plan.ranks) all_early = all_early && r.ended_early;
  bool first = true;
  for (auto& r : plan.ranks) {
    if (r.ended_early && !all_early) continue;
    plan.overlap_begin_ns = first ? r.begin_ns() : std::max(plan.overlap_begin_ns, r.begin_ns());
    plan.overlap_end_ns = first ? r.end_ns() : std::min(plan.overlap_end_ns, r.end_ns());
    first = false;
  }
  if (plan.overlap_end_ns < plan.overlap_begin_ns) plan.overlap_end_ns = plan.overlap_begin_ns;
}

}  // namespace

std::optional<MeasuredOffset> measured_offset(const std::vector<ClockSync>& syncs) {
  if (syncs.empty()) return std::nullopt;
  MeasuredOffset m;
  m.reference = syncs.front().reference;
  std::int64_t lo = syncs.front().offset_ns, hi = lo, worst = 0;
  long double sum = 0;
  for (const auto& c : syncs) {
    lo = std::min(lo, c.offset_ns);
    hi = std::max(hi, c.offset_ns);
    worst = std::max(worst, (c.delay_ns + 1) / 2);
    sum += c.offset_ns;
  }
  m.measurements = syncs.size();
  m.offset_ns = static_cast<std::int64_t>(sum / static_cast<long double>(syncs.size()));
  m.drift_ns = syncs.back().offset_ns - syncs.front().offset_ns;
  m.bound_ns = worst + (hi - lo + 1) / 2;
  return m;
}

MergePlan plan_merge(const std::vector<MergeInput>& inputs,
                     const std::map<std::string, std::int64_t>& measured_offsets_ns) {
  MergePlan plan;
  std::vector<std::size_t> host_of(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const auto& rep = inputs[i].actions;
    // One clock per host name, unless two files of one name map their
    // monotonic clocks to wall time more than a second apart: two machines
    // (containers named alike) or two boots, each its own clock.
    const std::string base = rep.host.hostname.empty() ? inputs[i].file : rep.host.hostname;
    const std::int64_t mapping = static_cast<std::int64_t>(rep.host.realtime_ns - rep.host.monotonic_ns);
    std::string name = base;
    std::size_t h = 0;
    for (int n = 2;; ++n) {
      h = 0;
      while (h < plan.hosts.size() && plan.hosts[h].host != name) ++h;
      if (h == plan.hosts.size() || !rep.host.realtime_ns) break;
      const auto& other = inputs[plan.hosts[h].files.front()].actions.host;
      if (!other.realtime_ns ||
          std::llabs(static_cast<std::int64_t>(other.realtime_ns - other.monotonic_ns) - mapping) <= 1'000'000'000)
        break;
      name = base + " (" + std::to_string(n) + ")";
    }
    if (h == plan.hosts.size()) {
      plan.hosts.push_back({});
      plan.hosts[h].host = name;
      if (name != base)
        plan.notes.push_back(inputs[i].file + ": host " + base +
                             " again, with another clock (another machine or boot): called " + name);
      if (auto m = measured_offsets_ns.find(name); m != measured_offsets_ns.end()) {
        plan.hosts[h].clock_offset_ns = m->second;
        plan.hosts[h].source = ClockSource::measured;
      }
    }
    plan.hosts[h].files.push_back(i);
    if (rep.host.realtime_ns == 0) {
      plan.hosts[h].clock_pair = false;
      plan.notes.push_back(inputs[i].file +
                           ": no HOST_INFO clock pair: its times stay on its host's monotonic clock, not aligned "
                           "with the other files");
    }
    host_of[i] = h;
  }

  // Hosts the cluster agents measured (CLOCK_SYNC in their files), unless
  // the caller gave a correction.  Only measurements against one reference
  // are comparable: with several, the most common reference is kept.
  {
    std::map<std::string, std::size_t> refs;
    std::vector<std::vector<ClockSync>> per_host(plan.hosts.size());
    for (std::size_t i = 0; i < inputs.size(); ++i)
      for (const auto& c : inputs[i].actions.host.clock_syncs) per_host[host_of[i]].push_back(c);
    for (auto& v : per_host)
      if (!v.empty()) ++refs[v.front().reference];
    std::string ref;
    std::size_t most = 0;
    for (auto& [r, n] : refs)
      if (n > most) ref = r, most = n;
    for (std::size_t h = 0; h < plan.hosts.size(); ++h) {
      auto& hc = plan.hosts[h];
      if (hc.source == ClockSource::measured || per_host[h].empty()) continue;
      std::vector<ClockSync> same;
      for (auto& c : per_host[h])
        if (c.reference == ref) same.push_back(c);
      if (same.empty()) {
        plan.notes.push_back(hc.host + ": its clock was measured against " + per_host[h].front().reference +
                             ", the others' against " + ref + ": not comparable, left out");
        continue;
      }
      const auto m = measured_offset(same);
      hc.clock_offset_ns = m->offset_ns;
      hc.source = ClockSource::measured;
      hc.residual_ns = m->bound_ns;
      hc.measured_against = m->reference;
      hc.measurements = m->measurements;
      hc.drift_ns = m->drift_ns;
    }
  }

  // Candidates: every process that ran Lightning actions.
  struct Cand {
    RankRun run;
    std::size_t calls;
  };
  std::vector<Cand> cands;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const auto& rep = inputs[i].actions;
    std::size_t found = 0;
    const ProcessIndex index(rep);
    for (auto& p : rep.processes) {
      if (p.actions.empty()) continue;
      ++found;
      const ProcessMeta m = index.with_rank_labels(p.meta);
      RankRun r;
      r.rank = m.rank;
      r.local_rank = m.local_rank;
      r.world_size = m.world_size;
      r.host_index = host_of[i];
      // The node as the process names it (its UTS namespace), else the
      // recording host.
      r.host = m.hostname.empty() ? plan.hosts[r.host_index].host : m.hostname;
      r.file = inputs[i].file;
      r.file_index = i;
      r.proc = &p;
      r.report = &rep;
      r.ops = inputs[i].ops ? &*inputs[i].ops : nullptr;
      r.gpu = inputs[i].gpu ? &*inputs[i].gpu : nullptr;
      if (inputs[i].comm)
        for (auto& pc : inputs[i].comm->processes)
          if (pc.pid == p.meta.pid) r.comm = &pc;
      r.clock_offset_ns = plan.hosts[r.host_index].clock_offset_ns;
      r.exited = p.exited;
      r.file_cut = !rep.complete;
      cands.push_back({std::move(r), p.total_calls()});
    }
    if (!found) plan.notes.push_back(inputs[i].file + ": no process ran Lightning actions");
  }

  // One process per rank: the one with the most actions; others (a rank
  // restarted by torchelastic, or two unrelated jobs) stay, unranked.
  std::map<int, std::size_t> best;
  for (std::size_t c = 0; c < cands.size(); ++c) {
    const int rk = cands[c].run.rank;
    if (rk < 0) continue;
    auto [it, fresh] = best.try_emplace(rk, c);
    if (!fresh && cands[c].calls > cands[it->second].calls) it->second = c;
  }
  std::set<int> world_sizes;
  int max_rank = -1;
  for (std::size_t c = 0; c < cands.size(); ++c) {
    auto& r = cands[c].run;
    if (r.rank >= 0 && best[r.rank] != c) {
      plan.notes.push_back("rank " + std::to_string(r.rank) + " appears twice: pid " +
                           std::to_string(r.proc->meta.pid) + "@" + r.host + " (" + r.file +
                           ") is kept apart, unranked; the rank is pid " +
                           std::to_string(cands[best[r.rank]].run.proc->meta.pid) + "@" + cands[best[r.rank]].run.host);
      r.label =
          "pid " + std::to_string(r.proc->meta.pid) + "@" + r.host + " (rank " + std::to_string(r.rank) + " again)";
      r.rank = -1;
      continue;
    }
    if (r.rank >= 0) {
      max_rank = std::max(max_rank, r.rank);
      if (r.world_size > 0) world_sizes.insert(r.world_size);
      if (r.local_rank >= 0) plan.local_world_size = std::max(plan.local_world_size, r.local_rank + 1);
    }
  }
  if (!world_sizes.empty()) plan.world_size = *world_sizes.rbegin();
  // Traces of different jobs (their environment says so) should not merge.
  std::set<std::string> jobs, masters;
  for (auto& c : cands) {
    const auto& m = c.run.proc->meta;
    if (!m.slurm_job_id.empty()) jobs.insert(m.slurm_job_id);
    if (!m.master_addr.empty() && m.master_port) masters.insert(m.master_addr + ":" + std::to_string(m.master_port));
  }
  auto list = [](const std::set<std::string>& v) {
    std::string s;
    for (auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  if (jobs.size() > 1) plan.notes.push_back("the ranks belong to different Slurm jobs (" + list(jobs) + ")");
  if (masters.size() > 1)
    plan.notes.push_back("the ranks name different rendezvous (MASTER_ADDR:MASTER_PORT " + list(masters) +
                         "): more than one job?");
  if (world_sizes.size() > 1) {
    std::string all;
    for (int w : world_sizes) all += (all.empty() ? "" : ", ") + std::to_string(w);
    plan.notes.push_back("the ranks disagree on WORLD_SIZE (" + all + "): using " + std::to_string(plan.world_size));
  }
  int next = std::max(plan.world_size, max_rank + 1);
  for (auto& c : cands) {
    auto& r = c.run;
    if (r.rank >= 0) {
      r.index = r.rank;
      r.label = "rank " + std::to_string(r.rank);
    } else {
      r.index = next++;
      if (r.label.empty()) r.label = "pid " + std::to_string(r.proc->meta.pid) + "@" + r.host;
    }
    plan.ranks.push_back(std::move(r));
  }
  std::sort(plan.ranks.begin(), plan.ranks.end(), [](auto& a, auto& b) { return a.index < b.index; });

  const int expected = plan.world_size > 0 ? plan.world_size : max_rank + 1;
  for (int k = 0; k < expected; ++k)
    if (!best.count(k)) plan.missing_ranks.push_back(k);
  const int L = plan.local_world_size;
  if (L > 1 && plan.world_size > 0) {
    for (int n = 0; n * L < plan.world_size; ++n) {
      const int first = n * L, last = std::min(plan.world_size, first + L) - 1;
      bool none = true;
      for (int k = first; k <= last; ++k) none = none && !best.count(k);
      if (none) plan.missing_nodes.push_back({n, first, last});
    }
  }
  if (!plan.ranks.empty()) plan.reference_host = plan.ranks[0].host_index;
  // With hosts measured by the agents (CLOCK_SYNC) the common clock is the
  // one they were measured against: the reference must be one of them (the lowest-ranked), so that
  // an unmeasured host (its clock exchange failed) is estimated against it
  // rather than the measured ones being left off by its NTP error.
  // (Corrections given by the caller are relative to the reference host's
  // clock, so they leave it where it is.)
  if (!plan.hosts.empty() && plan.hosts[plan.reference_host].source != ClockSource::measured)
    for (const auto& r : plan.ranks)
      if (!plan.hosts[r.host_index].measured_against.empty()) {
        plan.reference_host = r.host_index;
        break;
      }
  refresh(plan);
  return plan;
}

void set_host_offset(MergePlan& plan, std::size_t host, std::int64_t offset_ns, ClockSource source,
                     std::int64_t residual_ns) {
  if (host >= plan.hosts.size()) return;
  auto& h = plan.hosts[host];
  h.clock_offset_ns = offset_ns;
  h.source = source;
  h.residual_ns = residual_ns;
  h.stderr_ns = -1;
  for (auto& r : plan.ranks)
    if (r.host_index == host) r.clock_offset_ns = offset_ns;
  refresh(plan);
}

TrainingSteps training_steps(const MergePlan& plan) {
  TrainingSteps out;
  out.per_rank.resize(plan.ranks.size());
  // The step action every rank has, else the one most ranks have.
  std::size_t with_batch = 0, with_strategy = 0;
  for (auto& r : plan.ranks) {
    with_batch += action_index(*r.proc, is_training_batch) >= 0;
    with_strategy += action_index(*r.proc, is_strategy_step) >= 0;
  }
  if (with_batch == 0 && with_strategy == 0) return out;
  const bool batch = with_batch >= with_strategy;
  auto step_match = batch ? is_training_batch : is_strategy_step;

  bool all_sync = batch, any_steps = false;
  std::string sync_name;
  for (std::size_t i = 0; i < plan.ranks.size(); ++i) {
    const auto& r = plan.ranks[i];
    const int a = action_index(*r.proc, step_match);
    if (a < 0) continue;
    if (out.step_action.empty()) out.step_action = r.proc->actions[a].name;
    const auto steps = intervals_of(*r.proc, a);
    if (steps.empty()) continue;
    any_steps = true;
    const int b = batch ? action_index(*r.proc, is_strategy_backward) : -1;
    const auto syncs = intervals_of(*r.proc, b);
    bool has_sync = false;
    std::size_t j = 0;
    for (auto* s : steps) {
      RankStep rs{r.common_ns(s->begin_ns), r.common_ns(s->end_ns), false, 0, 0};
      // The last backward on the step's thread inside it (several
      // optimizers: the last one holds the step's final all-reduce).
      while (j < syncs.size() && syncs[j]->begin_ns < s->begin_ns) ++j;
      for (std::size_t k = j; k < syncs.size() && syncs[k]->begin_ns <= s->end_ns; ++k)
        if (syncs[k]->tid == s->tid && syncs[k]->end_ns <= s->end_ns) {
          rs.sync_begin_ns = r.common_ns(syncs[k]->begin_ns);
          rs.sync_end_ns = r.common_ns(syncs[k]->end_ns);
          rs.has_sync = has_sync = true;
        }
      out.per_rank[i].push_back(rs);
    }
    if (has_sync && sync_name.empty()) sync_name = r.proc->actions[b].name;
    all_sync = all_sync && has_sync;
  }
  if (!any_steps) out.step_action.clear();
  if (all_sync && any_steps) {
    out.sync_action = sync_name;
  } else {
    for (auto& v : out.per_rank)
      for (auto& s : v) s = {s.begin_ns, s.end_ns, false, 0, 0};
  }
  return out;
}

namespace {

// Instants that should coincide across ranks, by time: the ends of the
// action that holds the all-reduce (else of whole steps), each with that
// action's duration (how long the rank waited in it shows there).
struct Mark {
  std::int64_t end, dur;
  bool operator<(const Mark& o) const { return end < o.end; }
};
std::vector<Mark> sync_marks(const TrainingSteps& ts, std::size_t i) {
  std::vector<Mark> v;
  for (auto& s : ts.per_rank[i]) {
    if (ts.sync_action.empty())
      v.push_back({s.end_ns, s.end_ns - s.begin_ns});
    else if (s.has_sync)
      v.push_back({s.sync_end_ns, s.sync_end_ns - s.sync_begin_ns});
  }
  std::sort(v.begin(), v.end());
  return v;
}

std::int64_t median_period(const std::vector<Mark>& marks) {
  std::vector<std::int64_t> gaps;
  for (std::size_t i = 1; i < marks.size(); ++i) gaps.push_back(marks[i].end - marks[i - 1].end);
  return median_of(std::move(gaps));
}

// Two ranks in one collective leave it together only when they waited
// alike: a rank blocked for long wakes up later (its thread was asleep)
// than the last one to arrive.  Durations within 200 us or 10% of each
// other count as alike.
bool alike(std::int64_t a, std::int64_t b) {
  const std::int64_t lo = std::min(a, b);
  return std::llabs(a - b) <= std::max<std::int64_t>(200'000, lo / 10);
}

struct Pair {
  std::int64_t diff;  // mark - the other rank's mark (the other's clock)
  std::int64_t dur, other_dur;
};

// Each mark paired with the nearest mark of `ref`, `shift` (the offset so
// far) taken off first; pairs further apart than tol are dropped.
void pair_marks(const std::vector<Mark>& marks, const std::vector<Mark>& ref, std::int64_t shift, std::int64_t tol,
                std::vector<Pair>& out) {
  for (const Mark& m : marks) {
    const std::int64_t t = m.end - shift;
    auto it = std::lower_bound(ref.begin(), ref.end(), Mark{t, 0});
    const Mark* best = nullptr;
    if (it != ref.end()) best = &*it;
    if (it != ref.begin() && (!best || t - (it - 1)->end < best->end - t)) best = &*(it - 1);
    if (best && std::llabs(best->end - t) < tol) out.push_back({m.end - best->end, m.dur, best->dur});
  }
}

}  // namespace

ClockEstimate estimate_offsets_from_collectives(const MergePlan& plan) {
  ClockEstimate est;
  est.reference_host = plan.reference_host;
  est.hosts.resize(plan.hosts.size());
  if (plan.hosts.size() < 2) return est;
  const TrainingSteps ts = training_steps(plan);
  est.action = ts.sync_action.empty() ? ts.step_action : ts.sync_action;
  auto refuse = [&](const std::string& why) {
    for (std::size_t h = 0; h < est.hosts.size(); ++h)
      if (h != est.reference_host) est.hosts[h].why_not = why;
    return est;
  };
  if (est.action.empty()) return refuse("no training steps to match");

  std::vector<std::vector<Mark>> marks(plan.ranks.size());
  std::vector<std::int64_t> tol(plan.ranks.size(), 0);
  for (std::size_t i = 0; i < plan.ranks.size(); ++i) {
    marks[i] = sync_marks(ts, i);
    const std::int64_t period = marks[i].size() >= 2 ? median_period(marks[i]) : 0;
    tol[i] = period > 0 ? period * 2 / 5 : 0;
  }

  // The wake-up latency of a rank that waited long, against one that did
  // not, seen between two ranks of one host (one clock): a correction for
  // hosts whose ranks never wait alike with the reference host's.
  {
    std::vector<std::int64_t> wake;
    for (std::size_t a = 0; a < plan.ranks.size(); ++a)
      for (std::size_t b = a + 1; b < plan.ranks.size(); ++b) {
        if (plan.ranks[a].host_index != plan.ranks[b].host_index || !tol[b]) continue;
        std::vector<Pair> ps;
        pair_marks(marks[a], marks[b], 0, tol[b], ps);
        for (auto& p : ps)
          if (!alike(p.dur, p.other_dur)) wake.push_back(p.dur > p.other_dur ? p.diff : -p.diff);
      }
    if (wake.size() >= 3) est.wake_latency_ns = median_of(std::move(wake));
  }

  bool ref_steps = false;
  for (std::size_t i = 0; i < plan.ranks.size(); ++i)
    ref_steps = ref_steps || (plan.ranks[i].host_index == est.reference_host && tol[i]);
  if (!ref_steps) return refuse("the reference host " + plan.hosts[est.reference_host].host + " has no training steps");

  for (std::size_t h = 0; h < plan.hosts.size(); ++h) {
    if (h == est.reference_host) continue;
    auto& e = est.hosts[h];
    // Two passes: match around the recorded clocks, then around the first
    // estimate (a residual of a third of a step would lose pairs at the edges).
    std::int64_t shift = 0;
    std::vector<Pair> pairs;
    for (int pass = 0; pass < 2; ++pass) {
      pairs.clear();
      for (std::size_t q = 0; q < plan.ranks.size(); ++q) {
        if (plan.ranks[q].host_index != h) continue;
        for (std::size_t r = 0; r < plan.ranks.size(); ++r)
          if (plan.ranks[r].host_index == est.reference_host && tol[r])
            pair_marks(marks[q], marks[r], shift, tol[r], pairs);
      }
      if (pairs.empty()) break;
      std::vector<std::int64_t> d;
      for (auto& p : pairs) d.push_back(p.diff);
      shift = median_of(std::move(d));
    }
    if (pairs.size() < 3) {
      e.why_not = "fewer than 3 " + est.action + " ends match the reference host's within 40% of a step";
      continue;
    }
    // Pairs of ranks that waited alike; else the others, corrected by the
    // wake-up latency; else uncorrected, and said so.
    std::vector<std::int64_t> diffs;
    for (auto& p : pairs)
      if (alike(p.dur, p.other_dur)) diffs.push_back(p.diff);
    e.alike_pairs = diffs.size();
    if (diffs.size() < 3) {
      diffs.clear();
      for (auto& p : pairs) {
        const std::int64_t sign = alike(p.dur, p.other_dur) ? 0 : p.dur > p.other_dur ? 1 : -1;
        diffs.push_back(p.diff - (est.wake_latency_ns >= 0 ? sign * est.wake_latency_ns : 0));
      }
      if (est.wake_latency_ns >= 0)
        e.wake_corrected = true;
      else
        e.role_bias = true;
    }
    const std::int64_t mid = median_of(diffs);
    std::vector<std::int64_t> dev;
    dev.reserve(diffs.size());
    for (auto d : diffs) dev.push_back(std::llabs(d - mid));
    std::sort(dev.begin(), dev.end());
    e.estimated = true;
    e.pairs = diffs.size();
    e.change_ns = -mid;
    e.offset_ns = plan.hosts[h].clock_offset_ns - mid;
    e.mad_ns = median_of(dev);
    e.stderr_ns = static_cast<std::int64_t>(1.2533 * 1.4826 * static_cast<double>(e.mad_ns) /
                                            std::sqrt(static_cast<double>(diffs.size())));
    e.p95_ns = dev[std::min(dev.size() - 1, (dev.size() * 95 + 99) / 100 - 1)];
  }
  return est;
}

void apply_clock_estimate(MergePlan& plan, const ClockEstimate& est, bool keep_measured) {
  for (std::size_t h = 0; h < plan.hosts.size() && h < est.hosts.size(); ++h) {
    const auto& e = est.hosts[h];
    if (!e.estimated) continue;
    if (keep_measured && plan.hosts[h].source == ClockSource::measured) continue;
    set_host_offset(plan, h, e.offset_ns, ClockSource::estimated, e.mad_ns);
    plan.hosts[h].stderr_ns = e.stderr_ns;
  }
}

}  // namespace lt
