#include "reports/diff/step_diff.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <tuple>

#include "reports/aggregate/kernel_names.h"
#include "reports/aggregate/sample_weight.h"
#include "reports/aggregate/steps.h"
#include "user/model/record_dispatch.h"
#include "user/text/code_points.h"
#include "user/text/numbers.h"
#include "user/text/utf8_text.h"

namespace lt {

namespace {

// A whole stack's key: its frames' names, outermost first, one a line
// (a name holds no newline: frames are "function (file:line)").
std::string stack_key(const LineSamples& ls, std::uint32_t stack) {
  std::string key;
  for (const auto f : ls.stacks[stack]) {
    if (!key.empty()) key += '\n';
    key += ls.lines[f];
  }
  return key;
}

std::vector<std::string> stack_frames(const std::string& key) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= key.size()) {
    const auto nl = key.find('\n', at);
    out.push_back(key.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  return out;
}

// Whether any train step overlaps [first, last] (steps in time order, apart).
bool overlaps_a_step(const std::vector<StepRecord>& steps, std::uint64_t first, std::uint64_t last) {
  auto st = std::upper_bound(steps.begin(), steps.end(), last,
                             [](std::uint64_t t, const StepRecord& r) { return t < r.begin_ns; });
  return st != steps.begin() && std::prev(st)->end_ns > first;
}

void collect_lines(const LineSamples& ls, std::uint32_t pid, const std::vector<StepRecord>& steps, std::size_t first,
                   std::size_t total, std::map<std::string, std::vector<double>>& to) {
  for (const auto& smp : ls.samples) {
    if (smp.pid != pid) continue;
    const auto i = step_at(steps, smp.ts_ns);
    if (!i) continue;
    auto& v = to[ls.lines[smp.line]];
    v.resize(total, 0.0);
    v[first + *i] += static_cast<double>(ls.period_ns) * smp.weight / 1e9;
  }
}

// Likewise per whole stack (keys formed once per stack).
void collect_stacks(const LineSamples& ls, std::uint32_t pid, const std::vector<StepRecord>& steps, std::size_t first,
                    std::size_t total, std::map<std::string, std::vector<double>>& to) {
  std::vector<std::vector<double>*> of_stack(ls.stacks.size(), nullptr);
  for (const auto& smp : ls.samples) {
    if (smp.pid != pid || smp.stack >= ls.stacks.size()) continue;
    const auto i = step_at(steps, smp.ts_ns);
    if (!i) continue;
    auto*& v = of_stack[smp.stack];
    if (!v) {
      v = &to[stack_key(ls, smp.stack)];
      v->resize(total, 0.0);
    }
    (*v)[first + *i] += static_cast<double>(ls.period_ns) * smp.weight / 1e9;
  }
}

// Each op's self time per train step of the process the op observer
// measured whole, added into `to` at that step's slot (`slot[i]`: the op
// rows' sample of step i, -1: none; `total`: the slots of every process).
void collect_ops(const OpCalls& ops, std::uint32_t pid, const std::vector<StepRecord>& steps,
                 const std::vector<std::ptrdiff_t>& slot, std::size_t total,
                 std::map<std::string, std::vector<double>>& to, std::map<std::string, std::uint64_t>& calls) {
  for (const auto& c : ops.calls) {
    if (c.pid != pid) continue;
    const auto i = step_at(steps, c.begin_ns);  // the step it began in
    if (!i || slot[*i] < 0) continue;
    const std::string& name = c.op < ops.names.size() && !ops.names[c.op].empty() ? ops.names[c.op] : "?";
    ++calls[name];
    auto& v = to[name];
    v.resize(total, 0.0);
    v[static_cast<std::size_t>(slot[*i])] += static_cast<double>(c.self_ns) / 1e9;
  }
}

// Each collective kind's blocked time per train step of the process: the
// calls issued in the step (a wait after the step's end is still its call's).
void collect_collectives(const ProcessComm& comm, const std::vector<StepRecord>& steps, std::size_t first,
                         std::size_t total, std::map<std::string, std::vector<double>>& to,
                         std::map<std::string, std::uint64_t>& calls) {
  for (const auto& c : comm.calls_kept) {
    if (!c.blocked_ns) continue;
    const auto i = step_at(steps, c.ts_ns);
    if (!i) continue;
    const std::string name = comm_kind_name(c.kind) + " (blocked)";
    ++calls[name];
    auto& v = to[name];
    v.resize(total, 0.0);
    v[first + *i] += static_cast<double>(*c.blocked_ns) / 1e9;
  }
}

// Whether the run's comm probes timed its calls: COMM_MARK records.
bool comm_timed(const CommReport* comm) {
  if (!comm) return false;
  for (const auto& p : comm->processes)
    if (p.marks) return true;
  return false;
}

// Each kernel's GPU time per train step of the process, by the step that
// launched it (its begin where the launch is unknown). Names are nsys's
// short ones, looked up once per name index.
void collect_kernels(const GpuReport& gpu, std::uint32_t pid, const std::vector<StepRecord>& steps, std::size_t first,
                     std::size_t total, std::map<std::string, std::vector<double>>& to,
                     std::map<std::uint32_t, std::string>& names, std::map<std::string, std::uint64_t>& calls) {
  for (const auto& k : gpu.slices) {
    if (k.pid != pid || k.kind != LT_GPU_KERNEL || k.end_ns < k.begin_ns) continue;
    const auto i = step_at(steps, k.launch_ns ? k.launch_ns : k.begin_ns);
    if (!i) continue;
    auto [it, fresh] = names.try_emplace(k.name);
    if (fresh) it->second = k.name < gpu.names.size() ? short_kernel_name(demangle_kernel(gpu.names[k.name])) : "?";
    ++calls[it->second];
    auto& v = to[it->second];
    v.resize(total, 0.0);
    v[first + *i] += static_cast<double>(k.end_ns - k.begin_ns) / 1e9;
  }
}

bool has_kernels(const GpuReport* gpu) {
  if (!gpu) return false;
  for (const auto& k : gpu->slices)
    if (k.kind == LT_GPU_KERNEL) return true;
  return false;
}

// Each action's own time (seconds, summed over its calls): its calls less
// the calls of other actions they hold on their thread. The intervals come
// in the order they ended, so a call's children are those ended before it
// that began inside it, not yet claimed by another: one stack per thread,
// no sort. Overlaps are clamped (an estimated end may pass its parent's).
std::vector<double> own_times(const std::vector<ActionInterval>& intervals, std::size_t actions) {
  std::vector<double> own(actions, 0.0);
  struct Open {
    std::uint32_t tid;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> done;  // ended, no parent yet: (begin, end)
  };
  std::vector<Open> threads;                   // a few threads: a linear search is cheapest
  constexpr std::size_t kMaxUnclaimed = 4096;  // top-level calls of a long run: the oldest go (no parent to find)
  for (const auto& iv : intervals) {
    auto t = std::find_if(threads.begin(), threads.end(), [&](const Open& o) { return o.tid == iv.tid; });
    if (t == threads.end()) t = threads.insert(threads.end(), Open{iv.tid, {}});
    auto& done = t->done;
    std::uint64_t held = 0;
    while (!done.empty() && done.back().first >= iv.begin_ns) {
      const auto [b, e] = done.back();
      done.pop_back();
      const std::uint64_t end = std::min(e, iv.end_ns);
      if (end > b) held += end - b;
    }
    const std::uint64_t total = iv.end_ns - iv.begin_ns;
    own[iv.action] += static_cast<double>(total > held ? total - held : 0) / 1e9;
    if (done.size() >= kMaxUnclaimed) done.erase(done.begin(), done.begin() + kMaxUnclaimed / 2);
    done.emplace_back(iv.begin_ns, iv.end_ns);
  }
  return own;
}

DiffSamples collect(const ActionsReport& r, const OpCalls* ops, const LineSamples* lines, const CommReport* comm,
                    const GpuReport* gpu) {
  DiffSamples s;
  std::vector<ProcessSteps> steps;
  for (const auto& p : r.processes) steps.push_back(step_records(p));
  std::size_t total = 0;
  for (const auto& ps : steps) total += ps.train.size();
  if (!ops || (ops->calls.empty() && !ops->probed))
    s.no_ops = "no op calls recorded (record by attaching, with --report ops)";
  else if (ops->calls.empty())
    s.no_ops = "its op times are the op probes' estimates (the op observer was not used)";
  if (!lines || lines->samples.empty() || !lines->period_ns)
    s.no_lines = "no stack samples recorded (record with --report advanced or verdict, or --rate HZ)";
  s.no_stacks = !s.no_lines.empty() || lines->keeps_stacks() ? s.no_lines : "the samples' stacks were not kept";
  if (!comm_timed(comm)) s.no_colls = "no c10d collective times recorded (record with --report comm)";
  if (!has_kernels(gpu)) s.no_kernels = "no GPU kernels recorded (a CUDA job, recorded with the GPU bridge)";
  // A process whose op probes counted calls inside its train steps (the
  // observer began later, or torch.compile handed back to the probes):
  // those calls' times are estimates, and not in `calls`.
  for (std::size_t i = 0; i < r.processes.size() && s.no_ops.empty(); ++i)
    if (auto pr = ops->probed_ranges.find(r.processes[i].meta.pid); pr != ops->probed_ranges.end())
      for (const auto& [from, to] : pr->second)
        if (overlaps_a_step(steps[i].train, from, to)) {
          s.no_ops = "pid " + std::to_string(r.processes[i].meta.pid) +
                     ": the op probes counted calls in its train steps (not the op observer: before it began, "
                     "or after torch.compile began): their times are estimates";
          break;
        }
  // The op rows' samples: the train steps the observer measured whole.
  std::vector<std::vector<std::ptrdiff_t>> op_slot(r.processes.size());
  if (s.no_ops.empty()) {
    for (std::size_t i = 0; i < r.processes.size(); ++i)
      for (const auto& st : steps[i].train)
        op_slot[i].push_back(ops->measured_whole(r.processes[i].meta.pid, st.begin_ns, st.end_ns)
                                 ? static_cast<std::ptrdiff_t>(s.op_steps++)
                                 : -1);
    if (!s.op_steps && total)
      s.no_ops = "the op observer measured no train step whole (it began after the last, or ended before the first)";
  }
  std::map<std::uint32_t, std::string> kernel_names;
  std::size_t first = 0;
  for (std::size_t i = 0; i < r.processes.size(); ++i) {
    const auto& p = r.processes[i];
    const ProcessSteps& ps = steps[i];
    if (s.no_ops.empty()) collect_ops(*ops, p.meta.pid, ps.train, op_slot[i], s.op_steps, s.ops, s.op_calls);
    if (s.no_lines.empty()) collect_lines(*lines, p.meta.pid, ps.train, first, total, s.lines);
    if (s.no_stacks.empty()) collect_stacks(*lines, p.meta.pid, ps.train, first, total, s.stacks);
    if (s.no_colls.empty())
      for (const auto& pc : comm->processes)
        if (pc.pid == p.meta.pid) collect_collectives(pc, ps.train, first, total, s.colls, s.coll_calls);
    if (s.no_kernels.empty())
      collect_kernels(*gpu, p.meta.pid, ps.train, first, total, s.kernels, kernel_names, s.kernel_calls);
    first += ps.train.size();
    for (const auto& st : ps.train) {
      s.steps.push_back(st.duration_ns() / 1e9);
      for (std::size_t i = 0; i < kStepParts; ++i) s.parts[i].push_back(st.part_ns[i] / 1e9);
    }
    // By action index first: a name lookup per interval was a third of
    // diff's time on a 1 M-event trace.
    // Sized by the calls counted (a bound: intervals are the calls in the
    // range), and moved where the name is new: no slack, no second copy.
    std::vector<std::vector<double>> by_index(p.actions.size());
    for (std::size_t i = 0; i < by_index.size(); ++i) by_index[i].reserve(p.actions[i].calls);
    for (const auto& iv : p.intervals) by_index[iv.action].push_back((iv.end_ns - iv.begin_ns) / 1e9);
    const std::vector<double> own = own_times(p.intervals, p.actions.size());
    for (std::size_t i = 0; i < own.size(); ++i)
      if (!by_index[i].empty()) s.action_own[p.actions[i].name] += own[i];
    for (std::size_t i = 0; i < by_index.size(); ++i) {
      if (by_index[i].empty()) continue;
      auto& to = s.actions[p.actions[i].name];
      if (to.empty())
        to = std::move(by_index[i]);
      else
        to.insert(to.end(), by_index[i].begin(), by_index[i].end());
    }
  }
  return s;
}

void append(DiffSamples& to, const DiffSamples& from) {
  to.steps.insert(to.steps.end(), from.steps.begin(), from.steps.end());
  for (std::size_t i = 0; i < kStepParts; ++i)
    to.parts[i].insert(to.parts[i].end(), from.parts[i].begin(), from.parts[i].end());
  for (const auto& [n, v] : from.actions) to.actions[n].insert(to.actions[n].end(), v.begin(), v.end());
  for (const auto& [n, t] : from.action_own) to.action_own[n] += t;
  for (const auto& [n, v] : from.ops) to.ops[n].insert(to.ops[n].end(), v.begin(), v.end());
  for (const auto& [n, v] : from.lines) to.lines[n].insert(to.lines[n].end(), v.begin(), v.end());
  for (const auto& [n, v] : from.stacks) to.stacks[n].insert(to.stacks[n].end(), v.begin(), v.end());
  for (const auto& [n, v] : from.colls) to.colls[n].insert(to.colls[n].end(), v.begin(), v.end());
  for (const auto& [n, v] : from.kernels) to.kernels[n].insert(to.kernels[n].end(), v.begin(), v.end());
  for (const auto& [n, c] : from.op_calls) to.op_calls[n] += c;
  to.op_steps += from.op_steps;
  for (const auto& [n, c] : from.coll_calls) to.coll_calls[n] += c;
  for (const auto& [n, c] : from.kernel_calls) to.kernel_calls[n] += c;
}

using PerStep = std::map<std::string, std::vector<double>>;

// Per-step rows (ops, lines) only when every run has them: an entry a run
// never had is 0 in each of its steps, but a run without the records is no
// evidence of anything. Returns the names (empty when not every run has
// them) and sets `why` to the first run's reason when some run has them.
// `slots`: the samples a run has of these rows (none: one per train step).
std::vector<std::string> align_per_step(std::vector<DiffSamples>& runs_a, std::vector<DiffSamples>& runs_b,
                                        PerStep DiffSamples::*rows, std::string DiffSamples::*no, std::string& why,
                                        std::size_t DiffSamples::*slots = nullptr) {
  std::string first;
  std::size_t with = 0;
  for (const auto* runs : {&runs_a, &runs_b})
    for (std::size_t i = 0; i < runs->size(); ++i) {
      const DiffSamples& run = (*runs)[i];
      if ((run.*no).empty())
        ++with;
      else if (first.empty())
        first = std::string(runs == &runs_a ? "A" : "B") + (runs->size() > 1 ? " run " + std::to_string(i + 1) : "") +
                ": " + run.*no;
    }
  if (with) why = first;
  std::map<std::string, bool> names;
  for (auto* runs : {&runs_a, &runs_b})
    for (auto& run : *runs) {
      if (!first.empty()) (run.*rows).clear();
      for (const auto& [n, v] : run.*rows) names[n] = true;
    }
  std::vector<std::string> out;
  for (const auto& [n, _] : names) {
    out.push_back(n);
    for (auto* runs : {&runs_a, &runs_b})
      for (auto& run : *runs) (run.*rows)[n].resize(slots ? run.*slots : run.steps.size(), 0.0);
  }
  return out;
}

// Which samples a row takes from a side.
struct RowOf {
  DiffRow::Kind kind;
  std::size_t part = 0;  // Kind::part
  std::string action;    // Kind::action, Kind::op: its name
  const std::vector<double>& of(const DiffSamples& s) const {
    static const std::vector<double> none;
    if (kind == DiffRow::Kind::step) return s.steps;
    if (kind == DiffRow::Kind::part) return s.parts[part];
    const auto& m = kind == DiffRow::Kind::op           ? s.ops
                    : kind == DiffRow::Kind::line       ? s.lines
                    : kind == DiffRow::Kind::stack      ? s.stacks
                    : kind == DiffRow::Kind::collective ? s.colls
                    : kind == DiffRow::Kind::kernel     ? s.kernels
                                                        : s.actions;
    auto it = m.find(action);
    return it == m.end() ? none : it->second;
  }
  // The train steps its time and calls are per: an op row's, those the op
  // observer measured whole.
  std::size_t steps(const DiffSamples& s) const { return kind == DiffRow::Kind::op ? s.op_steps : s.steps.size(); }
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double sum(const std::vector<double>& v) {
  double t = 0;
  for (double x : v) t += x;
  return t;
}

DiffRow row(std::string what, DiffRow::Kind kind, const std::vector<double>& a, const std::vector<double>& b,
            std::size_t steps_a, std::size_t steps_b) {
  DiffRow r;
  r.what = std::move(what);
  r.kind = kind;
  r.n_a = a.size();
  r.n_b = b.size();
  r.per_step_a = steps_a ? sum(a) / steps_a : 0;
  r.per_step_b = steps_b ? sum(b) / steps_b : 0;
  r.median_a = median(a);
  r.median_b = median(b);
  r.test = rank_test(a, b);
  return r;
}

std::string ms(double s) {
  return fixed(s * 1e3, 3);
}

std::string signed_ms(double s) {
  return signed_fixed(s * 1e3, 3);
}

// One number per run for a row: its typical time per train step there
// (the median sample times the samples per step); runs with no train step
// give none.
std::vector<double> typical_per_step(const std::vector<DiffSamples>& runs, const RowOf& what) {
  std::vector<double> out;
  for (const auto& run : runs) {
    const std::size_t steps = what.steps(run);
    if (!steps) continue;
    const auto& v = what.of(run);
    out.push_back(median(v) * static_cast<double>(v.size()) / static_cast<double>(steps));
  }
  return out;
}

}  // namespace

void OpCalls::add(const lt_event_header& h, const std::byte* p) {
  visit_record(h, p,
               overloaded{[&](const lt_event_header&, const lt_op_name_event& e) {
                            if (e.op >= names.size()) names.resize(e.op + 1);
                            names[e.op].assign(e.name, strnlen(e.name, sizeof e.name));
                          },
                          [&](const lt_event_header& h, const lt_op_span_event& e) {
                            if (e.flags & (LT_OP_SPAN_HIDDEN | LT_OP_SPAN_WATERMARK) || e.end_ns < h.ts_ns) return;
                            calls.push_back({h.pid, e.op, h.ts_ns, e.self_ns});
                            span_since_probe_.insert(h.pid);
                            // The bridge records from its answer, before the
                            // handshake's record: its first call may begin earlier.
                            if (before_first_call_.erase(h.pid)) {
                              auto& from = measured[h.pid].back().first;
                              from = std::min(from, h.ts_ns);
                            }
                          },
                          [&](const lt_event_header& h, const lt_op_observer_event& e) {
                            if (e.how != LT_OP_TIMES_OBSERVER) return;
                            auto& spans = measured[h.pid];
                            if (!e.final) {
                              spans.emplace_back(h.ts_ns, UINT64_MAX);
                              before_first_call_.insert(h.pid);
                            } else if (!spans.empty() && spans.back().second == UINT64_MAX) {
                              spans.back().second = h.ts_ns;
                            }
                          },
                          // The op probes' entries: where a process has them after the
                          // observer's first call (the observer took over later, under
                          // run/--all), the calls before were theirs.
                          [&](const lt_event_header& h, const lt_op_event&) { probed_at(h); },
                          [&](const lt_event_header& h, const lt_op_shapes_event&) { probed_at(h); }});
}

bool OpCalls::measured_whole(std::uint32_t pid, std::uint64_t begin, std::uint64_t end) const {
  const auto it = measured.find(pid);
  if (it == measured.end()) return true;  // no handshake record: measured throughout
  return std::any_of(it->second.begin(), it->second.end(),
                     [&](const auto& s) { return s.first <= begin && end <= s.second; });
}

void OpCalls::probed_at(const lt_event_header& h) {
  probed = true;
  auto& ranges = probed_ranges[h.pid];
  if (ranges.empty() || span_since_probe_.erase(h.pid)) ranges.emplace_back(h.ts_ns, h.ts_ns);
  ranges.back().first = std::min(ranges.back().first, h.ts_ns);
  ranges.back().second = std::max(ranges.back().second, h.ts_ns);
}

void LineSamples::add(const lt_event_header& h, const std::byte* p) {
  symbols_.add(h, p);
  visit_record(
      h, p,
      overloaded{[&](const lt_event_header&, const lt_sampler_info_event& e) {
                   if (e.flags & LT_SAMPLER_ON_CPU) period_ns = e.period_ns;
                 },
                 [&](const lt_event_header& h, const lt_py_sample_event& e) {
                   if (h.kind != LT_EV_PY_SAMPLE || !e.nframes || (e.flags & LT_SAMPLE_IN_PROBE)) return;
                   const std::uint32_t line = name_index(symbols_.frame(h.pid, e.frames[0]));  // the innermost
                   std::uint32_t stack = 0;
                   if (keep_stacks_) {
                     const std::size_t n = std::min<std::size_t>(e.nframes, LT_STACK_MAX);
                     std::vector<std::uint32_t> frames(n);
                     for (std::size_t i = 0; i < n; ++i)
                       frames[n - 1 - i] = i == 0 ? line : name_index(symbols_.frame(h.pid, e.frames[i]));
                     auto [it, fresh] =
                         stack_index_.try_emplace(std::move(frames), static_cast<std::uint32_t>(stacks.size()));
                     if (fresh) stacks.push_back(it->first);
                     stack = it->second;
                   }
                   samples.push_back({h.pid, line, h.ts_ns, stack, static_cast<std::uint32_t>(sample_weight(e))});
                 }});
}

std::uint32_t LineSamples::name_index(const StackFrame& f) {
  std::string name = f.file.empty() ? f.function : f.function + " (" + f.file + ":" + std::to_string(f.line) + ")";
  auto [it, fresh] = index_.try_emplace(std::move(name), static_cast<std::uint32_t>(lines.size()));
  if (fresh) lines.push_back(it->first);
  return it->second;
}

ActionsReport within(ActionsReport rep, const ExportRange& range, std::string* summary) {
  if (range.all()) return rep;
  const RangeFilter keep(range, rep);
  if (summary) *summary = keep.summary();
  for (auto& p : rep.processes) {
    const auto pid = p.meta.pid;
    std::erase_if(p.intervals, [&](const ActionInterval& iv) {
      return !keep.keeps(pid, iv.begin_ns, iv.begin_ns) || !keep.keeps(pid, iv.end_ns, iv.end_ns);
    });
  }
  return rep;
}

StepDiff diff_steps(const ActionsReport& a, const ActionsReport& b, double alpha, double min_effect) {
  return diff_runs({DiffRun{&a}}, {DiffRun{&b}}, alpha, min_effect);
}

StepDiff diff_steps(const std::vector<ActionsReport>& a, const std::vector<ActionsReport>& b, double alpha,
                    double min_effect) {
  std::vector<DiffRun> ra, rb;
  for (const auto& r : a) ra.push_back({&r});
  for (const auto& r : b) rb.push_back({&r});
  return diff_runs(ra, rb, alpha, min_effect);
}

DiffSamples collect_diff_samples(const DiffRun& r) {
  return collect(*r.actions, r.ops, r.lines, r.comm, r.gpu);
}

StepDiff diff_runs(const std::vector<DiffRun>& a, const std::vector<DiffRun>& b, double alpha, double min_effect) {
  std::vector<DiffSamples> runs_a, runs_b;
  for (const auto& r : a) runs_a.push_back(collect_diff_samples(r));
  for (const auto& r : b) runs_b.push_back(collect_diff_samples(r));
  return diff_samples(std::move(runs_a), std::move(runs_b), alpha, min_effect);
}

StepDiff diff_samples(std::vector<DiffSamples> runs_a, std::vector<DiffSamples> runs_b, double alpha,
                      double min_effect) {
  std::string no_ops, no_lines, no_stacks, no_colls, no_kernels;
  const auto op_names =
      align_per_step(runs_a, runs_b, &DiffSamples::ops, &DiffSamples::no_ops, no_ops, &DiffSamples::op_steps);
  const auto line_names = align_per_step(runs_a, runs_b, &DiffSamples::lines, &DiffSamples::no_lines, no_lines);
  const auto stack_keys = align_per_step(runs_a, runs_b, &DiffSamples::stacks, &DiffSamples::no_stacks, no_stacks);
  const auto coll_names = align_per_step(runs_a, runs_b, &DiffSamples::colls, &DiffSamples::no_colls, no_colls);
  const auto kernel_rows = align_per_step(runs_a, runs_b, &DiffSamples::kernels, &DiffSamples::no_kernels, no_kernels);
  // Every run's samples together; one run a side is its own (moved: the
  // test over runs, which needs them apart, is not used then).
  const bool by_run = runs_a.size() > 1 || runs_b.size() > 1;
  DiffSamples sa, sb;
  if (by_run) {
    for (const auto& r : runs_a) append(sa, r);
    for (const auto& r : runs_b) append(sb, r);
  } else {
    if (!runs_a.empty()) sa = std::move(runs_a.front());
    if (!runs_b.empty()) sb = std::move(runs_b.front());
  }
  StepDiff d;
  d.no_op_rows = no_ops;
  d.no_line_rows = no_lines;
  // Where the lines say why, the stacks need not say it again.
  d.no_stack_rows = no_stacks == no_lines ? "" : no_stacks;
  d.no_collective_rows = no_colls;
  d.no_kernel_rows = no_kernels;
  d.alpha = alpha;
  d.min_effect = min_effect;
  d.steps_a = sa.steps.size();
  d.steps_b = sb.steps.size();
  d.op_steps_a = sa.op_steps;
  d.op_steps_b = sb.op_steps;
  d.runs_a = runs_a.size();
  d.runs_b = runs_b.size();
  std::vector<RowOf> what = {{DiffRow::Kind::step}};
  for (std::size_t i = 0; i < kStepParts; ++i) what.push_back({DiffRow::Kind::part, i});
  std::map<std::string, bool> names;
  for (const auto& [n, v] : sa.actions) names[n] = true;
  for (const auto& [n, v] : sb.actions) names[n] = true;
  for (const auto& [n, _] : names) what.push_back({DiffRow::Kind::action, 0, n});
  for (const auto& n : op_names) what.push_back({DiffRow::Kind::op, 0, n});
  for (const auto& n : line_names) what.push_back({DiffRow::Kind::line, 0, n});
  for (const auto& n : stack_keys) what.push_back({DiffRow::Kind::stack, 0, n});
  for (const auto& n : coll_names) what.push_back({DiffRow::Kind::collective, 0, n});
  for (const auto& n : kernel_rows) what.push_back({DiffRow::Kind::kernel, 0, n});
  std::vector<DiffRow> rows;
  std::vector<DiffRow> stacks;  // kept apart until the floor is known
  for (const auto& w : what) {
    const std::string name = w.kind == DiffRow::Kind::step ? "train step"
                             : w.kind == DiffRow::Kind::part
                                 ? std::string("part: ") + step_part_name(static_cast<StepPart>(w.part))
                             : w.kind == DiffRow::Kind::op         ? "op: " + w.action
                             : w.kind == DiffRow::Kind::line       ? "line: " + w.action
                             : w.kind == DiffRow::Kind::stack      ? "stack: " + stack_frames(w.action).back()
                             : w.kind == DiffRow::Kind::collective ? "collective: " + w.action
                             : w.kind == DiffRow::Kind::kernel     ? "kernel: " + w.action
                                                                   : w.action;
    const std::size_t steps_a = w.steps(sa), steps_b = w.steps(sb);
    DiffRow r = row(name, w.kind, w.of(sa), w.of(sb), steps_a, steps_b);
    r.steps_a = steps_a;
    r.steps_b = steps_b;
    // Calls per train step, where the row counts calls.
    auto per_step = [](std::uint64_t calls, std::size_t steps) {
      return steps ? static_cast<double>(calls) / static_cast<double>(steps) : -1.0;  // no steps: '-'
    };
    auto count = [](const std::map<std::string, std::uint64_t>& m, const std::string& k) {
      const auto it = m.find(k);
      return it == m.end() ? std::uint64_t{0} : it->second;
    };
    // The calls a side's samples counted for this row's kind, if it counts.
    auto counted = [&w](const DiffSamples& x) -> const std::map<std::string, std::uint64_t>* {
      switch (w.kind) {
        case DiffRow::Kind::op:
          return &x.op_calls;
        case DiffRow::Kind::collective:
          return &x.coll_calls;
        case DiffRow::Kind::kernel:
          return &x.kernel_calls;
        default:
          return nullptr;
      }
    };
    r.own_a = r.per_step_a;
    r.own_b = r.per_step_b;
    if (w.kind == DiffRow::Kind::action) {
      r.calls_a = per_step(r.n_a, d.steps_a);
      r.calls_b = per_step(r.n_b, d.steps_b);
      auto own = [&w](const DiffSamples& x, std::size_t steps) {
        const auto it = x.action_own.find(w.action);
        return it == x.action_own.end() || !steps ? 0.0 : it->second / static_cast<double>(steps);
      };
      r.own_a = own(sa, d.steps_a);
      r.own_b = own(sb, d.steps_b);
    } else if (counted(sa)) {
      r.calls_a = per_step(count(*counted(sa), w.action), steps_a);
      r.calls_b = per_step(count(*counted(sb), w.action), steps_b);
    }
    if (d.by_run()) {
      const RunTest t = run_test(typical_per_step(runs_a, w), typical_per_step(runs_b, w));
      r.test = RankTest{0, t.df > 0 ? t.p : 1.0, t.shift, t.lo, t.hi};
    }
    if (w.kind == DiffRow::Kind::stack) {
      r.frames = stack_frames(w.action);
      stacks.push_back(std::move(r));
      continue;
    }
    // Rows with no time on either side say nothing.
    if (w.kind == DiffRow::Kind::step || r.per_step_a != 0 || r.per_step_b != 0) rows.push_back(std::move(r));
  }
  // The floor per step, and per sample for each row (an action called k
  // times a step moves the step k times its shift). Over runs the shift is
  // per step already, and it is the shift that must reach the floor: the
  // interval already holds the spread between runs (the interval's end
  // there cost a 2 % change most of its power at five runs a side).
  const double floor = min_effect * rows[0].median_a;
  auto pooled_per_step = [](const DiffRow& r) {
    return r.steps_a + r.steps_b
               ? (r.per_step_a * static_cast<double>(r.steps_a) + r.per_step_b * static_cast<double>(r.steps_b)) /
                     static_cast<double>(r.steps_a + r.steps_b)
               : 0;
  };
  // Whole stacks under the floor are no rows: most stacks of a fit hold a
  // sample or two, and their lines' rows already show them.
  for (auto& r : stacks) {
    if (pooled_per_step(r) >= floor && (r.per_step_a != 0 || r.per_step_b != 0))
      rows.push_back(std::move(r));
    else
      ++d.stacks_under_floor;
  }  // Rows whose time per step, both sides together, is under the floor are
  // shown but not tested: a change that small gets no verdict, and each
  // tested row costs the others power under Holm (38 rows, most of them
  // hooks of a few us, cost a real 2 % step change its verdict in 7 of 20
  // draws of bench/diff_aa.py). Filtering on both sides pooled does not
  // look at which side is which, so the error rate holds.
  std::vector<double> p;
  std::vector<std::size_t> tested;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i > 0 && pooled_per_step(rows[i]) < floor) continue;
    const DiffRow& r = rows[i];
    tested.push_back(i);
    p.push_back(r.n_a && r.n_b ? r.test.p : 1.0);
  }
  // The train step is the question asked first: it gets half of alpha to
  // itself, and the rows that say where a change is share the other half
  // under Holm (Bonferroni over the two families: the error rate holds).
  // Under Holm alone, over runs with ~10 rows tested, the step needed
  // p < 0.005 on a t with ~6 degrees of freedom, and a 2 % change was
  // found in 7 of 20 draws. Printed: the p-values times 2, so that
  // "< alpha" reads as ever.
  std::vector<double> adj(p.size(), 1.0);
  if (!p.empty()) {
    adj[0] = std::min(1.0, 2 * p[0]);
    const auto rest = holm(std::vector<double>(p.begin() + 1, p.end()));
    for (std::size_t k = 0; k < rest.size(); ++k) adj[k + 1] = std::min(1.0, 2 * rest[k]);
  }
  d.tested = tested.size();
  for (std::size_t k = 0; k < tested.size(); ++k) {
    DiffRow& r = rows[tested[k]];
    r.tested = true;
    r.p_holm = adj[k];
    if (!r.n_a || !r.n_b || adj[k] >= alpha || !r.steps_a) continue;
    const double per_step = d.by_run() ? 1.0 : static_cast<double>(r.n_a) / static_cast<double>(r.steps_a);
    const double up = d.by_run() ? r.test.shift : r.test.lo * per_step;
    const double down = d.by_run() ? r.test.shift : r.test.hi * per_step;
    if (up >= floor) r.verdict = 1;
    if (down <= -floor) r.verdict = -1;
  }
  // By the change of own time: an action that holds the one that moved
  // (epoch, batch, optimizer_step around training_step) changes little of
  // its own and sorts below it.
  std::stable_sort(rows.begin() + 1, rows.end(), [](const DiffRow& x, const DiffRow& y) {
    return std::fabs(x.own_b - x.own_a) > std::fabs(y.own_b - y.own_a);
  });
  d.rows = std::move(rows);
  return d;
}

