#include "reports/verdict/findings.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "reports/aggregate/run_queue.h"
#include "reports/aggregate/step_batches.h"
#include "reports/aggregate/steps.h"
#include "reports/verdict/between_steps.h"
#include "reports/verdict/gpu_findings.h"
#include "reports/verdict/loader_workers.h"
#include "user/text/utf8_text.h"

namespace lt {

std::string finding_pct(double share) {
  char b[64];
  std::snprintf(b, sizeof b, "%.1f%%", 100 * share);
  return b;
}

std::string finding_ms(double ms) {
  char b[64];
  std::snprintf(b, sizeof b, "%.2f ms", ms);
  return b;
}

namespace {

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}
std::string pct(double share) {
  return finding_pct(share);
}
std::string msf(double ms) {
  return finding_ms(ms);
}

// The median step the evidence says: of an even count, the lower of the
// two middle values, a duration some step took (their mean, of a fit whose
// steps alternate between two durations, is one none took).
double median_step(std::vector<double> v) {
  if (v.empty()) return 0;
  auto mid = v.begin() + static_cast<std::ptrdiff_t>((v.size() - 1) / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// The median for the statistics (the outliers' bound and its spread): of
// an even count, the mean of the two middle values. The lower one there
// would put the spread of a fit split half and half between two step
// times at the jitter of one half, and half its steps past the bound.
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// What checkpointing costs a process: the intervals that are its time.
// A callback hook that holds a Trainer.save_checkpoint (Lightning 2.5+ has
// that action) is checkpoint time, whole (the save, and removing the one it
// replaces); a save outside every such hook (a save_checkpoint called by
// hand) too. Without the action (older Lightning), the hooks of callbacks
// whose name says Checkpoint (ModelCheckpoint, and subclasses, which keep
// "Checkpoint" in their names by custom). Hooks never nest in each other.
struct Checkpoints {
  std::vector<char> of;  // per interval of the process: 1 = checkpoint time
  double ms = 0, longest_ms = 0, save_ms = 0;
  std::size_t calls = 0, saves = 0;
  std::uint64_t begin_ns = UINT64_MAX, end_ns = 0;
  bool by_name = false;  // no save_checkpoint action: the hooks by their names
};

Checkpoints checkpoints(const ProcessActions& p) {
  Checkpoints c;
  c.of.assign(p.intervals.size(), 0);
  // The saves per thread, by begin.
  std::map<std::uint32_t, std::vector<std::pair<std::uint64_t, std::uint64_t>>> saves;
  for (const auto& iv : p.intervals)
    if (p.actions[iv.action].name == "save_checkpoint") {
      saves[iv.tid].emplace_back(iv.begin_ns, iv.end_ns);
      c.save_ms += (iv.end_ns - iv.begin_ns) / 1e6;
      ++c.saves;
    }
  for (auto& [tid, v] : saves) std::sort(v.begin(), v.end());
  c.by_name = saves.empty();
  std::set<std::tuple<std::uint32_t, std::uint64_t, std::uint64_t>>
      held;  // (tid, begin, end) of saves in a marked hook
  for (std::size_t i = 0; i < p.intervals.size(); ++i) {
    const auto& iv = p.intervals[i];
    const std::string& name = p.actions[iv.action].name;
    if (name.rfind("[Callback]", 0) != 0) continue;
    bool mine = false;
    if (c.by_name) {
      mine = name.find("Checkpoint") != std::string::npos;
    } else if (auto it = saves.find(iv.tid); it != saves.end()) {
      auto s = std::lower_bound(it->second.begin(), it->second.end(), std::make_pair(iv.begin_ns, std::uint64_t{0}));
      mine = s != it->second.end() && s->second <= iv.end_ns;
      if (mine) held.emplace(iv.tid, s->first, s->second);
    }
    c.of[i] = mine;
  }
  for (std::size_t i = 0; i < p.intervals.size(); ++i) {
    const auto& iv = p.intervals[i];
    if (!c.of[i] && p.actions[iv.action].name == "save_checkpoint") {
      c.of[i] = !held.count({iv.tid, iv.begin_ns, iv.end_ns});
    }
    if (!c.of[i]) continue;
    const double ms = (iv.end_ns - iv.begin_ns) / 1e6;
    c.ms += ms;
    c.longest_ms = std::max(c.longest_ms, ms);
    ++c.calls;
    c.begin_ns = std::min(c.begin_ns, iv.begin_ns);
    c.end_ns = std::max(c.end_ns, iv.end_ns);
  }
  return c;
}

// The train step holding the whole of an interval, or null (the steps in
// time order: a binary search on their begins).
const StepRecord* step_holding(const std::vector<StepRecord>& t, const ActionInterval& iv) {
  auto it = std::upper_bound(t.begin(), t.end(), iv.begin_ns,
                             [](std::uint64_t x, const StepRecord& s) { return x < s.begin_ns; });
  if (it == t.begin() || iv.end_ns > (it - 1)->end_ns) return nullptr;
  return &*(it - 1);
}

// Hook and callback actions' time inside train steps, by name (exclusive
// of nothing: a hook rarely holds another). Checkpoint time: the
// checkpoints finding's, apart (per step, in `checkpoint_ms`), not in the
// list.
std::vector<std::pair<std::string, double>> top_hooks(const ProcessActions& p, const std::vector<StepRecord>& t,
                                                      const Checkpoints& ckpt, std::vector<double>& checkpoint_ms) {
  checkpoint_ms.assign(t.size(), 0.0);
  std::map<std::string, double> by;
  for (std::size_t i = 0; i < p.intervals.size(); ++i) {
    const auto& iv = p.intervals[i];
    const std::string& name = p.actions[iv.action].name;
    if (step_part_of(name) != StepPart::hooks && !ckpt.of[i]) continue;
    if (const StepRecord* st = step_holding(t, iv))
      (ckpt.of[i] ? checkpoint_ms[static_cast<std::size_t>(st - t.data())] : by[name]) +=
          (iv.end_ns - iv.begin_ns) / 1e6;
  }
  std::vector<std::pair<std::string, double>> out(by.begin(), by.end());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (out.size() > 3) out.resize(3);
  return out;
}

// The loop thread's hook actions inside the train steps (ModelCheckpoint's
// apart), merged where they nest: where a cause with its own finding (gc,
// logging) spent the hooks' time.
Spans hook_spans(const ProcessActions& p, const std::vector<StepRecord>& t, const Checkpoints& ckpt,
                 std::uint32_t tid) {
  Spans v;
  for (std::size_t i = 0; i < p.intervals.size(); ++i) {
    const auto& iv = p.intervals[i];
    if (ckpt.of[i] || step_part_of(p.actions[iv.action].name) != StepPart::hooks) continue;
    if (tid && iv.tid && iv.tid != tid) continue;
    if (!step_holding(t, iv)) continue;  // not inside a train step
    v.emplace_back(iv.begin_ns, iv.end_ns);
  }
  return merged_spans(std::move(v));
}

// Pauses' time inside the spans (ms), on the loop thread.
double pauses_within(const Spans& spans, const std::vector<GcPause>& pauses, std::uint32_t tid) {
  std::uint64_t ns = 0;
  for (const auto& x : pauses)
    if (!tid || !x.tid || x.tid == tid) ns += covered(spans, x.begin_ns, x.end_ns);
  return ns / 1e6;
}

// Samples inside the spans x the period (ms, an estimate), on the loop
// thread where the samples say theirs.
template <typename Sample>
double samples_within(const Spans& spans, const std::vector<Sample>& samples, std::uint64_t period_ns,
                      std::uint32_t tid = 0) {
  std::uint64_t periods = 0;
  for (const auto& x : samples) {
    if constexpr (requires { x.tid; })
      if (tid && x.tid != tid) continue;
    if (span_at(spans, x.ts_ns)) periods += x.weight;
  }
  return static_cast<double>(periods) * static_cast<double>(period_ns) / 1e6;
}

// The loop thread's run-queue wait over the train steps, as a share of the
// time between the samples.
void cpu_contention(const ProcessActions& p, const std::vector<StepRecord>& t, std::uint32_t loop_tid,
                    const ProcessDeviceStats& stats, std::vector<Finding>& out) {
  const RunQueue rq = run_queue_in_steps(p, t, loop_tid, stats);
  if (!rq || rq.share() < kContention) return;
  // The steps between the two samples: the wait per step at stake.
  const std::size_t steps = rq.steps_within(t);
  if (!steps) return;
  out.push_back({"cpu contention", p.meta.pid, rq.wait / 1e6 / static_cast<double>(steps), rq.share(),
                 "the training loop's thread was runnable but waiting for a CPU " + pct(rq.share()) + " of " +
                     msf(rq.wall / 1e6) + " of train steps (" + msf(rq.wait / 1e6) + " on its run queue; on a CPU " +
                     msf(rq.cpu / 1e6) + "; the kernel's schedstat of the thread, sampled every 100 ms)",
                 "other processes or threads share its CPUs: give the job cores of its own (taskset, cgroup cpusets, "
                 "Slurm --exclusive or --cpus-per-task), fewer DataLoader workers or torch threads than cores "
                 "(torch.set_num_threads), or find what else runs there (top, `ltrace-bpf ps`)"});
}

// Resident memory rising over the train steps after the first 10 % (the
// warm-up: allocator pools, lazily built state).
void memory_growth(const ProcessActions& p, const std::vector<StepRecord>& t, std::int64_t offset,
                   const ProcessDeviceStats& stats, std::vector<Finding>& out) {
  const std::size_t first = t.size() / 10;
  const std::uint64_t from = t[first].begin_ns, to = t.back().end_ns;
  // Against the step a sample falls in, not its time: per step is what a
  // leak grows by, and a long step (a 1 s stall) grows nothing more.
  std::vector<std::pair<double, double>> xy;  // step (from `first`), MiB
  for (const auto& [ts, mb] : stats.rss_mb) {
    if (ts < from || ts > to) continue;
    const auto it =
        std::upper_bound(t.begin(), t.end(), ts, [](std::uint64_t x, const StepRecord& s) { return x < s.begin_ns; });
    xy.emplace_back(static_cast<double>(it - t.begin()) - 1 - static_cast<double>(first), mb);
  }
  if (xy.size() < 8) return;
  double mx = 0, my = 0;
  for (const auto& [x, y] : xy) mx += x, my += y;
  mx /= static_cast<double>(xy.size());
  my /= static_cast<double>(xy.size());
  double sxy = 0, sxx = 0;
  for (const auto& [x, y] : xy) sxy += (x - mx) * (y - my), sxx += (x - mx) * (x - mx);
  if (sxx <= 0) return;
  const double slope = sxy / sxx;  // MiB per step
  const double steps = static_cast<double>(t.size() - 1 - first);
  const double start = my - slope * mx, growth = slope * steps;
  const std::size_t q = xy.size() / 4;
  std::vector<double> head, tail;
  for (std::size_t i = 0; i < q; ++i) head.push_back(xy[i].second), tail.push_back(xy[xy.size() - 1 - i].second);
  if (growth < kGrowthMiB || growth < kGrowthShare * start || median(tail) <= median(head)) return;
  out.push_back({"memory growth", p.meta.pid, 0, growth / start,
                 "resident memory grew from " + fmt("%.1f", start) + " to " + fmt("%.1f", start + growth) +
                     " MiB over train steps " + std::to_string(t[first].index + offset) + "-" +
                     std::to_string(t.back().index + offset) + " (" + fmt("%+.2f", slope) +
                     " MiB per step; a least-squares line through " + std::to_string(xy.size()) +
                     " samples of /proc against their steps)",
                 "something is kept every step: outputs or losses held as tensors (.item() / .detach() them), lists "
                 "that grow in the module or a callback, a logger that buffers; `ltrace-bpf --profile-memory` or "
                 "tracemalloc say where"});
}

// Recompiles inside the train and validation steps: each one's duration
// (Dynamo's own) in the train step it began in (`per_step`, ms) or in
// `in_validation` (ms), so that the outliers and validation findings leave
// them out; and the finding, per train step as validation's is.
void recompiles(const ProcessActions& p, const ProcessSteps& s, double total_ms, const CompilesProcess& c,
                std::vector<double>& per_step, double& in_validation, std::vector<Finding>& out) {
  const auto& t = s.train;
  double ms = 0, val_total = 0;
  for (const auto& v : s.validation) val_total += v.duration_ns() / 1e6;
  std::size_t count = 0;
  std::map<std::string, int> reasons, functions;
  for (const auto& note : c.compiles) {
    if (note.reason.empty() || note.start_ns <= 0 || note.duration_us < 0) continue;
    const auto ts = static_cast<std::uint64_t>(note.start_ns);
    const double d = static_cast<double>(note.duration_us) / 1e3;
    if (const auto i = step_at(t, ts))
      per_step[*i] += d;
    else if (step_at(s.validation, ts))
      in_validation += d;
    else
      continue;
    ms += d;
    ++count;
    ++reasons[note.reason.substr(0, note.reason.find('\n'))];
    ++functions[note.function];
  }
  total_ms += val_total;  // of the train and validation steps
  if (!count || ms / total_ms < kRecompiles) return;
  auto top = [](const std::map<std::string, int>& m) {
    return std::max_element(m.begin(), m.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  };
  const auto reason = top(reasons), function = top(functions);
  std::int64_t breaks = 0;
  for (const auto& g : c.graph_breaks) breaks += g.count;
  const double n = static_cast<double>(t.size());
  out.push_back(
      {"recompiles", p.meta.pid, ms / n, ms / total_ms,
       std::to_string(count) + " recompile(s) inside the train and validation steps took " + msf(ms) + " (" +
           pct(ms / total_ms) + " of the steps' time; Dynamo's own durations), most of " + utf8_text(function->first) +
           "; the most frequent reason (" + std::to_string(reason->second) + "x): " + utf8_text(reason->first) +
           (breaks > 0
                ? "; graph breaks: " + std::to_string(breaks) + " (" + utf8_text(c.graph_breaks.front().reason) + ")"
                : ""),
       "keep the guarded input stable (pad or bucket the shapes that change), or mark it dynamic "
       "(torch._dynamo.mark_dynamic(x, dim), torch.compile(dynamic=True)); TORCH_LOGS=recompiles names "
       "each failed guard"});
}

// Graph breaks: the samples taken inside a compiled function but outside
// its graphs (Python Dynamo left to run eagerly between them, at the
// breaks), counted in the train step they fall in; a finding only where
// Dynamo says it met graph breaks.  An estimate: samples x the period.
void graph_breaks(const ProcessActions& p, const ProcessSteps& s, double total_ms, const CompilesProcess& c,
                  std::vector<Finding>& out) {
  std::int64_t breaks = 0;
  for (const auto& g : c.graph_breaks) breaks += g.count;
  for (const auto& note : c.compiles) breaks = std::max<std::int64_t>(breaks, note.graph_breaks);
  if (breaks <= 0 || c.eager.empty() || !c.period_ns) return;
  const auto& t = s.train;
  std::vector<std::uint64_t> by_site(c.eager_sites.size(), 0);
  std::uint64_t periods = 0, samples = 0;
  std::size_t k = 0;
  for (const auto& x : c.eager) {
    while (k < t.size() && t[k].end_ns <= x.ts_ns) ++k;
    if (k == t.size()) break;
    if (x.ts_ns < t[k].begin_ns) continue;  // between two steps
    periods += x.weight;
    ++samples;
    if (x.site < by_site.size()) by_site[x.site] += x.weight;
  }
  const double ms = static_cast<double>(periods * c.period_ns) / 1e6;
  if (!samples || ms / total_ms < kGraphBreaks) return;
  const auto top = static_cast<std::size_t>(std::max_element(by_site.begin(), by_site.end()) - by_site.begin());
  std::string reasons;
  for (std::size_t i = 0; i < c.graph_breaks.size() && i < 2; ++i) {
    std::string r = c.graph_breaks[i].reason.substr(0, c.graph_breaks[i].reason.find('\n'));
    if (r.size() > 100) r = r.substr(0, 97) + "...";
    reasons += (i ? "; " : ": ") + utf8_text(r) + " (" + std::to_string(c.graph_breaks[i].count) + "x)";
  }
  const double n = static_cast<double>(t.size());
  out.push_back({"graph_breaks", p.meta.pid, ms / n, ms / total_ms,
                 "Python ran eagerly between the compiled graphs for an estimated " + msf(ms) + " (" +
                     pct(ms / total_ms) + " of the steps' time; " + std::to_string(samples) +
                     " stack samples inside the compiled functions and outside their graphs), most at " +
                     utf8_text(c.eager_sites[top]) + " (" +
                     pct(static_cast<double>(by_site[top]) / static_cast<double>(periods)) + "); Dynamo met " +
                     std::to_string(breaks) + " graph break(s)" + reasons,
                 "move the call that breaks the graph (a print, .item() or .tolist(), a data-dependent branch, a "
                 "library Dynamo cannot trace, a torch.compiler.disable'd function) out of the compiled function "
                 "or after its last tensor op; torch._dynamo.config.capture_scalar_outputs=True keeps .item() in the "
                 "graph; TORCH_LOGS=graph_breaks or torch._dynamo.explain(fn)(*args) list each break and why"});
}

// A process's collections: measured by the gc probes, or else estimated
// from the stack samples taken inside them (a CPython without the probes).
struct GcOfProcess {
  const std::vector<GcPause>* pauses = nullptr;
  const std::vector<GcSample>* samples = nullptr;
  std::uint64_t period_ns = 0;
};

// The fit's span as the validation and between-steps findings take it:
// its first train step to its last, widened by the validation runs before
// and after them (the sanity check, the last epoch's).
constexpr const char* kFitSpan = " (its first train step or validation run to its last)";
// The between-steps advice's workers clause, by what the recording says
// of the train DataLoader's workers: started anew at each epoch, not
// known, or none or persistent ones (no clause: not the turns' cost).
std::string between_workers_try(const Workers& w) {
  if (w.anew()) return "persistent_workers=True (the train DataLoader's workers were started anew at each epoch); ";
  if (w.known_none() || !w.pids.empty()) return "";
  return "persistent_workers=True if the train DataLoader has workers (each epoch starts them anew otherwise); ";
}

constexpr const char* kGcFullTry =
    "most were full collections (generation 2), which a gc.collect() in the code makes at each call (a "
    "callback's or the loop's): call it less often or not at all; else ";
constexpr const char* kGcTry =
    "gc.freeze() once the model and data are built (the collector stops scanning them), fewer reference "
    "cycles made per step (gc.set_debug(gc.DEBUG_SAVEALL) keeps them to look at), or a higher "
    "gc.set_threshold() (generation 0 runs every 700 net allocations by default)";

// Garbage collections inside the train steps (the pygc probes' pauses,
// each clipped to its step; or the samples in them, each counted in its
// step): that time per step, and each step's share (`in_step`: not also an
// outlier's excess).
void gc_pauses(const ProcessActions& p, const ProcessSteps& s, double total_ms, const GcOfProcess& g,
               std::vector<double>& in_step, std::vector<Finding>& out) {
  const auto& t = s.train;
  const bool measured = g.pauses && !g.pauses->empty();
  if (!measured && (!g.samples || !g.period_ns)) return;
  std::size_t from = 0;
  double ms = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    in_step[i] = (measured ? gc_ns_within(*g.pauses, from, t[i].begin_ns, t[i].end_ns)
                           : gc_ns_within(*g.samples, g.period_ns, from, t[i].begin_ns, t[i].end_ns)) /
                 1e6;
    ms += in_step[i];
  }
  if (ms / total_ms < kGc) return;
  const double n = static_cast<double>(t.size());
  if (!measured) {
    std::size_t count = 0;
    std::size_t k = 0;
    for (const auto& x : *g.samples) {
      while (k < t.size() && t[k].end_ns <= x.ts_ns) ++k;
      if (k == t.size()) break;
      if (x.ts_ns >= t[k].begin_ns) ++count;
    }
    out.push_back({"gc", p.meta.pid, ms / n, ms / total_ms,
                   "garbage collection inside the train steps took an estimated " + msf(ms) + " (" +
                       pct(ms / total_ms) + " of the steps' time; " + std::to_string(count) +
                       " stack samples taken inside a collection, this CPython has no gc probes: the collections "
                       "themselves are not seen)",
                   kGcTry});
    return;
  }
  std::array<std::size_t, 3> by_gen{};
  std::size_t count = 0;
  const GcPause* longest = nullptr;
  std::size_t k = 0;
  for (const auto& x : *g.pauses) {
    while (k < t.size() && t[k].end_ns <= x.begin_ns) ++k;
    if (k == t.size()) break;
    if (x.end_ns <= t[k].begin_ns) continue;  // between two steps
    ++count;
    ++by_gen[static_cast<std::size_t>(std::clamp(x.generation, 0, 2))];
    if (!longest || x.end_ns - x.begin_ns > longest->end_ns - longest->begin_ns) longest = &x;
  }
  out.push_back({"gc", p.meta.pid, ms / n, ms / total_ms,
                 std::to_string(count) + " garbage collections inside the train steps took " + msf(ms) + " (" +
                     pct(ms / total_ms) + " of the steps' time; measured by CPython's gc probes): generation 0 " +
                     std::to_string(by_gen[0]) + "x, 1 " + std::to_string(by_gen[1]) + "x, 2 " +
                     std::to_string(by_gen[2]) + "x" +
                     (longest ? "; the longest " + msf((longest->end_ns - longest->begin_ns) / 1e6) + " (generation " +
                                    std::to_string(longest->generation) + ", " + std::to_string(longest->collected) +
                                    " objects unreachable)"
                              : ""),
                 // Mostly full collections: the job's own gc.collect() (each call one), or a heap
                 // that keeps growing; the thresholds do not space out explicit calls.
                 2 * by_gen[2] > count ? std::string(kGcFullTry) + kGcTry : std::string(kGcTry)});
}

// Whether a logging entry frame is Lightning's metric logging (self.log,
// log_dict and its result collection, the logger connector), not a logger
// library's writes or Python's logging.
bool metric_logging(const LoggingReport& lg, std::uint32_t entry) {
  if (entry >= lg.names.size()) return false;
  const std::string& n = lg.names[entry];  // "LightningModule.log (module.py)": function (file's base name)
  for (const char* x : {"(module.py)", "(result.py)", "(logger_connector.py)"})
    if (n.size() > std::strlen(x) && n.compare(n.size() - std::strlen(x), std::string::npos, x) == 0) return true;
  return false;
}

// The loop thread's stack samples in logging code inside the train steps
// (logging_time.h): samples x the period, an estimate.
void logging_cost(const ProcessActions& p, const ProcessSteps& s, double total_ms, const LoggingReport& lg,
                  const std::vector<LoggingSample>& samples, std::vector<Finding>& out) {
  const auto& t = s.train;
  std::size_t k = 0, count = 0, periods = 0;
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::size_t> by_site;  // (entry, caller) -> samples
  for (const auto& x : samples) {
    if (s.tid && x.tid != s.tid) continue;  // another thread's logging is not the step's time
    while (k < t.size() && t[k].end_ns <= x.ts_ns) ++k;
    if (k == t.size()) break;
    if (x.ts_ns < t[k].begin_ns) continue;  // between two steps
    ++count;
    periods += x.weight;
    ++by_site[{x.entry, x.caller}];
  }
  const double period_ms = static_cast<double>(lg.period_ns) / 1e6, ms = static_cast<double>(periods) * period_ms;
  if (count < kLoggingMinSamples || ms / total_ms < kLogging) return;
  auto top = by_site.begin();
  for (auto it = by_site.begin(); it != by_site.end(); ++it)
    if (it->second > top->second) top = it;
  auto name = [&lg](std::uint32_t i) { return i < lg.names.size() ? utf8_text(lg.names[i]) : std::string("?"); };
  const std::string site =
      name(top->first.first) +
      (top->first.second == LoggingReport::kNoCaller ? "" : " called from " + name(top->first.second));
  char period[32];
  std::snprintf(period, sizeof period, "%.3g", period_ms);
  const double n = static_cast<double>(t.size());
  out.push_back({"logging", p.meta.pid, ms / n, ms / total_ms,
                 std::to_string(count) +
                     " of the training loop's stack samples inside the train steps were in "
                     "logging code, an estimated " +
                     msf(ms) + " (" + pct(ms / total_ms) + " of the steps' time; samples x the " + period +
                     " ms sampling period): most in " + site + " (" + std::to_string(top->second) + " samples)",
                 metric_logging(lg, top->first.first)
                     // log_every_n_steps spaces the loggers' writes, not self.log's own work at each call.
                     ? "log fewer values per step: self.log's own cost is paid at every call whatever "
                       "log_every_n_steps (which spaces the loggers' writes only): one self.log_dict for "
                       "several values, values needed per epoch only logged less often, sync_dist=True only "
                       "where needed, tensors rather than .item() in the call"
                     : "log less often from the step: a logger's writes, print or logging.info called there "
                       "every N steps instead (Trainer(log_every_n_steps=N) spaces Lightning's own logger writes "
                       "only, which come between steps); a logger's flush interval (TensorBoard's flush_secs)"});
}

// `workers`: the train DataLoader's workers, found when first asked.
void process_findings(const ProcessActions& p, const ProcessSteps& s, const Checkpoints& ckpt, const BetweenSteps& gaps,
                      const std::function<const Workers&()>& workers, const ProcessDeviceStats* stats,
                      const CompilesProcess* compiles, const GcOfProcess& gc, const LoggingReport* logging,
                      std::vector<Finding>& out) {
  const auto& t = s.train;
  if (t.size() < kMinTrainSteps) return;  // too few steps to say anything
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
  const std::string steps = std::to_string(t.size()) + " train steps, median " + msf(median_step(durations));
  if (share(StepPart::dataloader) >= kInputBound && per_step(StepPart::dataloader) >= kInputBoundMinMs)
    out.push_back({"input-bound", p.meta.pid, per_step(StepPart::dataloader), share(StepPart::dataloader),
                   "the dataloader (fetch + batch transfer) takes " + msf(per_step(StepPart::dataloader)) +
                       " per step, " + pct(share(StepPart::dataloader)) + " of it (" + steps + ")",
                   "more DataLoader workers (num_workers), persistent_workers=True, pin_memory=True, a larger "
                   "prefetch_factor; or make __getitem__ cheaper"});
  // Hooks, less ModelCheckpoint's (the checkpoints finding's).
  std::vector<double> in_step_checkpoints;
  const auto hooks_top = top_hooks(p, t, ckpt, in_step_checkpoints);
  double checkpoint_ms = 0;
  for (double ms : in_step_checkpoints) checkpoint_ms += ms;
  double hooks_ms = std::max(0.0, part[static_cast<std::size_t>(StepPart::hooks)] - checkpoint_ms);
  if (share(StepPart::optimizer) >= kOptimizer)
    out.push_back({"optimizer", p.meta.pid, per_step(StepPart::optimizer), share(StepPart::optimizer),
                   "the optimizer step and zero_grad take " + msf(per_step(StepPart::optimizer)) + " per step, " +
                       pct(share(StepPart::optimizer)) + " of it (" + steps + ")",
                   "a fused or foreach optimizer (torch.optim.AdamW(fused=True) / foreach=True), "
                   "zero_grad(set_to_none=True), fewer parameter groups"});
  // Recompiles, before the outliers: a step's recompile is not its excess.
  std::vector<double> in_step_compiles(t.size(), 0.0);
  double val_compiles = 0;
  if (compiles) {
    recompiles(p, s, total, *compiles, in_step_compiles, val_compiles, out);
    graph_breaks(p, s, total, *compiles, out);
  }
  std::vector<double> in_step_gc(t.size(), 0.0);
  gc_pauses(p, s, total, gc, in_step_gc, out);
  const std::vector<LoggingSample>* logged = nullptr;
  if (logging && logging->period_ns)
    if (auto it = logging->procs.find(p.meta.pid); it != logging->procs.end()) {
      logging_cost(p, s, total, *logging, it->second, out);
      logged = &it->second;
    }
  // Hooks, less ModelCheckpoint's (the checkpoints finding's), and less
  // the garbage collections and logging inside them where those have their
  // own finding: one cause, one finding (a callback's gc.collect() was
  // both "hooks" and "gc", 290 ms at stake in a 149 ms step).
  if (hooks_ms / total >= kHooks) {
    const auto spans = hook_spans(p, t, ckpt, s.tid);
    double apart_ms = 0;
    std::string apart;
    auto fired = [&](const char* kind) {
      return std::any_of(out.begin(), out.end(),
                         [&](const Finding& f) { return f.pid == p.meta.pid && f.kind == kind; });
    };
    if (fired("gc")) {
      const double ms = gc.pauses && !gc.pauses->empty() ? pauses_within(spans, *gc.pauses, s.tid)
                        : gc.samples                     ? samples_within(spans, *gc.samples, gc.period_ns)
                                                         : 0.0;
      if (ms > 0) apart_ms += ms, apart += ", garbage collection's";
    }
    if (logged && fired("logging")) {
      const double ms = samples_within(spans, *logged, logging->period_ns, s.tid);
      if (ms > 0) apart_ms += ms, apart += ", logging's";
    }
    hooks_ms = std::max(0.0, hooks_ms - apart_ms);
    if (checkpoint_ms > 0) apart = ", ModelCheckpoint's" + apart;
    if (hooks_ms / total >= kHooks) {
      std::string top;
      for (const auto& [name, ms] : hooks_top)
        top += (top.empty() ? "" : ", ") + utf8_text(name) + " " + msf(ms / n) + "/step";
      out.push_back({"hooks", p.meta.pid, hooks_ms / n, hooks_ms / total,
                     "callbacks and hooks take " + msf(hooks_ms / n) + " per step, " + pct(hooks_ms / total) +
                         " of it" + (apart.empty() ? "" : " (" + apart.substr(2) + " time in them apart)") +
                         (top.empty() ? "" : ": " + top) + " (" + steps + ")",
                     "log less often (log_every_n_steps, self.log(..., on_step=False)), avoid .item()/.cpu() in "
                     "hooks, move heavy callbacks to epoch ends"});
    }
  }
  // Outliers: past the run's own spread, robustly (MAD), and past 1.5x;
  // a step's checkpoint save is not its excess (the checkpoints finding's).
  for (std::size_t i = 0; i < t.size(); ++i)
    durations[i] -= in_step_checkpoints[i] + in_step_compiles[i] + in_step_gc[i];
  // The parts whose own finding fired: a regular pattern in one of them (an
  // input-bound fit's every other step waiting for its batch) is that
  // finding's time, not spikes (below).
  std::array<bool, kStepParts> owned{};
  for (const auto& f : out) {
    if (f.pid != p.meta.pid) continue;
    if (f.kind == "input-bound") owned[static_cast<std::size_t>(StepPart::dataloader)] = true;
    if (f.kind == "hooks") owned[static_cast<std::size_t>(StepPart::hooks)] = true;
    if (f.kind == "optimizer") owned[static_cast<std::size_t>(StepPart::optimizer)] = true;
  }
  std::array<double, kStepParts> part_median{};
  for (std::size_t k = 0; k < kStepParts; ++k) {
    std::vector<double> v;
    for (const auto& st : t) v.push_back(st.part_ns[k] / 1e6);
    part_median[k] = median(v);
  }
  // Each step's time in the owned parts over their medians.
  std::vector<double> in_owned(t.size(), 0.0);
  auto owned_time = [&] {
    for (std::size_t i = 0; i < t.size(); ++i) {
      in_owned[i] = 0;
      for (std::size_t k = 0; k < kStepParts; ++k)
        if (owned[k]) in_owned[i] += std::max(0.0, t[i].part_ns[k] / 1e6 - part_median[k]);
    }
  };
  owned_time();
  double med = 0, bound = 0, excess = 0;
  std::size_t count = 0, worst = 1;
  std::vector<std::size_t> slow;  // the steps past the bound
  auto past_the_bound = [&] {
    med = median(durations);
    std::vector<double> dev;
    for (double d : durations) dev.push_back(std::fabs(d - med));
    const double sigma = 1.4826 * median(dev);
    bound = std::max(med + kOutlierSigmas * sigma, kOutlierFactor * med);
    // Not the first step: a fit's first is its warm-up (lazy init, the
    // optimizer's state, first allocations) -- on a real Transformer fit it
    // was the one step past the bound, 1.6x the median.
    excess = 0, count = 0, worst = 1;
    slow.clear();
    std::size_t mostly_owned = 0;  // the steps past the bound with most of their excess in owned parts
    for (std::size_t i = 1; i < t.size(); ++i) {
      if (durations[i] > bound) {
        excess += durations[i] - med, ++count;
        if (in_owned[i] >= 0.5 * (durations[i] - med)) ++mostly_owned;
        slow.push_back(i);
      }
      if (durations[i] > durations[worst]) worst = i;
    }
    return mostly_owned;
  };
  // Spikes are few and irregular. A tenth of the steps or more past the
  // bound is a pattern when most of them have most of their excess in
  // owned parts (the
  // 2-worker slow loader of test_stacks.py: 129 of 260 steps, every other
  // one waiting: input-bound's), or when they come at a regular period
  // (every k-th step: gradient accumulation's optimizer step every k
  // batches, a callback's work every k steps), where the part holding most
  // of their excess is the rhythm's. Those parts' excess leaves every step,
  // and what is past the bound then is.
  std::size_t mostly_owned = past_the_bound();
  const bool many = count >= std::max<std::size_t>(2, t.size() / 10);
  std::size_t period = 0;
  if (many && 2 * mostly_owned < count) {
    std::map<std::size_t, std::size_t> gaps;
    for (std::size_t j = 1; j < slow.size(); ++j) ++gaps[slow[j] - slow[j - 1]];
    for (const auto& [gap, times] : gaps)
      if (gap >= 2 && times * 5 >= (slow.size() - 1) * 4) period = gap;
    if (period) {
      // The part of the steps on the rhythm (a period from the one before
      // or after), not of a spike among them.
      std::array<double, kStepParts> over{};
      for (std::size_t j = 0; j < slow.size(); ++j) {
        const bool on =
            (j > 0 && slow[j] - slow[j - 1] == period) || (j + 1 < slow.size() && slow[j + 1] - slow[j] == period);
        if (on)
          for (std::size_t k = 0; k < kStepParts; ++k)
            over[k] += std::max(0.0, t[slow[j]].part_ns[k] / 1e6 - part_median[k]);
      }
      owned[static_cast<std::size_t>(std::max_element(over.begin(), over.end()) - over.begin())] = true;
      owned_time();
      mostly_owned = past_the_bound();
    }
  }
  bool left_out = false;
  if (many && 2 * mostly_owned >= count) {
    for (std::size_t i = 0; i < t.size(); ++i) durations[i] -= in_owned[i];
    past_the_bound();
    left_out = true;
  }
  // Where the longest one's excess is: the part furthest over its median
  // (not a part left out).
  std::string where;
  if (count) {
    double over = 0;
    for (std::size_t k = 0; k < kStepParts; ++k) {
      const double x = t[worst].part_ns[k] / 1e6 - part_median[k];
      if (x > over && !(left_out && owned[k])) {
        over = x;
        where = std::string(", mostly its ") + step_part_name(static_cast<StepPart>(k)) + " part (" + msf(x) +
                " over that part's median)";
      }
    }
  }
  // Past a share of the steps' time, as every finding: two steps of a busy
  // machine's Transformer fit, 58 ms over the median in 1.5 s of steps
  // (3.8 %), are not what to look at first.
  if (count && excess / total >= kOutlierShare)
    out.push_back({"outliers", p.meta.pid, excess / n, excess / total,
                   std::to_string(count) + " of " + std::to_string(t.size()) + " train steps took over " + msf(bound) +
                       " (median " + msf(med) + " + 6 robust sigmas of this run, and >= 1.5x); the longest, step " +
                       std::to_string(t[worst].index + s.train_offset) + ", " + msf(durations[worst]) + where +
                       "; together " + msf(excess) + " over the median" +
                       (left_out ? " (each step's time over the median in the parts " +
                                       (period ? "holding the steps' rhythm (most steps past the bound came every " +
                                                     std::to_string(period) + ")"
                                               : std::string("with a finding of their own")) +
                                       " left out: most steps' excess was there)"
                                 : std::string()),
                   "look at those steps (ltrace-bpf report FILE --steps A-B --html, or watch's slow-step captures): "
                   "garbage collection, checkpointing, a recompile, another process on the CPU"});
  // Checkpoints: of the fit's span (a save at the end included).
  if (ckpt.calls) {
    const std::uint64_t b = std::min(t.front().begin_ns, ckpt.begin_ns), e = std::max(t.back().end_ns, ckpt.end_ns);
    const double span = (e - b) / 1e6;
    const std::string saves = ckpt.by_name
                                  ? std::to_string(ckpt.calls) + " calls of checkpoint callbacks' hooks"
                                  : std::to_string(ckpt.saves) + " checkpoint saves (Trainer.save_checkpoint, " +
                                        msf(ckpt.save_ms) + ") and their callbacks' hooks";
    if (span > 0 && ckpt.ms / span >= kCheckpoints)
      out.push_back({"checkpoints", p.meta.pid, ckpt.ms / n, ckpt.ms / span,
                     saves + " take " + msf(ckpt.ms) + ", " + pct(ckpt.ms / span) +
                         " of the fit from its first step to its last; the longest " + msf(ckpt.longest_ms),
                     "save less often (ModelCheckpoint(every_n_train_steps=..., every_n_epochs=...), save_top_k), "
                     "save_weights_only=True, or save in the background (the AsyncCheckpointIO plugin)"});
  }
  if (stats) memory_growth(p, t, s.train_offset, *stats, out);
  if (stats) cpu_contention(p, t, s.tid, *stats, out);
  // Validation and the rest of the time between train steps
  // (between_steps.h): of the fit's span, converted to time per train step.
  double val_steps = 0;
  for (const auto& v : s.validation) val_steps += v.duration_ns() / 1e6;
  std::uint64_t b = t.front().begin_ns, e = t.back().end_ns;
  if (gaps.validation_runs) {
    b = std::min(b, gaps.validation_begin_ns), e = std::max(e, gaps.validation_end_ns);
  } else if (!s.validation.empty()) {  // no run around them on the loop thread: the steps alone
    b = std::min(b, s.validation.front().begin_ns), e = std::max(e, s.validation.back().end_ns);
  }
  const double span = (e - b) / 1e6;
  if (!s.validation.empty()) {
    const double val = (gaps.validation_runs ? gaps.validation_ms : val_steps) - val_compiles;  // recompiles' apart
    // Most of each run outside its steps, judged on the runs after the
    // first: persistent validation workers start once, in the first run
    // (or the sanity check), and a one-time start is no advice.
    double later_ms = 0, later_steps_ms = 0;
    for (std::size_t i = 1; i < gaps.runs.size(); ++i)
      later_ms += gaps.runs[i].ms, later_steps_ms += gaps.runs[i].steps_ms;
    const bool outside = gaps.runs.size() >= 2 && later_ms > 2 * later_steps_ms;
    if (span > 0 && val / span >= kValidation)
      out.push_back(
          {"validation", p.meta.pid, val / n, val / span,
           (gaps.validation_runs ? std::to_string(gaps.validation_runs) + " validation runs (" +
                                       std::to_string(s.validation.size()) + " validation steps) take "
                                 : std::to_string(s.validation.size()) + " validation steps take ") +
               msf(val) + ", " + pct(val / span) + " of the fit" + kFitSpan +
               (gaps.validation_runs ? " (each run from the train step before it to its last validation hook: the "
                                       "validation DataLoader's start, the hooks and the steps; the steps alone " +
                                           msf(val_steps) + ")"
                                     : std::string()),
           std::string("validate less often (val_check_interval, check_val_every_n_epoch) or on fewer batches "
                       "(limit_val_batches)") +
               (outside ? "; most of each run after the first is outside its steps: persistent_workers=True on "
                          "the validation DataLoader if it has workers (each run starts them anew otherwise), "
                          "lighter validation hooks"
                        : "")});
  }
  if (span > 0 && gaps.gaps_ms / span >= kBetweenSteps) {
    // The actions that hold a part of it worth naming; the rest in none.
    std::string top;
    for (const auto& [name, ms] : gaps.top_actions)
      if (ms >= 0.05 * gaps.gaps_ms) top += (top.empty() ? "" : ", ") + utf8_text(name) + " " + msf(ms);
    const double in_none = gaps.gaps_ms - gaps.in_actions_ms;
    if (in_none >= 0.5 * gaps.gaps_ms)
      top += (top.empty() ? "" : ", ") + msf(in_none) +
             (gaps.long_gaps_ms >= 0.5 * gaps.gaps_ms ? " in no Lightning action (a new DataLoader iterator's start)"
                                                      : " in no Lightning action");
    char longest[64];
    std::snprintf(longest, sizeof longest, "%zu gap(s) over %.0f ms, the longest ", gaps.long_gaps,
                  BetweenSteps::kLongGapMs);
    // What to try: the action holding most of it first, when one does;
    // then the workers' part, by what they did. Most
    // of it in long gaps: the epoch turns; else in the short ones after
    // every step, Lightning's own work there (it writes the loggers after
    // on_train_batch_end, every log_every_n_steps).
    std::string first;
    if (!gaps.top_actions.empty() && gaps.top_actions[0].second >= 0.5 * gaps.gaps_ms)
      first = "lighter " + utf8_text(gaps.top_actions[0].first) + " (it holds " +
              pct(gaps.top_actions[0].second / gaps.gaps_ms) + " of it); ";
    const bool turns = gaps.long_gaps_ms >= 0.5 * gaps.gaps_ms;
    const Workers* w = turns ? &workers() : nullptr;  // the turns start them anew, if anything does
    out.push_back(
        {"between steps", p.meta.pid, gaps.gaps_ms / n, gaps.gaps_ms / span,
         "the time between train steps, validation and checkpoints apart, takes " + msf(gaps.gaps_ms) + ", " +
             pct(gaps.gaps_ms / span) + " of the fit" + kFitSpan + ": " + longest + msf(gaps.longest_gap_ms) +
             (turns ? " (epoch turns: the epoch hooks, a new train DataLoader iterator)"
                    : " (mostly the short gaps after each step: Lightning's own work between steps, its loggers' "
                      "writes every log_every_n_steps among it)") +
             (top.empty() ? "" : "; in them " + top) +
             (w && w->anew() ? "; the train DataLoader's workers were started anew: " + w->who() : ""),
         turns
             ? first + between_workers_try(*w) + "lighter epoch hooks (on_train_epoch_end/start); fewer, longer epochs"
             : first + "log less often (Trainer(log_every_n_steps=N), fewer values logged on_step): Lightning "
                       "writes its loggers between steps"});
  }
}

std::string who(const ProcessMeta& m) {
  return m.rank >= 0 ? "rank " + std::to_string(m.rank) + " (pid " + std::to_string(m.pid) + ")"
                     : "pid " + std::to_string(m.pid);
}

// A process's waits for collectives inside its train steps (the actions of
// a train batch: its step, backward, optimizer, fetch and hooks; not
// validation's), and the (action, kind) that waited most.
struct Blocked {
  const ProcessActions* p = nullptr;
  const ProcessSteps* s = nullptr;
  const ProcessDeviceStats* stats = nullptr;
  std::array<double, kStepParts> part_per_step{};  // ms
  double step_ms = 0, ms_per_step = 0, share = 0;
  std::size_t steps = 0;
  std::string top_action;
  std::uint8_t top_kind = 0;
  double top_ms = 0;
};

std::optional<Blocked> blocked_in_steps(const ProcessActions& p, const ProcessSteps& s, const ProcessComm& c,
                                        const ProcessDeviceStats* stats) {
  if (s.train.size() < kMinTrainSteps || c.actions.empty()) return std::nullopt;
  Blocked b;
  b.p = &p;
  b.s = &s;
  b.stats = stats;
  b.steps = s.train.size();
  double total = 0;
  for (const auto& st : s.train) {
    total += st.duration_ns() / 1e6;
    for (std::size_t i = 0; i < kStepParts; ++i) b.part_per_step[i] += st.part_ns[i] / 1e6;
  }
  const double n = static_cast<double>(b.steps);
  for (auto& x : b.part_per_step) x /= n;
  double ms = 0;
  for (const auto& a : c.actions) {
    const BatchStage stage = batch_hook_of(a.action).stage;
    if (step_part_of(a.action) == StepPart::other || (stage != BatchStage::none && stage != BatchStage::train))
      continue;
    ms += a.blocked_ns / 1e6;
    if (a.blocked_ns / 1e6 > b.top_ms) b.top_ms = a.blocked_ns / 1e6, b.top_action = a.action, b.top_kind = a.kind;
  }
  if (total <= 0) return std::nullopt;
  b.step_ms = total / n;
  b.ms_per_step = ms / n;
  b.share = ms / total;
  return b;
}

// Collective-bound processes, and the rank they wait for: among the
// processes of this report (ranks followed with --children) the one that
// waits least; its cause, the part of its step furthest over the waiter's
// (its input: the dataloader part; its own compute: training_step,
// backward, optimizer), and its run-queue wait when sampled.
void collective_findings(const std::vector<Blocked>& all, std::vector<Finding>& out) {
  const Blocked* least = nullptr;
  for (const auto& b : all)
    if (!least || b.share < least->share) least = &b;
  for (const auto& b : all) {
    if (b.share < kCollective) continue;
    out.push_back({"collective-bound", b.p->meta.pid, b.ms_per_step, b.share,
                   who(b.p->meta) + " waits for collectives " + msf(b.ms_per_step) + " per train step, " +
                       pct(b.share) + " of it (" + std::to_string(b.steps) + " train steps, mean " + msf(b.step_ms) +
                       "); most in " + comm_kind_name(b.top_kind) + " in " + utf8_text(b.top_action) + " (" +
                       msf(b.top_ms / static_cast<double>(b.steps)) + "/step)",
                   "the wait is for the slowest rank (a straggler: see its finding, or `report DIR --merge` across "
                   "nodes) or for the interconnect: balance the ranks' work and input, overlap communication "
                   "(DDP bucket_cap_mb, gradient_as_bucket_view=True), or communicate less often (gradient "
                   "accumulation)"});
  }
  if (!least || all.size() < 2) return;
  const Blocked* waiter = nullptr;
  for (const auto& b : all)
    if (&b != least && b.share >= kCollective && (!waiter || b.ms_per_step > waiter->ms_per_step)) waiter = &b;
  if (!waiter || least->ms_per_step > 0.5 * waiter->ms_per_step) return;
  std::size_t part = 0;
  double over = -1;
  for (std::size_t i = 0; i < kStepParts; ++i)
    if (least->part_per_step[i] - waiter->part_per_step[i] > over)
      over = least->part_per_step[i] - waiter->part_per_step[i], part = i;
  const auto k = static_cast<StepPart>(part);
  std::string cause = k == StepPart::dataloader ? "its input: its dataloader part"
                      : k == StepPart::hooks    ? "its hooks and callbacks"
                      : k == StepPart::other    ? "its time outside the step's parts"
                      : k == StepPart::step     ? "its own compute: its training_step part"
                                                : std::string("its own compute: its ") + step_part_name(k) + " part";
  cause += " takes " + msf(least->part_per_step[part]) + " per step against " + msf(waiter->part_per_step[part]) +
           " on " + who(waiter->p->meta);
  std::string extra;
  if (least->stats) {
    std::vector<Finding> c;
    cpu_contention(*least->p, least->s->train, least->p->meta.pid, *least->stats, c);
    if (!c.empty()) extra = "; and its host's CPUs are contended: " + c.front().evidence;
  }
  out.push_back({"straggler", least->p->meta.pid, waiter->ms_per_step, waiter->share,
                 who(least->p->meta) + " is the rank the others wait for: it waits " + msf(least->ms_per_step) +
                     " per train step in collectives, " + who(waiter->p->meta) + " " + msf(waiter->ms_per_step) +
                     "; the cause, " + cause + extra +
                     "; at stake: that rank's wait, the time of its collective-bound finding seen from its cause, "
                     "not more time",
                 k == StepPart::dataloader
                     ? "give its input more DataLoader workers or a cheaper __getitem__, or balance the shards"
                     : "balance the work across ranks (uneven batches or sequence lengths, rank-dependent code), "
                       "or check that rank's device and host"});
}

// Input-bound with the batches loaded in the training process (no
// workers) and CPU contention: the loop thread's run-queue wait is in the
// fetch's time too, where the fetch was runnable. One wait, one finding:
// the wait estimated in the fetch leaves input-bound, which goes when what
// is left is under its threshold. The estimate takes the fetch's
// time less all of the steps' time off a CPU (sleeps, I/O: taken as all in
// the fetch), at the thread's run-queue share of its runnable time. A
// sleeping __getitem__ next to CPU-heavy steps waits little for a CPU,
// which the thread's whole-step share (an audit fit: 15x too much) missed;
// on that fit this gives 0.61 ms a step against 0.22 measured: an
// estimate, not a bound.
void contention_in_the_fetch(const Workers* w, const RunQueue& rq, std::vector<Finding>& out, std::size_t from) {
  std::size_t input = out.size(), contention = out.size();
  for (std::size_t i = from; i < out.size(); ++i) {
    if (out[i].kind == "input-bound") input = i;
    if (out[i].kind == "cpu contention") contention = i;
  }
  if (input == out.size() || contention == out.size() || !w || !w->known_none() || !rq) return;
  Finding& in = out[input];
  Finding& c = out[contention];
  const double step_ms = in.share > 0 ? in.ms_per_step / in.share : 0;
  const double off_cpu = std::max(0.0, 1 - (rq.cpu + rq.wait) / rq.wall);  // of the steps' time
  const double runnable_fetch = std::max(0.0, in.ms_per_step - off_cpu * step_ms);
  const double waited = runnable_fetch * rq.of_runnable();
  if (waited <= 0 || step_ms <= 0) return;
  const double left = (in.ms_per_step - waited) / step_ms;
  if (left < kInputBound || in.ms_per_step - waited < kInputBoundMinMs) {
    c.evidence += "; the dataloader fetch in the training process (num_workers=0, " + msf(in.ms_per_step) +
                  " per step) is slow mostly by this wait: without an estimated " + msf(waited) +
                  " of it, under the input-bound threshold";
    out.erase(out.begin() + static_cast<std::ptrdiff_t>(input));
    return;
  }
  in.evidence += "; an estimated " + msf(waited) +
                 " per step of the fetch is the wait for a CPU that cpu contention counts (the fetch's time beyond "
                 "the steps' time off a CPU, at the thread's run-queue share of its runnable time), apart here";
  in.ms_per_step -= waited;
  in.share = left;
}

}  // namespace

std::vector<Finding> find_issues(const ActionsReport& rep, const DeviceStatsReport* stats, const CommReport* comm,
                                 const CompilesReport* compiles, const GcReport* gc, const LoggingReport* logging,
                                 const GpuReport* gpu, const LoaderWaitsReport* loader) {
  std::vector<Finding> out;
  std::vector<Blocked> blocked;
  // Each process's steps, found once (the straggler reads them again).
  std::vector<ProcessSteps> steps;
  steps.reserve(rep.processes.size());
  for (const auto& p : rep.processes) {
    const ProcessSteps& ps = steps.emplace_back(step_records(p, gpu));
    const ProcessDeviceStats* mine = nullptr;
    if (stats)
      for (const auto& s : stats->processes)
        if (s.pid == p.meta.pid) mine = &s;
    const CompilesProcess* compiled = nullptr;
    if (compiles)
      if (auto c = compiles->procs.find(p.meta.pid); c != compiles->procs.end()) compiled = &c->second;
    GcOfProcess collections;
    if (gc) {
      if (auto g = gc->procs.find(p.meta.pid); g != gc->procs.end()) collections.pauses = &g->second;
      if (auto g = gc->sampled.find(p.meta.pid); g != gc->sampled.end()) collections.samples = &g->second;
      collections.period_ns = gc->period_ns;
    }
    // Too few steps to judge: no time spent on what would not be said.
    const bool judged = ps.train.size() >= kMinTrainSteps;
    const Checkpoints ckpt = judged ? checkpoints(p) : Checkpoints{};
    const BetweenSteps gaps = judged ? between_steps(p, ps.train, ps.validation, ckpt.of, ps.tid) : BetweenSteps{};
    std::optional<Workers> workers;  // found once, where a finding asks
    const std::function<const Workers&()> workers_of = [&]() -> const Workers& {
      if (!workers) workers = find_workers(rep, p, ps, gaps, stats);
      return *workers;
    };
    const std::size_t before = out.size();
    process_findings(p, ps, ckpt, gaps, workers_of, mine, compiled, collections, logging, out);
    // The loop thread waiting for a CPU past the contention threshold: its
    // CPUs are busy for it (its own view: niced neighbours yield, its
    // affinity counts), and workers forked from it share them.
    const RunQueue rq = mine ? run_queue_in_steps(p, ps.train, ps.tid, *mine) : RunQueue{};
    const bool no_core_free = rq && rq.share() >= kContention;
    const bool between = std::any_of(out.begin() + static_cast<std::ptrdiff_t>(before), out.end(),
                                     [](const Finding& f) { return f.kind == "between steps"; });
    for (std::size_t i = before; i < out.size(); ++i) {
      if (out[i].kind == "input-bound") {
        input_workers(workers_of(), ps, loader, no_core_free, between, out[i]);
        if (no_core_free)
          out[i].evidence += "; its thread waited for a CPU " + pct(rq.share()) +
                             " of the steps' time (cpu contention): workers forked from it would wait too";
      }
    }
    contention_in_the_fetch(workers ? &*workers : nullptr, rq, out, before);
    if (gpu) gpu_findings(p, ps, *gpu, out);
    if (comm)
      for (const auto& c : comm->processes)
        if (c.pid == p.meta.pid)
          if (auto b = blocked_in_steps(p, ps, c, mine)) blocked.push_back(*b);
  }
  collective_findings(blocked, out);
  std::stable_sort(out.begin(), out.end(),
                   [](const Finding& a, const Finding& b) { return a.ms_per_step > b.ms_per_step; });
  return out;
}

std::string unjudged(const DeviceStatsReport* stats, const GcReport* gc, const LoggingReport* logging) {
  std::vector<std::string> what;
  if (!stats || stats->processes.empty())
    what.push_back(
        "memory growth and CPU contention (no /proc samples: record with --report verdict or --device-stats)");
  if (!gc || !gc->any())
    what.push_back(
        "garbage-collection pauses (neither CPython's gc probes nor stack samples: record with --report "
        "verdict)");
  if (!logging || !logging->any())
    what.push_back(logging && logging->period_ns
                       ? "logging cost (sampled, but no stack sample of the job's: the recording's notes say why)"
                       : "logging cost (no stack samples: record with --report verdict or advanced)");
  std::string out;
  for (const auto& w : what) out += (out.empty() ? "" : "; ") + w;
  return out;
}

std::string finding_at_stake(const Finding& x) {
  return x.ms_per_step > 0 || x.share <= 0 ? msf(x.ms_per_step) + " per train step at stake"
                                           : "memory at stake, not step time (" + fmt("%+.0f%%", 100 * x.share) + ")";
}

std::string render_findings(const ActionsReport& rep, const std::vector<Finding>& f, const std::string& not_judged) {
  std::string out = "Findings (ranked by train step time at stake; shown past each one's threshold)\n";
  const std::string unjudged_line = not_judged.empty() ? "" : "  not judged: " + not_judged + "\n";
  if (f.empty()) {
    std::size_t procs = 0;
    for (const auto& p : rep.processes) procs += step_records(p).train.size() >= kMinTrainSteps;
    out += procs ? "  none: no finding past its threshold\n" : "  none: fewer than 5 train steps recorded\n";
    return out + (procs ? unjudged_line : "");
  }
  int i = 1;
  for (const auto& x : f) {
    out += "  " + std::to_string(i++) + ". " + x.kind + " (pid " + std::to_string(x.pid) + "): " + finding_at_stake(x) +
           "\n";
    out += "     " + x.evidence + "\n";
    out += "     try: " + x.try_this + "\n";
  }
  out += unjudged_line;
  return out;
}

}  // namespace lt
