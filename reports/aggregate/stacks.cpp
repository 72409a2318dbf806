#include "reports/aggregate/stacks.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>

#include "reports/aggregate/py_symbols.h"
#include "reports/aggregate/sample_weight.h"
#include "reports/aggregate/stack_cut.h"
#include "user/model/record_dispatch.h"

namespace lt {

namespace {

// One StackProfile being built: frames and stacks interned.
struct Builder {
  StackProfile out;
  std::map<std::tuple<std::string, std::string, int, int, bool>, std::uint32_t> frame_index;
  std::map<std::vector<std::uint32_t>, std::size_t> stack_index;

  // Samples by their raw frames (codes, instructions, flags, native ip),
  // valid while no symbol changes (PySymbols::epoch): a thread sampled
  // over and over in one place costs a hash of its frames, not a name
  // lookup per frame.  A crafted trace of identical deep samples
  // compresses ~1000x and made `report` take seconds per MB.
  struct Cached {
    std::size_t stack;
    std::uint32_t unknown_frames, freed_at_exit_frames;
    bool uncut;      // the action's opening frame was not in the stack
    bool no_origin;  // charged to an action whose opening frame is not known
  };
  std::unordered_map<std::string, Cached> by_raw;
  std::uint64_t by_raw_epoch = 0;

  std::size_t add(const std::vector<StackFrame>& root_first, std::uint64_t weight) {
    std::vector<std::uint32_t> ids;
    ids.reserve(root_first.size());
    for (const auto& f : root_first) {
      auto [it, fresh] = frame_index.try_emplace({f.function, f.file, f.line, f.first_line, f.native},
                                                 static_cast<std::uint32_t>(out.frames.size()));
      if (fresh) out.frames.push_back(f);
      ids.push_back(it->second);
    }
    auto [it, fresh] = stack_index.try_emplace(ids, out.stacks.size());
    if (fresh) out.stacks.push_back({std::move(ids), 0, 0});
    out.stacks[it->second].weight += weight;
    out.stacks[it->second].count += 1;
    return it->second;
  }
};

struct PerProcess {
  ProcessStacks out;
  std::map<std::string, Builder> on_cpu, off_cpu, gpu;
  // --launch-stacks: the launch a thread made last (its stack follows it in
  // the stream), and each launch's (action, stack) by CUPTI correlation id.
  std::map<std::uint32_t, std::uint32_t> last_launch;  // tid -> correlation
  struct Launched {
    std::string action;
    std::vector<StackFrame> stack;
  };
  std::map<std::uint32_t, Launched> launched;
  std::deque<std::uint32_t> launched_order;
  struct Blocked {
    std::string action;
    std::vector<StackFrame> stack;
    std::uint64_t ts;
  };
  std::map<std::uint32_t, Blocked> blocked;  // tid -> open off-CPU period
  std::uint64_t gaps_seen = 0;               // of State::gaps, applied lazily
};

}  // namespace

// A sample that ran in the opening frame's own code (between its calls):
// cProfile has no row for it, but it is the action's time.
inline constexpr const char* kOpeningFrame = "[action's own frame]";

struct StackAggregator::State {
  const ActionAggregator& actions;
  bool full_stacks = false;
  StacksReport rep;
  PySymbols symbols;  // the names of the stacks' frames
  std::map<std::uint32_t, PerProcess> procs;
  std::vector<std::uint32_t> order;

  explicit State(const ActionAggregator& a, bool full) : actions(a), full_stacks(full) {}

  // Adds a sample's stack to `b`, through its cache of raw frames.
  void add_sample(Builder& b, const lt_py_sample_event& e, ProcessStacks& ps) {
    if (b.by_raw_epoch != symbols.epoch() || b.by_raw.size() > 100'000) {
      b.by_raw.clear();
      b.by_raw_epoch = symbols.epoch();
    }
    const unsigned n = std::min<unsigned>(e.nframes, LT_STACK_MAX);
    std::string key(reinterpret_cast<const char*>(e.frames), n * sizeof(lt_py_frame));
    key.append(reinterpret_cast<const char*>(&e.user_ip), sizeof e.user_ip);
    key.append(reinterpret_cast<const char*>(&e.flags), sizeof e.flags);
    // The same frames cut at another opening frame are another stack.
    if (!full_stacks) {
      const ActionOrigin o = actions.innermost_origin(e.hdr.pid, e.hdr.tid);
      key.append(reinterpret_cast<const char*>(&o.code), sizeof o.code);
      key.append(reinterpret_cast<const char*>(&o.depth), sizeof o.depth);
    }
    if (auto it = b.by_raw.find(key); it != b.by_raw.end()) {
      b.out.stacks[it->second.stack].weight += sample_weight(e);
      b.out.stacks[it->second.stack].count += 1;
      ps.unknown_frames += it->second.unknown_frames;
      ps.freed_at_exit_frames += it->second.freed_at_exit_frames;
      ps.uncut += it->second.uncut;
      ps.no_origin += it->second.no_origin;
      return;
    }
    const std::uint64_t unknown_before = ps.unknown_frames, freed_before = ps.freed_at_exit_frames;
    const std::uint64_t uncut_before = ps.uncut, no_origin_before = ps.no_origin;
    const std::size_t stack = b.add(frames_of(e, ps), sample_weight(e));
    b.by_raw.emplace(std::move(key),
                     Builder::Cached{stack, static_cast<std::uint32_t>(ps.unknown_frames - unknown_before),
                                     static_cast<std::uint32_t>(ps.freed_at_exit_frames - freed_before),
                                     ps.uncut != uncut_before, ps.no_origin != no_origin_before});
  }

