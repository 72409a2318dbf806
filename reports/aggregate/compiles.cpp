#include "reports/aggregate/compiles.h"

#include <algorithm>
#include <cstring>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/sample_weight.h"
#include "user/model/record_dispatch.h"
#include "user/model/stack_profile.h"

namespace lt {

namespace {
constexpr std::string_view kRegion = "Torch-Compiled Region: ";
bool digits(const std::string& s, std::size_t from, std::size_t to, unsigned& out) {
  if (from >= to || to - from > 6) return false;
  out = 0;
  for (std::size_t i = from; i < to; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    out = out * 10 + static_cast<unsigned>(s[i] - '0');
  }
  return true;
}
}  // namespace

bool parse_region_name(const std::string& name, unsigned& frame, unsigned& compile) {
  if (name.compare(0, kRegion.size(), kRegion) != 0) return false;
  const auto slash = name.find('/', kRegion.size());
  return slash != std::string::npos && digits(name, kRegion.size(), slash, frame) &&
         digits(name, slash + 1, name.size(), compile);
}

namespace {
constexpr std::pair<unsigned, unsigned> kOutside{~0u, ~0u};
constexpr std::size_t kMaxReplays = 1 << 16;  // replays whose kernels may still come
}  // namespace

void CompileAggregator::add(const lt_event_header& h, const std::byte* record) {
  symbols_.add(h, record);  // it picks out the kinds that name frames
  auto note = [&](const lt_event_header& h, const lt_compile_note_event& e) {
    auto text = [](const char* f, std::size_t cap) { return std::string(f, strnlen(f, cap)); };
    Proc& p = procs_[h.pid];
    if (e.what == LT_COMPILE_NOTE_GRAPH_BREAK) {
      auto& n = p.breaks[text(e.reason, sizeof e.reason)];
      n = std::max(n, static_cast<std::int64_t>(e.count));  // read again later: the larger count is newer
      return;
    }
    if (e.what != LT_COMPILE_NOTE_COMPILE) return;
    DynamoCompileNote n;
    n.id = text(e.compile_id, sizeof e.compile_id);
    n.function = python_function_name(text(e.function, sizeof e.function));
    if (e.file[0]) n.function += " (" + text(e.file, sizeof e.file) + ":" + std::to_string(e.first_line) + ")";
    // Wall clock to the trace's: HOST_INFO's pair, taken at the start.
    // (Values from a damaged or crafted file that overflow are left unknown.)
    std::int64_t wall_ns = 0, start = 0;
    if (e.start_wall_us > 0 && wall_minus_mono_ns_ && !__builtin_mul_overflow(e.start_wall_us, 1000, &wall_ns) &&
        !__builtin_sub_overflow(wall_ns, wall_minus_mono_ns_, &start) && start > 0)
      n.start_ns = start;
    n.duration_us = e.duration_us;
    n.graph_breaks = e.count;
    n.reason = text(e.reason, sizeof e.reason);
    n.failure = text(e.failure, sizeof e.failure);
    n.truncated = e.flags & LT_COMPILE_NOTE_TRUNCATED;
    // Dynamo records an id twice when it compiles the backward graph later
    // (at its first run): the first record is the compile, the reason and a
    // failure may be in either.
    auto [it, added] = p.notes.emplace(n.id, n);
    if (!added) {
      if (it->second.reason.empty()) it->second.reason = n.reason;
      if (it->second.failure.empty()) it->second.failure = n.failure;
    }
  };
  // A CUDA graph replay: charged to the innermost compiled region open on
  // the thread (the op stack BPF sent with the launch).
  auto graph_launch = [&](const lt_event_header& h, const lt_gpu_launch_event& e) {
    if (LT_API_OF(e.api) != LT_API_GRAPH_LAUNCH) return;
    auto where = kOutside;
    for (unsigned i = std::min<unsigned>(e.nops, LT_OPS_DEPTH); i-- > 0;)
      if (e.ops[i] < names_.size() && names_[e.ops[i]].region) {
        where = {names_[e.ops[i]].frame, names_[e.ops[i]].compile};
        break;
      }
    Proc& p = procs_[h.pid];
    if (where == kOutside) {
      ++p.replays_outside;
    } else {
      auto& r = p.regions[where];
      r.frame = where.first, r.compile = where.second;
      ++r.graph_replays;
    }
    if (!e.correlation) return;  // uprobes: no kernels to join
    if (p.replays.size() >= kMaxReplays) {
      p.replays.erase(p.replay_order.front());
      p.replay_order.pop_front();
    }
    if (p.replays.insert_or_assign(e.correlation, where).second) p.replay_order.push_back(e.correlation);
  };
  // A kernel of a graph replay (CUPTI gives it the replay's correlation id).
  auto graph_kernel = [&](const lt_event_header& h, const lt_gpu_activity_event& e) {
    if (e.a.kind != LT_GPU_KERNEL || !e.a.graph_id) return;
    auto it = procs_.find(h.pid);
    if (it == procs_.end()) return;
    Proc& p = it->second;
    auto r = p.replays.find(e.a.correlation);
    if (r == p.replays.end()) return;
    if (r->second == kOutside) {
      ++p.kernels_outside;
      return;
    }
    auto& region = p.regions[r->second];
    ++region.graph_kernels;
    if (e.a.end_ns > e.a.start_ns) region.graph_kernel_ns += e.a.end_ns - e.a.start_ns;
  };
  auto on_op = [&](const lt_event_header& h, std::uint32_t op) {
    if (op >= names_.size()) return;
    const Name& n = names_[op];
    if (n.kernel) {
      auto it = procs_.find(h.pid);
      if (it == procs_.end()) return;
      Proc& p = it->second;
      if (p.kernel_seen[op]) return;
      p.kernel_seen[op] = true;
      // A kernel first called right after a recompile is one of its graph's.
      if (!p.recompiles.empty() && !p.open_recompile.empty() && p.open_recompile.back() == p.recompiles.size() - 1)
        p.recompiles.back().kernels.push_back(n.text);
      return;
    }
    if (!n.region) return;
    Proc& p = procs_[h.pid];
    auto& r = p.regions[{n.frame, n.compile}];
    if (r.calls++ == 0) {
      r.frame = n.frame;
      r.compile = n.compile;
      r.first_ns = h.ts_ns;
      if (auto c = p.code_of_op.find(op); c != p.code_of_op.end())
        if (const PyCodeSymbol* f = symbols_.code(h.pid, c->second.first, c->second.second); f && f->readable) {
          r.function = f->name + " (" + f->file + ":" + std::to_string(f->first_line) + ")";
          if (p.compiled.insert(r.function).second) p.code_kind.clear();
        }
      auto last = p.last_compile.find(n.frame);
      if (last != p.last_compile.end() && last->second != n.compile) {
        std::string action;
        if (actions_) {
          action = actions_->innermost_action(h.pid, h.tid);
          if (action.empty()) action = actions_->innermost_action(h.pid, h.pid);
        }
        p.recompiles.push_back({n.frame, n.compile, h.ts_ns, last->second, r.function, {}, action, -1});
        p.open_recompile.push_back(static_cast<std::uint32_t>(p.recompiles.size() - 1));
      }
    } else if (!p.open_recompile.empty()) {
      // The new graph's second call: its kernels have all run once.
      const auto& last = p.recompiles[p.open_recompile.back()];
      if (last.frame == n.frame && last.compile == n.compile) p.open_recompile.pop_back();
    }
    p.last_compile[n.frame] = n.compile;
  };
  visit_record(h, record,
               overloaded{note, graph_launch, graph_kernel,
                          [&](const lt_event_header&, const lt_host_info_event& e) {
                            if (!wall_minus_mono_ns_ && e.realtime_ns && e.monotonic_ns &&
                                e.realtime_ns < (1ull << 62) && e.monotonic_ns < (1ull << 62))
                              wall_minus_mono_ns_ =
                                  static_cast<std::int64_t>(e.realtime_ns) - static_cast<std::int64_t>(e.monotonic_ns);
                          },
                          [&](const lt_event_header& h, const lt_window_event& w) {
                            if (w.begin && !window_begin_) window_begin_ = h.ts_ns;
                          },
                          [&](const lt_event_header&, const lt_op_name_event& e) {
                            if (e.op > 1'000'000) return;  // a damaged record
                            if (names_.size() <= e.op) names_.resize(e.op + 1);
                            Name& n = names_[e.op];
                            n.text.assign(e.name, strnlen(e.name, sizeof e.name));
                            n.region = parse_region_name(n.text, n.frame, n.compile);
                            n.kernel = n.text.rfind("cpp_fused_", 0) == 0 || n.text.rfind("inductor kernel ", 0) == 0;
                          },
                          [&](const lt_event_header& h, const lt_region_code_event& e) {
                            procs_[h.pid].code_of_op[e.op] = {e.code, e.checksum};
                          },
                          [&](const lt_event_header&, const lt_sampler_info_event& e) {
                            if (e.flags & LT_SAMPLER_ON_CPU) period_ns_ = e.period_ns;
                          },
                          [&](const lt_event_header& h, const lt_py_sample_event& e) { on_sample(h, e); },
                          [&](const lt_event_header& h, const lt_op_event& e) { on_op(h, e.op); },
                          [&](const lt_event_header& h, const lt_op_shapes_event& e) { on_op(h, e.op); }});
}

// A sample taken while a compiled region runs (its op is on the sample's
// op stack: the region is Dynamo's evaluation of the whole frame, graph
// calls and the eager code between them alike), in the innermost compiled
// function (the transformed code Dynamo runs keeps the function's name, file
// and first line; a resume function after a break is one too), and not in
// one of its graphs: what that function called, past Dynamo's wrappers
// (eval_frame.py's _fn wraps each compiled graph, and each disabled
// function), is neither fx, AOTAutograd nor inductor code.  Not while
// compiling (Dynamo's convert_frame leafward: a recompile is its own
// finding).  Eager Python at the breaks, at the compiled function's line.
void CompileAggregator::on_sample(const lt_event_header& h, const lt_py_sample_event& e) {
  if (h.kind != LT_EV_PY_SAMPLE || (e.flags & LT_SAMPLE_IN_PROBE) || !e.nframes) return;
  auto it = procs_.find(h.pid);
  if (it == procs_.end() || it->second.compiled.empty()) return;
  Proc& p = it->second;
  bool in_region = false;
  for (unsigned i = 0; i < std::min<unsigned>(e.nops, LT_OPS_DEPTH); ++i)
    in_region |= e.ops[i] < names_.size() && names_[e.ops[i]].region;
  if (!in_region) return;
  if (p.code_kind_epoch != symbols_.epoch()) {
    p.code_kind.clear();
    p.code_kind_epoch = symbols_.epoch();
  }
  using Code = Proc::Code;
  auto kind = [&](const lt_py_frame& f) {
    auto [k, added] = p.code_kind.try_emplace({f.code, f.checksum}, Code::other);
    if (added)
      if (const PyCodeSymbol* c = symbols_.code(h.pid, f.code, f.checksum); c && c->readable) {
        const std::string& file = c->file;
        if (p.compiled.count(c->name + " (" + file + ":" + std::to_string(c->first_line) + ")"))
          k->second = Code::compiled;
        else if (file.ends_with("/torch/_dynamo/convert_frame.py"))
          k->second = Code::compiling;
        else if (file.ends_with("/torch/_dynamo/eval_frame.py"))
          k->second = Code::wrapper;
        else if (file.find("/torch/fx/") != std::string::npos || file.find("/torch/_functorch/") != std::string::npos ||
                 file.find("/torch/_inductor/") != std::string::npos ||
                 file.find("/torch/_dynamo/") != std::string::npos || file.starts_with("<eval_with_key>"))
          k->second = Code::graph;
      }
    return k->second;
  };
  const unsigned n = std::min<unsigned>(e.nframes, LT_STACK_MAX);
  unsigned c = 0;
  for (; c < n; ++c) {  // leaf first
    const Code k = kind(e.frames[c]);
    if (k == Code::compiling) return;
    if (k == Code::compiled) break;
  }
  if (c == n) return;
  for (unsigned j = c; j-- > 0;) {  // what it called
    const Code k = kind(e.frames[j]);
    if (k == Code::wrapper) continue;
    if (k == Code::graph) return;
    break;
  }
  const StackFrame f = symbols_.frame(h.pid, e.frames[c]);
  std::string site = f.function + " (" + f.file + ":" + std::to_string(f.line ? f.line : f.first_line) + ")";
  auto [s, added] = p.eager_site_index.try_emplace(std::move(site), static_cast<std::uint32_t>(p.eager_sites.size()));
  if (added) p.eager_sites.push_back(s->first);
  p.eager.push_back({h.ts_ns, static_cast<std::uint32_t>(sample_weight(e)), s->second});
}

CompilesReport CompileAggregator::finish() {
  CompilesReport out;
  out.window_begin_ns = window_begin_;
  for (auto& [pid, p] : procs_) {
    if (p.regions.empty() && p.notes.empty() && !p.replays_outside) continue;
    auto& o = out.procs[pid];
    for (auto& [k, r] : p.regions) o.regions.push_back(r);
    for (auto& [k, n] : p.notes) o.compiles.push_back(std::move(n));
    std::stable_sort(o.compiles.begin(), o.compiles.end(),
                     [](const DynamoCompileNote& a, const DynamoCompileNote& b) { return a.start_ns < b.start_ns; });
    o.graph_replays_outside = p.replays_outside;
    o.graph_kernels_outside = p.kernels_outside;
    o.recompiles = std::move(p.recompiles);
    for (auto& r : o.recompiles) {
      const std::string id = std::to_string(r.frame) + "/" + std::to_string(r.compile);
      for (std::size_t i = 0; i < o.compiles.size(); ++i)
        if (o.compiles[i].id == id) r.note = static_cast<int>(i);
    }
    for (auto& [reason, count] : p.breaks) o.graph_breaks.push_back({reason, count});
    o.eager = std::move(p.eager);
    std::stable_sort(o.eager.begin(), o.eager.end(),
                     [](const EagerSample& a, const EagerSample& b) { return a.ts_ns < b.ts_ns; });
    o.eager_sites = std::move(p.eager_sites);
    o.period_ns = period_ns_;
    std::stable_sort(o.graph_breaks.begin(), o.graph_breaks.end(),
                     [](const GraphBreakNote& a, const GraphBreakNote& b) { return a.count > b.count; });
  }
  return out;
}

}  // namespace lt
