#include "reports/aggregate/stacks.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <tuple>
#include <unordered_map>

namespace lt {

namespace {

// Per process (so an exec drops one process's symbols in one step):
using CodeKey = std::pair<std::uint64_t, std::uint32_t>;                 // code, checksum
using LineKey = std::tuple<std::uint64_t, std::uint32_t, std::int32_t>;  // code, checksum, lasti

struct CodeSym {
  std::string name, file;
  int first_line = 0;
  bool readable = false;
};

// One StackProfile being built: frames and stacks interned.
struct Builder {
  StackProfile out;
  std::map<std::tuple<std::string, std::string, int, int, bool>, std::uint32_t> frame_index;
  std::map<std::vector<std::uint32_t>, std::size_t> stack_index;

  void add(const std::vector<StackFrame>& root_first, std::uint64_t weight) {
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
};

}  // namespace

namespace {
struct Symbols {
  std::map<CodeKey, CodeSym> codes;
  std::map<LineKey, int> lines;
  // Native leaf frames: one NATIVE_SYM per sampled instruction address,
  // and over a long attach the sampled addresses of a hot function keep
  // coming; each names its frame by index, each frame is stored once.
  std::unordered_map<std::uint64_t, std::uint32_t> natives;  // by instruction address
  std::vector<StackFrame> native_frames;
  std::map<std::pair<std::string, std::string>, std::uint32_t> native_frame_index;  // (function, dso)
  void add_native(std::uint64_t ip, StackFrame f) {
    auto [it, fresh] =
        native_frame_index.try_emplace({f.function, f.file}, static_cast<std::uint32_t>(native_frames.size()));
    if (fresh) native_frames.push_back(std::move(f));
    natives[ip] = it->second;
  }
};
}  // namespace

struct StackAggregator::State {
  const ActionAggregator& actions;
  StacksReport rep;
  std::map<std::uint32_t, Symbols> symbols;  // by pid
  std::map<std::uint32_t, PerProcess> procs;
  std::vector<std::uint32_t> order;

  explicit State(const ActionAggregator& a) : actions(a) {}

  PerProcess& proc(std::uint32_t pid) {
    auto [it, fresh] = procs.try_emplace(pid);
    if (fresh) {
      it->second.out.pid = pid;
      order.push_back(pid);
    }
    return it->second;
  }

  // Root-first frames of a sample, named from the symbol records.
  std::vector<StackFrame> frames_of(const lt_py_sample_event& e, ProcessStacks& ps) {
    std::vector<StackFrame> out;
    const unsigned n = std::min<unsigned>(e.nframes, LT_STACK_MAX);
    out.reserve(n + 2);
    // The root side is missing: say so at the root, not silently.
    if (e.flags & LT_SAMPLE_TRUNCATED) out.push_back({"[truncated]", "", 0, 0, false});
    if (e.flags & LT_SAMPLE_READ_FAULT) out.push_back({"[unreadable frames]", "", 0, 0, false});
    const Symbols& sym = symbols[e.hdr.pid];
    for (unsigned i = n; i-- > 0;) {
      const lt_py_frame& f = e.frames[i];
      StackFrame sf;
      auto c = sym.codes.find({f.code, f.checksum});
      if (c != sym.codes.end() && c->second.readable) {
        sf.function = c->second.name;
        sf.file = c->second.file;
        sf.first_line = c->second.first_line;
        auto l = sym.lines.find({f.code, f.checksum, f.lasti});
        sf.line = l != sym.lines.end() ? l->second : 0;
      } else {
        sf.function = "<unknown>";
        ++ps.unknown_frames;
      }
      out.push_back(std::move(sf));
    }
    if (auto nat = sym.natives.find(e.user_ip); nat != sym.natives.end()) out.push_back(sym.native_frames[nat->second]);
    if (out.empty()) out.push_back({"[no Python frames]", "", 0, 0, false});
    return out;
  }

