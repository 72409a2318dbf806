#include "user/collector/op_tracer.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>

#include "user/collector/dynamo_notes.h"
#include "user/collector/op_observer.h"
#include "user/collector/record_normalizer.h"
#include "user/collector/session_options.h"
#include "user/collector/synthesized_records.h"
#include "user/collector/target_tracker.h"
#include "user/core/errors.h"
#include "user/proc/procfs.h"
#include "user/python/dynamo_state.h"
#include "user/python/symbolizer.h"
#include "user/sources/opprobe.h"

namespace lt {

namespace {
// torch.compile's kernel libraries are built and dlopen'ed while the job
// runs (a recompile): each op target's maps are looked at again, new
// libraries probed (docs/design-compile.md).  Calls before the look are
// missed: at most this long of a new kernel's first calls.
constexpr std::uint64_t kCompiledScanNs = 200'000'000;
// What Dynamo kept: its newest 64 compiles.
constexpr std::uint64_t kDynamoScanNs = 2'000'000'000;
// A process probed at its torch's load that something still traces this
// long after (a debugger; our holder lets go within its library wait):
// the probes stay.
constexpr std::uint64_t kLateWaitNs = 30'000'000'000;

}  // namespace

OpTracer::OpTracer(const TracerContext& ctx)
    : ctx_(ctx),
      source_(std::make_unique<OpProbeSource>(ctx.proctrack)),
      probes_(std::make_unique<OpProbes>(*source_, ctx.opts.op_filters, ctx.emit)),
      observer_(std::make_unique<OpObserver>(ctx, *source_, *probes_)),
      dynamo_(std::make_unique<DynamoNotes>(ctx.emit)),
      compiled_scan_{kCompiledScanNs, monotonic_ns()},
      dynamo_scan_{kDynamoScanNs, monotonic_ns()} {}

OpTracer::~OpTracer() = default;

int OpTracer::op_stacks_fd() const {
  return source_ ? source_->stacks_fd() : -1;
}

pid_t OpTracer::filter(pid_t pid) const {
  return ctx_.opts.children ? -1 : pid;
}

// A DataLoader worker and the like: its parent's bridge came with the fork,
// without a poll thread.
bool OpTracer::fork_of_observed(pid_t pid) const {
  const pid_t ppid = proc::read_ppid(pid);
  return observer_->active(ppid) || observer_->pending(ppid);
}

std::string OpTracer::observer_unwanted(pid_t pid) const {
  if (!ctx_.opts.inject) return "--no-inject";
  // torch.compile in use (a compile or a graph break on record; Lightning
  // imports Dynamo whether or not anything is compiled): inductor's kernels
  // are not RecordFunction calls; the probes name them and their regions.
  if (const auto* interp = ctx_.targets.live(pid)) {
    const auto dynamo = python::DynamoStateReader().read(*interp);
    if (dynamo && (!dynamo->compiles.empty() || !dynamo->graph_breaks.empty()))
      return "torch.compile is in use: its kernels and regions are the op probes'";
  }
  return "";
}

// The op observer where it can be had (its handshake settles in tick());
// else shapes on before the op probes, so that no call goes without them,
// and the compiled code after.
bool OpTracer::attach(pid_t pid, pid_t pid_filter) {
  if (observer_->active(pid) || observer_->pending(pid)) return true;
  if (ctx_.opts.ops_on_demand) {  // watch: nothing until escalated
    if (!proc::find_mapped_library(pid, "libtorch_cpu.so")) return false;
    on_demand_.insert(pid);
    return true;
  }
  if (!proc::find_mapped_library(pid, "libtorch_cpu.so")) {
    torch_late_.insert(pid);
    return false;
  }
  // Adopted before its torch loaded (run, --all, a held exec): the probes
  // now, at the load (held there, before torch's code ran), and the
  // observer once it runs free (start_late).
  if (torch_late_.count(pid) && observer_tried_.insert(pid).second) {
    if (!use_probes(pid, pid_filter)) return false;
    late_[pid] = {monotonic_ns(), pid_filter};
    return true;
  }
  if (observer_tried_.insert(pid).second) {
    std::string why = observer_unwanted(pid);
    // A fork of an observed process (a DataLoader worker) inherits the
    // callback, disabled: its bridge has no poll thread.  Its own probes,
    // scoped to it, so the observed parent takes no trap per op.
    if (why.empty() && fork_of_observed(pid)) {
      why = "a fork of a process the op observer records";
      pid_filter = pid;
    }
    // A bad --ops fails as it does with the probes.
    if (why.empty() && !ctx_.opts.op_filters.empty()) probes_->catalogue(pid);
    if (why.empty()) why = observer_->start(pid);
    if (why.empty()) {
      pending_filter_[pid] = pid_filter;
      // At the session's first attach (before its window opens) the
      // handshake is waited for here, so that the window's ops are all
      // there; a process adopted later settles at the ticks (the drain
      // loop never stalls on it).
      if (!ticked_) settle_now(pid);
      return true;
    }
    not_observed(pid, why);
  }
  return use_probes(pid, pid_filter);
}

// Processes probed at their torch's load, once nothing holds them (our
// holder lets go when its libraries are in; the injection needs ptrace and
// the loader free): the observer's handshake, the probes recording on
// until it ends.  Their forks (DataLoader workers) keep the probes.
void OpTracer::start_late(std::uint64_t now) {
  for (auto it = late_.begin(); it != late_.end();) {
    const pid_t pid = it->first;
    // Gone, or finalizing (never injected into then: its probes see it out).
    if (!ctx_.targets.live_and_alive(pid) || !attached_.count(pid) || ctx_.shutting_down_since(pid)) {
      if (ctx_.opts.verbose && !ctx_.shutting_down_since(pid) && proc::exists(pid))
        std::fprintf(stderr, "ltrace-bpf: pid %d: ops: no op observer: %s\n", pid,
                     attached_.count(pid) ? "no longer a live target" : "its op probes are out");
      it = late_.erase(it);
      continue;
    }
    // Our holder's seize (awaiting more libraries) ends within its own
    // bound; someone else's (a debugger) is waited for kLateWaitNs.
    if (const pid_t tracer = proc::traced_by(pid)) {
      if (tracer == getpid() || now < it->second.since + kLateWaitNs) {
        ++it;
        continue;
      }
      late_not_observed(pid, "traced by pid " + std::to_string(tracer) + " since its torch loaded");
      it = late_.erase(it);
      continue;
    }
    // LTRACE_BPF_LATE_OBSERVER_GATE=FILE: not before FILE exists (the tests'
    // way to have calls on both sides of the switch).
    static const char* gate = std::getenv("LTRACE_BPF_LATE_OBSERVER_GATE");
    if (gate && access(gate, F_OK) != 0) {
      ++it;
      continue;
    }
    std::string why = fork_of_observed(pid) ? "a fork of a process the op observer records" : observer_unwanted(pid);
    if (why.empty()) why = observer_->start(pid);
    if (why.empty()) {
      late_pending_.insert(pid);
      pending_filter_[pid] = it->second.filter;
    } else {
      late_not_observed(pid, why);
    }
    it = late_.erase(it);
  }
}

// watch's escalation: the op observer from now on (its handshake settles
// at the ticks), or off again. No probes: their trap per op is not the
// cheap tier's, and their times would be samples at its low rate.
std::string OpTracer::escalate(pid_t pid, bool on) {
  if (!ctx_.opts.ops_on_demand) return "";
  if (!on) {
    if (observer_->pending(pid)) {
      off_when_settled_.insert(pid);
      return "ops off once the op observer's handshake ends";
    }
    if (!observer_->active(pid)) return "";
    observer_->forget(pid);  // its last calls, its final OP_OBSERVER record, its semaphore down
    return "ops off (the op observer's callback goes within the bridge's poll)";
  }
  off_when_settled_.erase(pid);
  if (observer_->active(pid) || observer_->pending(pid)) return "";
  if (!on_demand_.count(pid)) return "";  // no torch (yet)
  // A fork of a watched torch process (a DataLoader worker): its parent's
  // ops are the job's; the bridge would have no poll thread in it anyway.
  if (on_demand_.count(proc::read_ppid(pid))) return "";
  std::string why = observer_unwanted(pid);
  if (why.empty()) why = observer_->start(pid);
  if (!why.empty()) {
    not_observed(pid, why);
    return "no ops (the op observer cannot be had: " + why + ")";
  }
  return "ops: the op observer, from the end of its handshake";
}

// Its handshake ended: recording, or the probes instead.
void OpTracer::settled(pid_t pid, const std::string& why) {
  if (ctx_.opts.ops_on_demand) {  // watch: the observer or nothing
    if (!why.empty()) return not_observed(pid, why);
    if (off_when_settled_.erase(pid)) return observer_->forget(pid);
    if (ctx_.opts.verbose) std::fprintf(stderr, "ltrace-bpf: pid %d: ops: the op observer records\n", pid);
    return;
  }
  if (late_pending_.erase(pid)) {  // its probes recorded meanwhile and stay in on failure
    pending_filter_.erase(pid);
    if (!why.empty()) return late_not_observed(pid, why);
    // The probes stop recording it: BPF drops what they see of it (they
    // stay attached, a trap per op still: for its forks under --children,
    // and because a pid-scoped link is not taken out here). The observer's
    // calls that began before are theirs. Each side times a call by its
    // own moment (the probe's hit, then torch's RecordFunction start, less
    // than a microsecond apart): a call whose two moments straddle the
    // switch may be counted by neither.
    ctx_.retarget(pid);
    observer_->take_over_from_probes(pid, monotonic_ns());
    if (ctx_.opts.verbose)  // now, not at the end: the switch is a moment of the run
      std::fprintf(stderr,
                   "ltrace-bpf: pid %d: ops: the op observer measures every call from here on (the op probes "
                   "counted the calls before, their times sampled)\n",
                   pid);
    return;
  }
  const pid_t pid_filter = pending_filter_.count(pid) ? pending_filter_[pid] : pid;
  pending_filter_.erase(pid);
  if (!why.empty()) {
    not_observed(pid, why);
    try {
      if (!use_probes(pid, pid_filter))
        ctx_.note("pid " + std::to_string(pid) + ": libtorch is gone; its ops are missing from the report");
    } catch (const Error& e) {
      ctx_.note("pid " + std::to_string(pid) + ": " + e.what() + "; its ops are missing from the report");
    }
    return;
  }
  // --children: its forks (DataLoader workers) have no observer; the op
  // probes on its libtorch are inherited at the fork and report for a
  // fork from its first op (BPF gives it OPS: LT_TARGET_FORKS_OPS).  They
  // fire in this process too, where BPF drops what they see: the cost of a
  // trap per op, not of a record.
  if (ctx_.opts.children) {
    try {
      probes_->attach(pid, -1);
    } catch (const Error& e) {
      ctx_.note("pid " + std::to_string(pid) + ": " + e.what() + "; its forks' ops are missing from the report");
    }
  }
  ctx_.retarget(pid);  // no OP records, no samples for op times
  if (ctx_.opts.verbose) ctx_.note("pid " + std::to_string(pid) + ": ops: the op observer measures every call");
}

// torch.compile began in an observed process (a compiled function was
// called: Dynamo's cache lookup, before its first compile): inductor's kernels are no RecordFunction calls, and the
// compile report reads Dynamo for the regions the probes see; so the op probes again, from now on (the observer reads
// out the calls that began before, then closes: each call counted once, by the side that saw it begin, as at run's
// switch). Not in watch (ops on demand: the observer or nothing).
void OpTracer::back_to_probes(pid_t pid) {
  if (ctx_.opts.ops_on_demand || !ctx_.targets.live_and_alive(pid)) return;
  try {
    if (!use_probes(pid, filter(pid))) {
      ctx_.note("pid " + std::to_string(pid) + ": libtorch is gone; its ops are missing from the report");
      return;
    }
  } catch (const Error& e) {
    ctx_.note("pid " + std::to_string(pid) + ": " + e.what() + "; the op observer stays");
    return;
  }
  // The probes are in (their BPF side still drops this process): from now
  // on its calls are theirs; the observer reads out the earlier ones.
  observer_->hand_over_to_probes(pid, monotonic_ns());
  ctx_.retarget(pid);
  not_observed(pid, "torch.compile began: its kernels and regions are the op probes'");
  if (ctx_.opts.verbose)
    std::fprintf(stderr, "ltrace-bpf: pid %d: ops: torch.compile began: back to the op probes\n", pid);
}

void OpTracer::not_observed(pid_t pid, const std::string& why) {
  // The ops report says it, from the record below, beside its tables (one
  // line, live or offline); a note only where no such report is printed.
  const bool ops_report = ("," + ctx_.opts.reports + ",").find(",ops,") != std::string::npos;
  if (ctx_.opts.ops_on_demand || !ops_report)
    ctx_.note("pid " + std::to_string(pid) + ": op observer not used (" + why + ")" +
              (ctx_.opts.ops_on_demand ? ": no ops after this trigger" : ": op CPU times are sampled estimates"));
  lt_op_observer_event e{};
  e.hdr = user_header(LT_EV_OP_OBSERVER, sizeof e, pid, monotonic_ns());
  e.how = LT_OP_TIMES_SAMPLED;
  std::memcpy(e.detail, why.data(), std::min(why.size(), sizeof e.detail - 1));
  ctx_.emit(&e, sizeof e);
}

// A switch that did not come: said at once under -v, as the switch is
// (the ops report says it too, at the end).
void OpTracer::late_not_observed(pid_t pid, const std::string& why) {
  if (ctx_.opts.verbose)  // std::cerr: `why` may carry the target's bytes (its filters make them text)
    std::cerr << "ltrace-bpf: pid " << pid << ": ops: the op observer does not take over (" << why
              << "): the op probes record on\n";
  not_observed(pid, why);
}

// The op probes on pid's libtorch (false: not mapped).
bool OpTracer::use_probes(pid_t pid, pid_t pid_filter) {
  if (ctx_.opts.shapes && !tensor_vtables_[pid]) {
    tensor_vtables_[pid] = probes_->tensor_vtable(pid);
    if (tensor_vtables_[pid]) ctx_.retarget(pid);
  }
  if (!probes_->attach(pid, pid_filter)) return false;
  attached_.insert(pid);
  probes_->attach_compiled(pid, pid_filter);
  if (ctx_.opts.shapes && !tensor_vtables_[pid])
    ctx_.note("pid " + std::to_string(pid) +
              ": c10::TensorImpl's vtable not found in libc10.so; input shapes show as []");
  return true;
}

// watch's on-demand ops need no probes in before a new process's first op.
bool OpTracer::holds_at_load() const {
  return !ctx_.opts.ops_on_demand;
}

bool OpTracer::settling(pid_t pid) const {
  return observer_->pending(pid);
}

std::string OpTracer::describe(pid_t pid) const {
  if (observer_->active(pid)) return "ops: the op observer in the job (exact times)";
  if (ctx_.opts.ops_on_demand) return "ops: the op observer when escalated";
  return probes_->describe();
}

// Op times come from samples, which need no Python stack (tsd_block 0
// tells BPF to skip the walk).
void OpTracer::fill_target(pid_t pid, lt_target& t) const {
  if (ctx_.opts.ops_on_demand) return;  // the observer or nothing: no probes, no samples for op times
  if (observer_->active(pid)) {         // the observer measures its ops; its forks get the probes
    if (ctx_.opts.children) t.flags |= LT_TARGET_FORKS_OPS;
    return;
  }
  t.flags |= LT_TARGET_OPS | (ctx_.opts.sample_rate_hz ? LT_TARGET_SAMPLE : 0);
  if (auto v = tensor_vtables_.find(pid); v != tensor_vtables_.end() && v->second) {
    t.tensor_vtable = v->second;
    t.flags |= LT_TARGET_SHAPES;
  }
}

void OpTracer::forget(pid_t pid) {
  observer_->forget(pid);
  pending_filter_.erase(pid);
  observer_tried_.erase(pid);  // a new image chooses again
  torch_late_.erase(pid);
  late_.erase(pid);
  late_pending_.erase(pid);
  on_demand_.erase(pid);
  off_when_settled_.erase(pid);
  dynamo_->forget(pid);
  regions_.erase(pid);
  tensor_vtables_.erase(pid);  // a new image maps its own libc10
}

void OpTracer::observe(const lt_event_header& h, std::span<const std::byte> record) {
  for (std::uint32_t op : ops_named(record)) probes_->announce(op);
  if (h.kind == LT_EV_REGION_CODE) describe_region(h, record);
}

// The function a compiled region runs for, named while its frame runs.
void OpTracer::describe_region(const lt_event_header& h, std::span<const std::byte> record) {
  const auto pid = static_cast<pid_t>(h.pid);
  const auto* interp = ctx_.targets.live(pid);
  lt_region_code_event e;
  std::memcpy(static_cast<void*>(&e), record.data(), sizeof e);
  // A region's first run follows its compile (Dynamo has recorded it by
  // then): read now, while the process surely runs, not only every 2 s.
  if (interp && regions_[pid].insert(e.op).second) dynamo_->read(*interp, h.ts_ns);
  if (interp && e.code) ctx_.symbolizer().describe_code(pid, e.code, e.checksum, *interp, h.ts_ns);
}

void OpTracer::settle_now(pid_t pid) {
  while (observer_->pending(pid)) {
    for (const auto& [p, why] : observer_->settle()) settled(p, why);
    if (observer_->pending(pid)) {
      struct timespec t = {0, 5'000'000};
      nanosleep(&t, nullptr);
    }
  }
}

void OpTracer::tick(std::uint64_t now) {
  ticked_ = true;
  if (!late_.empty()) start_late(now);
  for (const auto& [pid, why] : observer_->settle()) settled(pid, why);
  observer_->drain();
  for (pid_t pid : observer_->take_compiled()) back_to_probes(pid);
  if (compiled_scan_.due(now)) attach_compiled();
  if (dynamo_scan_.due(now)) read_dynamo(now);
}

// Compiled code and Dynamo's records change only while the target runs:
// their scans wait for records (they are overdue by then). What cannot
// wait: a late switch (TracerPid looked at), and an observer whose calls
// would otherwise sit unread. A thread running ops is on a CPU, so a
// target whose stacks are sampled wakes the loop itself within a sample
// period; below ~50 Hz that is longer than the loop's turn, so poll.
std::uint64_t OpTracer::next_tick_ns(std::uint64_t /*now*/) const {
  if (!late_.empty()) return kTickSoon;
  // (A sample is sent with or without the thread's Python state.)
  const bool wakes = ctx_.opts.sample_rate_hz >= 50;
  return observer_ && observer_->needs_polling([wakes](pid_t) { return wakes; }) ? kTickSoon : kTickNever;
}

void OpTracer::attach_compiled() {
  for (auto it = attached_.begin(); it != attached_.end();) {
    const pid_t pid = *it;
    if (!ctx_.targets.live_and_alive(pid)) {
      it = attached_.erase(it);
      continue;
    }
    ++it;
    try {
      for (const auto& k : probes_->attach_compiled(pid, filter(pid)))
        if (ctx_.opts.verbose) std::fprintf(stderr, "ltrace-bpf: pid %d: %s probed\n", pid, k.c_str());
    } catch (const Error& e) {
      ctx_.note("pid " + std::to_string(pid) + ": " + e.what() + "; some compiled kernels are missing");
    }
  }
}

// What Dynamo kept about the compiles of the targets that run compiled
// regions (describe_region reads too, at each region's first run): every
// kDynamoScanNs, since it keeps only its newest 64, and at the end.  Only
// those targets: finding Dynamo walks sys.modules once per process.
void OpTracer::read_dynamo(std::uint64_t now) {
  for (const auto& [pid, regions] : regions_)
    if (const auto* interp = ctx_.targets.live(pid); interp && ctx_.targets.live_and_alive(pid))
      dynamo_->read(*interp, now);
}

void OpTracer::last_look(std::uint64_t now) {
  read_dynamo(now);
  if (ctx_.opts.verbose && dynamo_->cost().reads)
    std::fprintf(stderr, "ltrace-bpf: Dynamo's records read %u times: first %.1f ms, later at most %.1f ms\n",
                 dynamo_->cost().reads, dynamo_->cost().first_ms, dynamo_->cost().max_later_ms);
}

// The observers' last calls come in while their semaphores are still up.
void OpTracer::flush(const std::function<bool()>&) {
  observer_->finish();
}

void OpTracer::detach() {
  observer_->finish();
  source_.reset();
}

std::string OpTracer::summary() const {
  return " (op probes: " + std::to_string(probes_->probes()) + " in " +
         std::to_string(static_cast<int>(probes_->attach_ms())) + " ms)";
}

}  // namespace lt