  std::uint64_t gaps = 0;  // damaged ranges of the trace file passed so far

  PerProcess& proc(std::uint32_t pid) {
    auto [it, fresh] = procs.try_emplace(pid);
    if (fresh) {
      it->second.out.pid = pid;
      it->second.gaps_seen = gaps;
      order.push_back(pid);
    }
    auto& pp = it->second;
    if (pp.gaps_seen != gaps) {
      // Records were lost: off-CPU periods and launches open before the
      // gap are not joined with what follows it.
      pp.blocked.clear();
      pp.last_launch.clear();
      pp.gaps_seen = gaps;
    }
    return pp;
  }

  // Root-first frames of a sample charged to the innermost action open on
  // its thread, named from the symbol records: the frames below the one
  // that opened the action, or all of them (--full-stacks, no action, no
  // opening frame known).
  std::vector<StackFrame> frames_of(const lt_py_sample_event& e, ProcessStacks& ps) {
    StackCut cut{std::min<unsigned>(e.nframes, LT_STACK_MAX), CutHow::none};
    if (!full_stacks) cut = cut_at_origin(e, actions.innermost_origin(e.hdr.pid, e.hdr.tid));
    if (cut.how == CutHow::not_found) ++ps.uncut;
    // In an action, yet no opening frame to cut at: a window no probe opens
    // (a manual optimizer_step), a start not under contextlib's __enter__,
    // stacks sampled from the middle of an action, a trace older than
    // ACTION_ORIGIN.
    if (!full_stacks && cut.how == CutHow::none && !actions.innermost_action(e.hdr.pid, e.hdr.tid).empty())
      ++ps.no_origin;
    std::vector<StackFrame> out;
    const unsigned n = cut.keep;
    out.reserve(n + 2);
    // The root side is missing: say so at the root, not silently (a cut
    // stack has its root: the opening frame, left out).
    if (!cut.cut() && (e.flags & LT_SAMPLE_TRUNCATED)) out.push_back({"[truncated]", "", 0, 0, false});
    if (!cut.cut() && (e.flags & LT_SAMPLE_READ_FAULT)) out.push_back({"[unreadable frames]", "", 0, 0, false});
    for (unsigned i = n; i-- > 0;) {
      const lt_py_frame& f = e.frames[i];
      if (const PyCodeSymbol* c = symbols.code(e.hdr.pid, f.code, f.checksum); !c || !c->readable)
        ++(c && c->freed_at_exit ? ps.freed_at_exit_frames : ps.unknown_frames);
      out.push_back(symbols.frame(e.hdr.pid, f));
    }
    if (const StackFrame* nat = symbols.native(e.hdr.pid, e.user_ip)) out.push_back(*nat);
    if (out.empty()) out.push_back({cut.cut() ? kOpeningFrame : "[no Python frames]", "", 0, 0, false});
    return out;
  }

