#include "user/collector/stack_tracer.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>

#include "user/collector/record_normalizer.h"
#include "user/collector/session_options.h"
#include "user/collector/synthesized_records.h"
#include "user/collector/target_tracker.h"
#include "user/core/errors.h"
#include "user/model/record_kinds.h"
#include "user/proc/native_symbols.h"
#include "user/proc/procfs.h"
#include "user/python/symbolizer.h"
#include "user/sources/pysample.h"
#include "user/torch/compiled_code.h"

namespace lt {

namespace {
// A sample's leaf in one of inductor's kernel libraries is its `kernel`:
// named as the op table names it (cpp_fused_relu_0, from the generated
// module beside it), so flame graphs and Advanced stacks end in the fused
// kernel, not in "kernel (c<hash>.main.so)".  Each library is read once:
// every sampled address in it asks.
proc::NativeSymbols::Renamer inductor_leaf_names() {
  auto known = std::make_shared<std::map<std::string, std::optional<std::string>>>();
  return [known](pid_t pid, const proc::NativeName& n) -> std::optional<std::string> {
    if (n.function != "kernel" || !maybe_inductor_library(n.path)) return std::nullopt;
    const std::string at = proc::root_path(pid, n.path);
    auto it = known->find(at);
    if (it != known->end()) return it->second;
    std::optional<std::string> name;
    try {
      const auto slash = n.path.rfind('/');
      auto k = inductor_kernel(at, proc::root_path(pid, n.path.substr(0, slash)), n.path.substr(slash + 1));
      if (k && !k->name.empty()) name = k->name;
    } catch (const Error&) {  // unreadable now: keep the symbol
    }
    return known->emplace(at, std::move(name)).first->second;
  };
}
}  // namespace

namespace {
// The DataLoader workers' waits (the verdict's input-bound finding) where
// they can be seen: the targets' forks followed, and not every target's
// blocking asked for already (--off-cpu).
bool forks_blocking_only(const SessionOptions& o) {
  return o.sources.fork_waits && (o.children || o.all) && !o.off_cpu;
}
}  // namespace

StackTracer::StackTracer(const TracerContext& ctx)
    : ctx_(ctx),
      source_(std::make_unique<PySampleSource>(ctx.proctrack, ctx.opts.sample_rate_hz,
                                               ctx.opts.off_cpu || forks_blocking_only(ctx.opts), ctx.op_stacks_fd,
                                               ctx.opts.escalated_rate_hz)),
      natives_(std::make_unique<proc::NativeSymbols>(ctx.emit, inductor_leaf_names())),
      fork_waits_(forks_blocking_only(ctx.opts)) {
  const unsigned rate = source_->weighted() ? ctx.opts.escalated_rate_hz : ctx.opts.sample_rate_hz;
  const auto info = sampler_info_record(source_->period_ns(), rate, ctx.opts.off_cpu, monotonic_ns(),
                                        source_->weighted(), fork_waits_);
  ctx.emit(&info, sizeof info);
}

StackTracer::~StackTracer() = default;

// Sampled only where BPF can find the thread states (the session looked
// for their key at the adoption).
void StackTracer::fill_target(pid_t pid, lt_target& t) const {
  if (!ctx_.targets.tsd(pid)) return;
  t.flags |= (ctx_.opts.sample_rate_hz ? LT_TARGET_SAMPLE : 0) | (ctx_.opts.off_cpu ? LT_TARGET_OFF_CPU : 0);
  // Its forks' blocking (a fork of a target is one already: BPF marked it
  // at the fork, from its first block; this keeps it so).
  if (fork_waits_) {
    t.flags |= LT_TARGET_FORKS_OFF_CPU;
    if (!ctx_.targets.ancestors(pid).empty() && !acting_forks_.count(pid)) t.flags |= LT_TARGET_OFF_CPU;
  }
  static const bool by_code_asked = [] {
    const char* v = std::getenv("LTRACE_BPF_ORIGIN_BY_CODE");
    return v && *v == '1';
  }();
  if (ctx_.opts.origin_by_code || by_code_asked) t.flags |= LT_TARGET_ORIGIN_BY_CODE;
  if (full_rate_.count(pid)) t.flags |= LT_TARGET_SAMPLE_FULL;
}

// watch's escalation: the target's stacks at the full rate (its own set of
// perf events, opened while any target has it), or back at the cheap one.
// The events first, then the flag; the flag off, then the events.
std::string StackTracer::escalate(pid_t pid, bool on) {
  if (!source_ || !source_->weighted() || on == static_cast<bool>(full_rate_.count(pid))) return "";
  if (on && !ctx_.targets.tsd(pid)) return "";  // not sampled at all (its thread states unknown)
  if (on) {
    try {
      source_->set_full_rate(true);
    } catch (const Error& e) {
      return std::string("stacks at the cheap rate (the full-rate sampler: ") + e.what() + ")";
    }
    full_rate_.insert(pid);
  } else {
    full_rate_.erase(pid);
  }
  if (ctx_.retarget) ctx_.retarget(pid);
  if (!on && full_rate_.empty()) source_->set_full_rate(false);
  return on ? "stacks at " + std::to_string(ctx_.opts.escalated_rate_hz) + " Hz" : "stacks at the cheap rate";
}

void StackTracer::forget(pid_t pid) {
  natives_->forget(pid);
  acting_forks_.erase(pid);
  full_rate_.erase(pid);
  if (full_rate_.empty() && source_) source_->set_full_rate(false);
}

void StackTracer::observe(const lt_event_header& h, std::span<const std::byte> record) {
  if (h.kind == LT_EV_PROC_FORK && !acting_forks_.empty()) {  // a new process: a reused pid is not the old one
    lt_proc_event f;
    std::memcpy(static_cast<void*>(&f), record.data(), sizeof f);
    acting_forks_.erase(static_cast<pid_t>(f.child_pid));
  }
  // A fork that runs Lightning actions is a trainer (a ddp_fork rank, a
  // fit in a notebook's fork), not a DataLoader worker: its own blocking
  // is not recorded from now on (its forks' still is).
  if (fork_waits_ && h.kind == LT_EV_ACTION_BEGIN && !acting_forks_.count(static_cast<pid_t>(h.pid)) &&
      !ctx_.targets.ancestors(static_cast<pid_t>(h.pid)).empty()) {
    acting_forks_.insert(static_cast<pid_t>(h.pid));
    ctx_.retarget(static_cast<pid_t>(h.pid));
  }
  if (!carries_stack(h.kind)) return;
  const auto pid = static_cast<pid_t>(h.pid);
  const auto* interp = ctx_.targets.live(pid);
  if (!interp) return;
  lt_py_sample_event e;
  std::memcpy(static_cast<void*>(&e), record.data(), sizeof e);
  ctx_.symbolizer().describe(e, *interp, ctx_.targets.ancestors(pid), ctx_.shutting_down_since(pid));
  // No native leaf for a collective's stack (its report shows the Python
  // frames). A leaf in a library whose symbols are still being read (in the
  // background: libtorch_cpu's take ~150 ms, which the drain once spent
  // while short-lived code objects died unread) is left off that stack.
  if (h.kind != LT_EV_COMM_STACK && !natives_->describe(pid, e.user_ip, interp->binary, h.ts_ns))
    ++leaves_while_loading_;
}

void StackTracer::detach() {
  if (leaves_while_loading_)
    ctx_.note(std::to_string(leaves_while_loading_) +
              " stack(s) kept without their native leaf: sampled while its library's symbols were still being read");
  source_.reset();
}

}  // namespace lt