  static std::string action_or_none(const std::string& a) { return a.empty() ? kNoAction : a; }
};

StackAggregator::StackAggregator(const ActionAggregator& actions) : s_(std::make_unique<State>(actions)) {}
StackAggregator::~StackAggregator() = default;

void StackAggregator::add(const lt_event_header& h, const std::byte* p) {
  auto& s = *s_;
  switch (h.kind) {
    case LT_EV_SAMPLER_INFO: {
      lt_sampler_info_event e;
      if (!record_as(h, p, e)) return;
      s.rep.period_ns = (e.flags & LT_SAMPLER_ON_CPU) ? e.period_ns : 0;
      s.rep.rate_hz = e.rate_hz;
      s.rep.off_cpu = e.flags & LT_SAMPLER_OFF_CPU;
      return;
    }
    case LT_EV_PY_CODE: {
      lt_py_code_event e;
      if (!record_as(h, p, e)) return;
      CodeSym c;
      c.readable = !(e.flags & LT_CODE_UNREADABLE);
      c.name.assign(e.name, strnlen(e.name, sizeof e.name));
      c.file.assign(e.file, strnlen(e.file, sizeof e.file));
      c.first_line = e.first_line;
      s.symbols[h.pid].codes[{e.code, e.checksum}] = std::move(c);
      return;
    }
    case LT_EV_PY_LINE: {
      lt_py_line_event e;
      if (!record_as(h, p, e)) return;
      s.symbols[h.pid].lines[{e.code, e.checksum, e.lasti}] = e.line;
      return;
    }
    case LT_EV_NATIVE_SYM: {
      lt_native_sym_event e;
      if (!record_as(h, p, e)) return;
      StackFrame f;
      f.function.assign(e.name, strnlen(e.name, sizeof e.name));
      f.file.assign(e.dso, strnlen(e.dso, sizeof e.dso));
      f.native = true;
      if (!f.function.empty()) s.symbols[h.pid].add_native(e.ip, std::move(f));
      return;
    }
    case LT_EV_PROC_EXEC: {
      // A new program: its addresses mean other things now.
      lt_proc_event e;
      if (!record_as(h, p, e)) return;
      s.symbols.erase(e.child_pid);
      if (auto it = s.procs.find(e.child_pid); it != s.procs.end()) it->second.blocked.clear();
      return;
    }
    case LT_EV_PROC_EXIT: {
      // Its threads will not run again: periods still open are not counted.
      if (auto it = s.procs.find(h.pid); it != s.procs.end()) {
        it->second.out.offcpu_open_at_end += it->second.blocked.size();
        it->second.blocked.clear();
      }
      return;
    }
    case LT_EV_PY_SAMPLE: {
      lt_py_sample_event e;
      if (!record_as(h, p, e)) return;
      auto& pp = s.proc(h.pid);
      ++pp.out.samples;
      if (e.flags & LT_SAMPLE_NO_TSTATE) ++pp.out.samples_without_python;
      if (e.flags & LT_SAMPLE_TRUNCATED) ++pp.out.truncated;
      auto action = State::action_or_none(s.actions.innermost_action(h.pid, h.tid));
      pp.on_cpu[action].add(s.frames_of(e, pp.out), 1);
      return;
    }
    case LT_EV_GPU_LAUNCH: {
      lt_gpu_launch_event e;
      if (!record_as(h, p, e) || !(e.flags & LT_LAUNCH_HAS_STACK)) return;
      s.proc(h.pid).last_launch[h.tid] = e.correlation;
      return;
    }
    case LT_EV_GPU_LAUNCH_STACK: {
      lt_py_sample_event e;
      if (!record_as(h, p, e)) return;
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
      if (pp.launched.insert_or_assign(corr, PerProcess::Launched{State::action_or_none(s.actions.innermost_action(
                                                                     h.pid, h.tid)),
                                                                 s.frames_of(e, pp.out)})
              .second)
        pp.launched_order.push_back(corr);
      return;
    }
    case LT_EV_GPU_ACTIVITY: {
      lt_gpu_activity_event e;
      if (!record_as(h, p, e)) return;
      if (e.a.kind != LT_GPU_KERNEL && e.a.kind != LT_GPU_MEMCPY && e.a.kind != LT_GPU_MEMSET) return;
      auto it = s.procs.find(h.pid);
      if (it == s.procs.end()) return;
      auto l = it->second.launched.find(e.a.correlation);
      if (!e.a.correlation || l == it->second.launched.end()) return;
      // A graph launch runs many kernels under one correlation id: each adds.
      it->second.gpu[l->second.action].add(l->second.stack, e.a.end_ns > e.a.start_ns ? e.a.end_ns - e.a.start_ns : 0);
      ++it->second.out.gpu_records;
      return;
    }
    case LT_EV_OFFCPU_BEGIN: {
      lt_py_sample_event e;
      if (!record_as(h, p, e)) return;
      auto& pp = s.proc(h.pid);
      pp.blocked[h.tid] = {State::action_or_none(s.actions.innermost_action(h.pid, h.tid)), s.frames_of(e, pp.out),
                           h.ts_ns};
      return;
    }
    case LT_EV_OFFCPU_END: {
      lt_offcpu_end_event e;
      if (!record_as(h, p, e)) return;
      auto& pp = s.proc(h.pid);
      auto it = pp.blocked.find(h.tid);
      if (it == pp.blocked.end()) return;  // began before attach, or its begin was lost
      std::uint64_t ns = h.ts_ns > e.begin_ns ? h.ts_ns - e.begin_ns : 0;
      pp.off_cpu[it->second.action].add(it->second.stack, ns);
      ++pp.out.offcpu_periods;
      pp.blocked.erase(it);
      return;
    }
    default:
      return;
  }
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
