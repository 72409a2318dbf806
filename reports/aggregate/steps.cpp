#include "reports/aggregate/steps.h"

#include <algorithm>
#include <map>
#include <optional>

#include "bpf/events.h"

namespace lt {

namespace {

std::string_view hook_of(std::string_view name) {
  const std::size_t dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// One batch being assembled from its hooks.
struct OpenStep {
  std::uint64_t begin = 0, end = 0, body_end = 0;
  bool has_body = false;
};

// Exclusive time on one thread: each instant goes to the innermost action
// open there, by its part (an uncategorised action inherits its parent's).
// One sweep over the thread's intervals (sorted by begin, longest first);
// the segments come out to `sink` in time order and disjoint, instants in
// no action left out (adjacent ones of one part may come apart).
struct Segment {
  std::uint64_t begin, end;
  StepPart part;
};
template <class Sink>
void exclusive_segments(const std::vector<const ActionInterval*>& ivs, const std::vector<StepPart>& part_of_action,
                        Sink&& sink) {
  struct Open {
    std::uint64_t end;
    StepPart part;
  };
  std::vector<Open> stack;
  std::uint64_t t = 0;
  auto advance = [&](std::uint64_t to) {
    while (t < to) {
      while (!stack.empty() && stack.back().end <= t) stack.pop_back();
      if (stack.empty()) {
        t = to;
        break;
      }
      const std::uint64_t e = std::min(stack.back().end, to);
      sink(Segment{t, e, stack.back().part});
      t = e;
    }
  };
  for (const ActionInterval* iv : ivs) {
    if (iv->end_ns <= iv->begin_ns) continue;
    advance(std::max(iv->begin_ns, t));
    while (!stack.empty() && stack.back().end <= t) stack.pop_back();
    StepPart part = part_of_action[iv->action];
    if (part == StepPart::other && !stack.empty()) part = stack.back().part;
    if (iv->end_ns > t) stack.push_back({iv->end_ns, part});
  }
  advance(UINT64_MAX);
}

// Appends a segment, joined to the last one when they touch and share a part.
void append_segment(std::vector<Segment>& segs, const Segment& g) {
  if (!segs.empty() && segs.back().end == g.begin && segs.back().part == g.part)
    segs.back().end = g.end;
  else
    segs.push_back(g);
}

// Each step's parts as the thread's segments come (in time order), without
// keeping them: a long trace's thread has about one segment per action, as
// many as its intervals (a diff of two 10 M-event traces held them all).
// What no segment covers is "other".
class StepSplitter {
 public:
  explicit StepSplitter(std::array<std::vector<StepRecord>, 4>& found) {
    for (auto& v : found)
      for (auto& s : v) {
        s.part_ns = {};
        steps_.push_back(&s);
      }
    std::stable_sort(steps_.begin(), steps_.end(),
                     [](const StepRecord* a, const StepRecord* b) { return a->begin_ns < b->begin_ns; });
    covered_.assign(steps_.size(), 0);
  }
  void add(const Segment& g) {
    // A step that ended before this segment began meets no later one.
    while (first_ < steps_.size() && steps_[first_]->end_ns <= g.begin) ++first_;
    for (std::size_t i = first_; i < steps_.size() && steps_[i]->begin_ns < g.end; ++i) {
      StepRecord& s = *steps_[i];
      const std::uint64_t b = std::max(g.begin, s.begin_ns), e = std::min(g.end, s.end_ns);
      if (e <= b) continue;
      s.part_ns[static_cast<std::size_t>(g.part)] += e - b;
      covered_[i] += e - b;
    }
  }
  void finish() {
    for (std::size_t i = 0; i < steps_.size(); ++i)
      steps_[i]->part_ns[static_cast<std::size_t>(StepPart::other)] += steps_[i]->duration_ns() - covered_[i];
  }

 private:
  std::vector<StepRecord*> steps_;  // by begin
  std::vector<std::uint64_t> covered_;
  std::size_t first_ = 0;
};

// A step's parts from the thread's segments; what no segment covers is "other".
std::array<std::uint64_t, kStepParts> split_step(const std::vector<Segment>& segs, std::uint64_t begin,
                                                 std::uint64_t end) {
  std::array<std::uint64_t, kStepParts> parts{};
  auto it =
      std::upper_bound(segs.begin(), segs.end(), begin, [](std::uint64_t v, const Segment& s) { return v < s.end; });
  std::uint64_t covered = 0;
  for (; it != segs.end() && it->begin < end; ++it) {
    const std::uint64_t b = std::max(it->begin, begin), e = std::min(it->end, end);
    if (e <= b) continue;
    parts[static_cast<std::size_t>(it->part)] += e - b;
    covered += e - b;
  }
  parts[static_cast<std::size_t>(StepPart::other)] += (end - begin) - covered;
  return parts;
}

// Union length of [b, e) intervals (sorted by begin) clipped to [lo, hi).
std::uint64_t union_ns(std::vector<std::pair<std::uint64_t, std::uint64_t>>& v) {
  std::sort(v.begin(), v.end());
  std::uint64_t total = 0, cur_b = 0, cur_e = 0;
  bool open = false;
  for (auto [b, e] : v) {
    if (!open || b > cur_e) {
      if (open) total += cur_e - cur_b;
      cur_b = b, cur_e = e, open = true;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  if (open) total += cur_e - cur_b;
  return total;
}

void add_gpu(std::vector<StepRecord>& steps, const std::vector<const GpuSlice*>& slices, std::uint64_t longest,
             const std::vector<Segment>& segs) {
  for (auto& s : steps) {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> kernels, all;
    const std::uint64_t from = s.begin_ns > longest ? s.begin_ns - longest : 0;
    auto it = std::lower_bound(slices.begin(), slices.end(), from,
                               [](const GpuSlice* g, std::uint64_t v) { return g->begin_ns < v; });
    for (; it != slices.end() && (*it)->begin_ns < s.end_ns; ++it) {
      const std::uint64_t b = std::max((*it)->begin_ns, s.begin_ns), e = std::min((*it)->end_ns, s.end_ns);
      if (e <= b) continue;
      all.emplace_back(b, e);
      if ((*it)->kind == LT_GPU_KERNEL) kernels.emplace_back(b, e);
    }
    s.has_gpu = true;
    s.kernel_ns = union_ns(kernels);
    const std::uint64_t busy = union_ns(all);
    s.copy_ns = busy - s.kernel_ns;
    s.gpu_idle_ns = s.duration_ns() - busy;
    // Where the GPU sat idle: each gap between busy stretches (`all` is
    // sorted now) split by the actions open on the loop's thread then.
    std::uint64_t cursor = s.begin_ns;
    auto idle = [&](std::uint64_t b, std::uint64_t e) {
      if (e <= b) return;
      const auto parts = split_step(segs, b, e);
      for (std::size_t k = 0; k < kStepParts; ++k) s.gpu_idle_part_ns[k] += parts[k];
    };
    for (auto [b, e] : all) {
      idle(cursor, b);
      cursor = std::max(cursor, e);
    }
    idle(cursor, s.end_ns);
  }
}

}  // namespace

const char* step_part_name(StepPart p) {
  switch (p) {
    case StepPart::dataloader:
      return "dataloader";
    case StepPart::step:
      return "step";
    case StepPart::backward:
      return "backward";
    case StepPart::optimizer:
      return "optimizer";
    case StepPart::hooks:
      return "hooks";
    case StepPart::other:
      return "other";
  }
  return "other";
}

const char* step_part_label(StepPart p) {
  switch (p) {
    case StepPart::dataloader:
      return "dataloader fetch + transfer";
    case StepPart::step:
      return "step function: training/validation/test/predict_step (forward)";
    case StepPart::backward:
      return "backward";
    case StepPart::optimizer:
      return "optimizer step + zero_grad";
    case StepPart::hooks:
      return "callbacks and hooks";
    case StepPart::other:
      return "other (no finer action)";
  }
  return "other";
}

StepPart step_part_of(std::string_view action) {
  const BatchHook bh = batch_hook_of(action);
  const std::string_view hook = hook_of(action);
  if (bh.role == BatchRole::batch_start && ends_with(hook, "_next")) return StepPart::dataloader;
  if (hook == "transfer_batch_to_device" || hook == "batch_to_device") return StepPart::dataloader;
  if (bh.role == BatchRole::step) return StepPart::step;
  if (hook == "backward") return StepPart::backward;
  if (hook == "optimizer_step" || hook == "optimizer_zero_grad") return StepPart::optimizer;
  if (action.starts_with("[Callback]") || hook.starts_with("on_")) return StepPart::hooks;
  return StepPart::other;
}

ProcessSteps numbered_as_the_job(ProcessSteps s) {
  if (s.train_offset == 0) return s;
  for (auto& r : s.train)
    r.index =
        static_cast<std::uint32_t>(std::max<std::int64_t>(0, static_cast<std::int64_t>(r.index) + s.train_offset));
  s.train_offset = 0;
  return s;
}

ProcessSteps step_records(const ProcessActions& p, const GpuReport* gpu) {
  ProcessSteps out;
  out.pid = p.meta.pid;
  std::vector<StepPart> part_of_action;
  std::vector<BatchHook> hook_of_action;
  for (const auto& a : p.actions) {
    part_of_action.push_back(step_part_of(a.name));
    hook_of_action.push_back(batch_hook_of(a.name));
  }
  std::map<std::uint32_t, std::vector<const ActionInterval*>> by_thread;
  for (const auto& iv : p.intervals) by_thread[iv.tid].push_back(&iv);
  std::vector<Segment> loop_segments;  // the loop thread's, for where the GPU idled
  // Each thread's steps; the thread with the most is the loop's.
  for (auto& [tid, ivs] : by_thread) {
    std::sort(ivs.begin(), ivs.end(), [](auto* a, auto* b) {
      return a->begin_ns != b->begin_ns ? a->begin_ns < b->begin_ns : a->end_ns > b->end_ns;
    });
    // One batch being assembled per stage (train, validation, test, predict).
    constexpr std::size_t kStages = 4;
    std::array<std::vector<StepRecord>, kStages> found;
    std::array<std::optional<OpenStep>, kStages> open;
    auto close = [&](std::optional<OpenStep>& o, std::vector<StepRecord>& v) {
      if (o && o->has_body) {
        StepRecord r;
        r.index = static_cast<std::uint32_t>(v.size());
        r.begin_ns = o->begin;
        r.end_ns = o->end;
        v.push_back(r);
      }
      o.reset();
    };
    for (const ActionInterval* iv : ivs) {
      const BatchHook bh = hook_of_action[iv->action];
      if (bh.stage == BatchStage::none) continue;
      const std::size_t k = static_cast<std::size_t>(bh.stage) - 1;  // train = 1 in BatchStage
      auto& o = open[k];
      auto& v = found[k];
      switch (bh.role) {
        case BatchRole::batch_start:
          // A fetch after the body ended starts the next batch; one inside
          // the body (older loops fetch in run_training_batch) belongs to it.
          if (o && o->has_body && iv->begin_ns >= o->body_end) close(o, v);
          if (!o) o = OpenStep{iv->begin_ns, iv->end_ns};
          break;
        case BatchRole::body:
        case BatchRole::step:
          if (o && o->has_body && iv->begin_ns >= o->body_end) close(o, v);
          if (!o) o = OpenStep{iv->begin_ns, iv->end_ns};
          o->has_body = true;
          o->body_end = std::max(o->body_end, iv->end_ns);
          break;
        case BatchRole::batch_end:
          if (!o) continue;
          break;
        case BatchRole::none:
          continue;
      }
      o->end = std::max(o->end, iv->end_ns);
    }
    std::size_t count = 0;
    for (std::size_t k = 0; k < kStages; ++k) {
      close(open[k], found[k]);
      count += found[k].size();
    }
    if (count <= out.train.size() + out.validation.size() + out.test.size() + out.predict.size()) continue;
    // The segments themselves are kept only where the GPU's idle gaps
    // are split by them (add_gpu).
    const bool keep_segments = gpu && !gpu->slices.empty();
    std::vector<Segment> segs;
    StepSplitter splitter(found);
    exclusive_segments(ivs, part_of_action, [&](const Segment& g) {
      splitter.add(g);
      if (keep_segments) append_segment(segs, g);
    });
    splitter.finish();
    out.tid = tid;
    loop_segments = std::move(segs);
    out.train = std::move(found[0]);
    // The job's numbering: the window's step that ran inside the job's
    // anchor step (its middle within the anchor's span) is that step.
    if (p.meta.anchor_index >= 0)
      for (const auto& r : out.train) {
        const std::uint64_t mid = r.begin_ns + r.duration_ns() / 2;
        if (mid >= p.meta.anchor_begin_ns && mid <= p.meta.anchor_end_ns) {
          out.train_offset = p.meta.anchor_index - static_cast<std::int64_t>(r.index);
          break;
        }
      }
    out.validation = std::move(found[1]);
    out.test = std::move(found[2]);
    out.predict = std::move(found[3]);
  }
  if (gpu && !gpu->slices.empty()) {
    std::vector<const GpuSlice*> mine;
    std::uint64_t longest = 0;
    for (const auto& g : gpu->slices)
      if (g.pid == p.meta.pid && (g.kind == LT_GPU_KERNEL || g.kind == LT_GPU_MEMCPY || g.kind == LT_GPU_MEMSET) &&
          g.end_ns > g.begin_ns) {
        mine.push_back(&g);
        longest = std::max(longest, g.end_ns - g.begin_ns);
      }
    if (!mine.empty()) {
      std::sort(mine.begin(), mine.end(), [](auto* a, auto* b) { return a->begin_ns < b->begin_ns; });
      for (auto* v : {&out.train, &out.validation, &out.test, &out.predict}) add_gpu(*v, mine, longest, loop_segments);
      out.has_gpu = true;
    }
  }
  return out;
}

std::array<StageSteps, 4> stages_of(const ProcessSteps& s) {
  return {{{"train", &s.train}, {"validation", &s.validation}, {"test", &s.test}, {"predict", &s.predict}}};
}

std::uint64_t percentile_ns(std::vector<std::uint64_t> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t rank = static_cast<std::size_t>(q * static_cast<double>(v.size()) + 0.999999999);
  rank = std::clamp<std::size_t>(rank, 1, v.size());
  return v[rank - 1];
}

StepStats step_stats(const std::vector<StepRecord>& steps) {
  StepStats st;
  st.count = steps.size();
  if (steps.empty()) return st;
  std::vector<std::uint64_t> d;
  for (const auto& s : steps) d.push_back(s.duration_ns());
  st.p50 = percentile_ns(d, 0.5);
  st.p90 = percentile_ns(d, 0.9);
  st.p99 = percentile_ns(d, 0.99);
  st.max = *std::max_element(d.begin(), d.end());
  std::vector<std::uint64_t> dev;
  for (auto x : d) dev.push_back(x > st.p50 ? x - st.p50 : st.p50 - x);
  st.mad = percentile_ns(dev, 0.5);
  st.spike_above = st.p50 + std::max<std::uint64_t>(3 * st.mad, st.p50 / 20);
  return st;
}

std::vector<std::size_t> spike_indexes(const std::vector<StepRecord>& steps, const StepStats& st) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < steps.size(); ++i)
    if (steps[i].duration_ns() > st.spike_above) out.push_back(i);
  return out;
}

StepBuckets bucket_steps(const std::vector<StepRecord>& steps, std::size_t max_buckets) {
  StepBuckets b;
  if (max_buckets == 0) max_buckets = 1;
  b.bucket = std::max<std::size_t>(1, (steps.size() + max_buckets - 1) / max_buckets);
  for (std::size_t i = 0; i < steps.size(); i += b.bucket) {
    const std::size_t n = std::min(b.bucket, steps.size() - i);
    StepRecord r;
    r.index = steps[i].index;
    r.begin_ns = steps[i].begin_ns;
    std::uint64_t dur = 0, mx = 0, kern = 0, copy = 0;
    for (std::size_t j = i; j < i + n; ++j) {
      dur += steps[j].duration_ns();
      mx = std::max(mx, steps[j].duration_ns());
      for (std::size_t k = 0; k < kStepParts; ++k) r.part_ns[k] += steps[j].part_ns[k];
      kern += steps[j].kernel_ns;
      copy += steps[j].copy_ns;
    }
    r.end_ns = r.begin_ns + dur / n;
    // Means of the parts; what rounding leaves goes to "other", so they
    // still add up to the bucket's mean duration.
    std::uint64_t sum = 0;
    for (auto& x : r.part_ns) sum += (x /= n);
    r.part_ns[static_cast<std::size_t>(StepPart::other)] += dur / n - sum;
    r.has_gpu = steps[i].has_gpu;
    r.kernel_ns = kern / n;
    r.copy_ns = copy / n;
    r.gpu_idle_ns = dur / n - std::min(dur / n, r.kernel_ns + r.copy_ns);
    b.rows.push_back(r);
    b.max_ns.push_back(mx);
  }
  return b;
}

long step_holding(const std::vector<StepRecord>& steps, std::uint64_t t) {
  auto it = std::upper_bound(steps.begin(), steps.end(), t,
                             [](std::uint64_t v, const StepRecord& s) { return v < s.begin_ns; });
  if (it == steps.begin()) return -1;
  --it;
  return t <= it->end_ns ? static_cast<long>(it - steps.begin()) : -1;
}

std::optional<std::size_t> step_at(const std::vector<StepRecord>& steps, std::uint64_t ts) {
  auto st = std::upper_bound(steps.begin(), steps.end(), ts,
                             [](std::uint64_t t, const StepRecord& r) { return t < r.begin_ns; });
  if (st == steps.begin() || ts >= std::prev(st)->end_ns) return std::nullopt;
  return static_cast<std::size_t>(std::prev(st) - steps.begin());
}

}  // namespace lt