std::string render_step_diff(const StepDiff& d, const std::string& label_a, const std::string& label_b) {
  auto side = [](const std::string& label, std::size_t runs, std::size_t steps) {
    return utf8_text(label) + " (" + (runs > 1 ? std::to_string(runs) + " runs, " : "") + std::to_string(steps) +
           " train steps)";
  };
  std::string out = "ltrace-bpf diff: A = " + side(label_a, d.runs_a, d.steps_a) +
                    ", B = " + side(label_b, d.runs_b, d.steps_b) + "\n";
  // How the p column is adjusted (the same words in both modes).
  char adjust[200];
  std::snprintf(adjust, sizeof adjust,
                "p: the train step's times 2 (half of alpha is its own), the other %zu rows tested Holm-corrected "
                "times 2 ('-': under the floor per step, not tested)",
                d.tested ? d.tested - 1 : 0);
  char head[2000];
  if (d.by_run())
    std::snprintf(
        head, sizeof head,
        "Over runs: each run's typical time per step for each row (its median step, part, op self time, line or "
        "collective; "
        "an action's median call times its calls per step); %s, two-sided; %s; shift: B - A per step, 95%% interval; "
        "'~': not significant (p >= %.2f), or the shift is within %.1f%% of A's median step. Times in "
        "ms; own change: of an action's time less the actions it holds (other rows: their own time already), by "
        "which the rows are sorted; calls/step: the calls in the train steps per step (actions: every call of the "
        "range).\n\n",
        d.runs_a > 1 && d.runs_b > 1 ? "Welch's t" : "Student's t with the variance of the side with runs", adjust,
        d.alpha, 100 * d.min_effect);
  else
    std::snprintf(head, sizeof head,
                  "Mann-Whitney U, two-sided, per step (step, parts, ops: self time, lines, collectives: blocked time, "
                  "kernels: GPU time) or per call (actions); %s; shift: Hodges-Lehmann "
                  "median of B - A per sample, 95%% interval; '~': not significant (p >= %.2f), or the interval "
                  "reaches within %.1f%% of A's median step of no change. One run a side: what differs between two "
                  "runs of one job is not in this test (on our 2-CPU test machine two runs of one fit differed by up "
                  "to 3.5%% of the step: docs/benchmarks.md); several runs a side (A1 A2 ... --vs B1 B2 ...) put "
                  "it in. Times in ms; own change: of an action's time less "
                  "the actions it holds (other rows: their own time already), by which the rows are sorted; "
                  "calls/step: the calls in the train steps per step (actions: every call of the range).\n\n",
                  adjust, d.alpha, 100 * d.min_effect);
  out += head;
  // Welch's t on 2 or 3 numbers a side: its power is low, and a machine
  // whose load changed between the sides' runs reads as a change (bench/
  // diff_aa.py met its goals at 4 a side).
  if (d.by_run() && std::min(d.runs_a, d.runs_b) < 4)
    out += "Few runs: " + std::to_string(std::min(d.runs_a, d.runs_b)) +
           " on a side; under 4 a side the test finds little, and a change in the machine's load between the "
           "sides' runs reads as a change of the job.\n\n";
  const double step_a = d.step() ? d.step()->per_step_a : 0;
  std::vector<std::vector<std::string>> table = {{"", "Row", "A per step", "B per step", "change per step",
                                                  "own change", "of A's step",
                                                  d.by_run() ? "shift per step (95% CI)" : "shift per sample (95% CI)",
                                                  "p (adj.)", "calls/step A", "calls/step B"}};
  std::vector<const DiffRow*> stacks;  // the stack rows, numbered in table order
  for (const auto& r : d.rows) {
    const double change = r.per_step_b - r.per_step_a;
    char pct[32], pv[32];
    std::snprintf(pct, sizeof pct, "%+.2f%%", step_a > 0 ? 100 * change / step_a : 0.0);
    if (!r.tested)
      std::snprintf(pv, sizeof pv, "-");
    else
      std::snprintf(pv, sizeof pv, r.p_holm < 0.001 ? "%.1e" : "%.3f", r.p_holm);
    const std::string mark = r.verdict > 0 ? "slower" : r.verdict < 0 ? "faster" : "~";
    const std::string shift =
        !r.n_a || !r.n_b ? (r.n_a ? "gone in B" : "new in B")
                         : signed_ms(r.test.shift) + " (" + signed_ms(r.test.lo) + ", " + signed_ms(r.test.hi) + ")";
    std::string what = r.what;
    if (r.kind == DiffRow::Kind::stack) {
      stacks.push_back(&r);
      what = "stack #" + std::to_string(stacks.size()) + ": " + (r.frames.empty() ? "?" : r.frames.back());
    }
    auto calls = [](double c) { return c < 0 ? std::string("-") : fixed(c, 2); };
    const std::string own = r.kind == DiffRow::Kind::step ? "-" : signed_ms(r.own_b - r.own_a);
    table.push_back({mark, utf8_text(what), ms(r.per_step_a), ms(r.per_step_b), signed_ms(change), own, pct, shift, pv,
                     calls(r.calls_a), calls(r.calls_b)});
  }
  std::vector<std::size_t> width(table[0].size(), 0);
  for (const auto& line : table)
    for (std::size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], cp_len(line[i]));
  for (const auto& line : table) {
    std::string l;
    for (std::size_t i = 0; i < line.size(); ++i) {
      // Text left, numbers right.
      l += i <= 1 ? pad_right(line[i], width[i]) : pad_left(line[i], width[i]);
      l += i + 1 < line.size() ? "  " : "";
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  }
  // What the estimated or partial rows stand for, under the table, once
  // per kind that has rows.
  static constexpr std::pair<DiffRow::Kind, const char*> kNotes[] = {
      {DiffRow::Kind::collective,
       "collective: the time a thread of the process was blocked waiting for the c10d calls of that kind issued in "
       "each step (part of the step's backward or other parts, not in addition to them)."},
      {DiffRow::Kind::kernel,
       "kernel: the GPU time of the kernels of that name (nsys's short name) launched in each step, on any stream "
       "(concurrent kernels each count: not a part of the step's wall time)."},
      {DiffRow::Kind::line,
       "line: the innermost Python line of the stack samples in each step, times the sampling period: estimates."},
      {DiffRow::Kind::stack,
       "stack: a whole Python stack of the samples in each step (below, by number), times the sampling period: "
       "estimates; only the stacks at or over the floor per step are rows."},
  };
  for (const auto& note : kNotes) {
    const DiffRow::Kind kind = note.first;  // a plain variable: clang 14 captures no structured binding
    if (std::any_of(d.rows.begin(), d.rows.end(), [kind](const DiffRow& r) { return r.kind == kind; }))
      out += std::string(note.second) + "\n";
  }
  // Op rows over fewer steps than the table's: the observer's span.
  if ((d.op_steps_a < d.steps_a || d.op_steps_b < d.steps_b) &&
      std::any_of(d.rows.begin(), d.rows.end(), [](const DiffRow& r) { return r.kind == DiffRow::Kind::op; }))
    out += "op: per train step the op observer measured whole: A " + std::to_string(d.op_steps_a) + " of " +
           std::to_string(d.steps_a) + ", B " + std::to_string(d.op_steps_b) + " of " + std::to_string(d.steps_b) +
           " (an attach's observer begins after its handshake; a watch capture's ends with its window).\n";
  // The stacks, outermost frame first; where a stack begins as the one
  // before it, those frames are said once.
  if (!stacks.empty()) {
    out += "\nStacks (outermost frame first";
    if (d.stacks_under_floor) out += "; " + std::to_string(d.stacks_under_floor) + " more under the floor are not rows";
    out += "):\n";
  } else if (d.stacks_under_floor) {
    out += "stack: none of the " + std::to_string(d.stacks_under_floor) +
           " whole stacks sampled is at or over the floor per step (their lines' rows show them).\n";
  }
  for (std::size_t k = 0; k < stacks.size(); ++k) {
    const auto& frames = stacks[k]->frames;
    std::size_t same = 0;
    if (k > 0) {
      const auto& prev = stacks[k - 1]->frames;
      while (same < frames.size() && same < prev.size() && frames[same] == prev[same]) ++same;
      if (same == frames.size()) same = 0;  // (distinct stacks: never all of it)
    }
    out += "#" + std::to_string(k + 1) + ":";
    if (same)
      out += (same == 1 ? std::string(" the first frame") : " the first " + std::to_string(same) + " frames") +
             " as #" + std::to_string(k) + "'s, then";
    out += "\n";
    for (std::size_t i = same; i < frames.size(); ++i) out += "    " + utf8_text(frames[i]) + "\n";
  }
  return out;
}

}  // namespace lt