  static std::string action_or_none(const std::string& a) { return a.empty() ? kNoAction : a; }
};

StackAggregator::StackAggregator(const ActionAggregator& actions, bool full_stacks)
    : s_(std::make_unique<State>(actions, full_stacks)) {}
StackAggregator::~StackAggregator() = default;

void StackAggregator::add(const lt_event_header& h, const std::byte* p) {
  auto& s = *s_;
  s.symbols.add(h, p);  // it picks out the kinds that name frames
  visit_record(
      h, p,
      overloaded{
          [&](const lt_event_header&, const lt_sampler_info_event& e) {
            s.rep.period_ns = (e.flags & LT_SAMPLER_ON_CPU) ? e.period_ns : 0;
            s.rep.rate_hz = e.rate_hz;
            s.rep.off_cpu = e.flags & LT_SAMPLER_OFF_CPU;
          },
          [&](const lt_event_header& h, const lt_proc_event& e) {
            if (h.kind == LT_EV_PROC_EXEC) {
              // A new program (its symbols went in s.symbols.add).
              if (auto it = s.procs.find(e.child_pid); it != s.procs.end()) it->second.blocked.clear();
              return;
            }
            if (h.kind == LT_EV_PROC_EXIT) {
              // Its threads will not run again: periods still open are not counted.
              if (auto it = s.procs.find(h.pid); it != s.procs.end()) {
                it->second.out.offcpu_open_at_end += it->second.blocked.size();
                it->second.blocked.clear();
              }
            }
          },
          [&](const lt_event_header& h, const lt_py_sample_event& e) {
            if (h.kind == LT_EV_PY_SAMPLE) {
              auto& pp = s.proc(h.pid);
              ++pp.out.samples;
              if (e.flags & LT_SAMPLE_NO_TSTATE) ++pp.out.samples_without_python;
              // Time in our own uprobes is our overhead, not the target's: charged
              // to no action and no stack (as in the op tables), only counted.
              if (e.flags & LT_SAMPLE_IN_PROBE) {
                ++pp.out.in_probe;
                return;
              }
              if (e.flags & LT_SAMPLE_TRUNCATED) ++pp.out.truncated;
              auto action = State::action_or_none(s.actions.innermost_action(h.pid, h.tid));
              s.add_sample(pp.on_cpu[action], e, pp.out);
              return;
            }
            if (h.kind == LT_EV_GPU_LAUNCH_STACK) {
              auto& pp = s.proc(h.pid);
              auto l = pp.last_launch.find(h.tid);
              if (l == pp.last_launch.end() || !l->second) return;  // uprobe launches have no correlation to join
              const std::uint32_t corr = l->second;
              pp.last_launch.erase(l);
              // Bounded: kernels run within seconds of their launch.
              if (pp.launched.size() >= 500'000) {
                pp.launched.erase(pp.launched_order.front());
                pp.launched_order.pop_front();
              }
              if (pp.launched
                      .insert_or_assign(
                          corr, PerProcess::Launched{State::action_or_none(s.actions.innermost_action(h.pid, h.tid)),
                                                     s.frames_of(e, pp.out)})
                      .second)
                pp.launched_order.push_back(corr);
              return;
            }
            if (h.kind == LT_EV_OFFCPU_BEGIN) {
              auto& pp = s.proc(h.pid);
              pp.blocked[h.tid] = {State::action_or_none(s.actions.innermost_action(h.pid, h.tid)),
                                   s.frames_of(e, pp.out), h.ts_ns};
            }
          },
          [&](const lt_event_header& h, const lt_gpu_launch_event& e) {
            if (!(e.flags & LT_LAUNCH_HAS_STACK)) return;
            s.proc(h.pid).last_launch[h.tid] = e.correlation;
          },
          [&](const lt_event_header& h, const lt_gpu_activity_event& e) {
            if (e.a.kind != LT_GPU_KERNEL && e.a.kind != LT_GPU_MEMCPY && e.a.kind != LT_GPU_MEMSET) return;
            auto it = s.procs.find(h.pid);
            if (it == s.procs.end()) return;
            auto l = it->second.launched.find(e.a.correlation);
            if (!e.a.correlation || l == it->second.launched.end()) return;
            // A graph launch runs many kernels under one correlation id: each adds.
            it->second.gpu[l->second.action].add(l->second.stack,
                                                 e.a.end_ns > e.a.start_ns ? e.a.end_ns - e.a.start_ns : 0);
            ++it->second.out.gpu_records;
          },
          [&](const lt_event_header& h, const lt_offcpu_end_event& e) {
            auto& pp = s.proc(h.pid);
            auto it = pp.blocked.find(h.tid);
            if (it == pp.blocked.end()) return;  // began before attach, or its begin was lost
            std::uint64_t ns = h.ts_ns > e.begin_ns ? h.ts_ns - e.begin_ns : 0;
            pp.off_cpu[it->second.action].add(it->second.stack, ns);
            ++pp.out.offcpu_periods;
            pp.blocked.erase(it);
          },
      });
}

void StackAggregator::gap() {
  ++s_->gaps;
}

StacksReport StackAggregator::finish() {
  auto& s = *s_;
  for (auto pid : s.order) {
    auto& pp = s.procs[pid];
    pp.out.offcpu_open_at_end += pp.blocked.size();
    // AdvancedProfiler's order: actions as they first began; then time
    // outside them.
    std::vector<std::string> names = s.actions.begin_order(pid);
    auto take = [&](std::map<std::string, Builder>& from, std::vector<StackProfile>& to, StackUnit unit) {
      auto emit = [&](const std::string& name) {
        auto it = from.find(name);
        if (it == from.end()) return;
        it->second.out.name = name;
        it->second.out.unit = unit;
        it->second.out.period_ns = unit == StackUnit::samples ? s.rep.period_ns : 0;
        to.push_back(std::move(it->second.out));
        from.erase(it);
      };
      for (auto& n : names) emit(n);
      // Actions that began before attach (not in begin_order), by name.
      std::vector<std::string> rest;
      for (auto& [n, b] : from)
        if (n != kNoAction) rest.push_back(n);
      for (auto& n : rest) emit(n);
      emit(kNoAction);
    };
    take(pp.on_cpu, pp.out.on_cpu, StackUnit::samples);
    take(pp.off_cpu, pp.out.off_cpu, StackUnit::nanoseconds);
    take(pp.gpu, pp.out.gpu, StackUnit::nanoseconds);
    if (pp.out.samples || pp.out.offcpu_periods || pp.out.gpu_records) s.rep.processes.push_back(std::move(pp.out));
  }
  return std::move(s.rep);
}

}  // namespace lt
