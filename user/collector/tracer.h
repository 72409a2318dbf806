// The seam between Session and each source of records: the Lightning
// actions, the stack sampler, ops, memory, collectives, XLA, GC, GPU (the
// process tracker and the library-load probe, which every target needs,
// Session owns itself). Session is the
// drain loop and the target tracking; it holds a list of tracers and calls
// the same hooks on each:
//   adopt(interp)      a target is adopted (probes on the interpreter);
//   attach(pid)        probes on a library the target loads when it likes:
//                      tried at adoption and, until it is there, again by
//                      the one pending-attach poller (PendingAttach), or at
//                      once when a held CPython loads a library;
//   fill_target(pid)   its bits of the target's entry in BPF's table;
//   observe(record)    each record before it is written (names ahead of it);
//   tick(now)          between two drains; forget(pid) at an exec or exit;
//   last_look, flush, detach  at the end, in that order: every tracer's
//                      data in flight is drained (flush) while every probe
//                      is still in, then the probes come out.
// A tracer owns its loader (the BPF objects and links): Session names none
// of them. Adding a source = its BPF program, its loader (user/sources), a
// Tracer, and one line in the catalogue (user/collector/tracers.cpp).
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bpf/events.h"

namespace lt {

namespace python {
struct Interpreter;
class Symbolizer;
}  // namespace python
class ProcTrackSource;
class TargetTracker;
struct SessionOptions;

// What a tracer may use of the session.
struct TracerContext {
  const SessionOptions& opts;
  const ProcTrackSource& proctrack;  // the shared process table and ring
  const TargetTracker& targets;      // adopted processes and their interpreters
  // The op probes' per-thread op stacks (-1: no ops traced); set once the
  // op tracer is made, which the catalogue makes first.
  int op_stacks_fd = -1;
  std::function<void(const void*, std::size_t)> emit;  // a record into the trace
  std::function<void(std::string)> note;               // a note for stderr at the end
  std::function<void(pid_t)> retarget;                 // fill_target() changed: BPF's entry again
  std::function<python::Symbolizer&()> symbolizer;     // code objects named once, shared
  // When a target's interpreter went on past its hold at Py_FinalizeEx, or
  // 0 (TargetHolder::shutting_down_since).
  std::function<std::uint64_t(pid_t)> shutting_down_since = [](pid_t) { return std::uint64_t{0}; };
  // When the last read of the ring began: every record BPF wrote before it
  // is in the stream.  Records made elsewhere (the op observer's calls) up
  // to that time can go in after the actions around them.
  std::function<std::uint64_t()> ring_read_at = [] { return UINT64_MAX; };
};

class Tracer {
 public:
  virtual ~Tracer() = default;
  virtual std::string_view name() const = 0;

  // --- per target ---
  // A target is adopted; pid_filter -1: every process of its binary (its
  // children).  Throws lt::Error: the adoption fails.
  virtual void adopt(const python::Interpreter&, pid_t /*pid_filter*/) {}
  // Whether this tracer's probes go on a library (attach() is polled).
  virtual bool library() const { return false; }
  // Probes `pid`'s library (pid_filter -1: every process mapping it).
  // False when it has not loaded it yet. Throws lt::Error.
  virtual bool attach(pid_t /*pid*/, pid_t /*pid_filter*/) { return true; }
  // What a note says when attach() fails: "its ops are missing from the report".
  virtual const char* lost() const { return "its data is missing from the report"; }
  // The last attach, for --verbose.
  virtual std::string describe(pid_t) const { return std::string(name()); }
  // Notes from the last attach ("pid N: " is added).
  virtual std::vector<std::string> take_notes() { return {}; }
  // Whether a CPython held at its exec is kept seized until this tracer's
  // library loads (user/sources/libload.h), so that its probes are in
  // before the library's code runs.  Not for one that ptraces the target
  // itself (the GPU tracer injects its bridge).
  virtual bool holds_at_load() const { return library(); }
  // Its LT_TARGET_* bits (and fields) of pid's entry in the shared target
  // table, so that its BPF programs take the target's events. `t` has the
  // session's own bits already (thread-state lookup, children).
  virtual void fill_target(pid_t /*pid*/, lt_target& /*t*/) const {}
  // A process exec'd or exited: what was kept about it can go.
  virtual void forget(pid_t) {}
  // Whether pid's data is still coming up (the attach waits a while).
  virtual bool settling(pid_t) const { return false; }
  // watch's escalation (Session::escalate): record more of pid from now on
  // (on), or go back to the cheap tier (off). Returns what it does now, one
  // line ("" when this tracer has nothing on demand).
  virtual std::string escalate(pid_t /*pid*/, bool /*on*/) { return ""; }

  // --- the session ---
  // Each record, before it is written (names it needs go in ahead of it).
  virtual void observe(const lt_event_header&, std::span<const std::byte> /*record*/) {}
  // Between two drains.
  virtual void tick(std::uint64_t /*now*/) {}
  // When tick() next has work the loop must wake for while no record comes
  // (CLOCK_MONOTONIC ns): kTickSoon for the loop's next regular turn (~20
  // ms), kTickNever when only a record can bring it any (while records come
  // the loop ticks every turn anyway).
  static constexpr std::uint64_t kTickSoon = 0, kTickNever = UINT64_MAX;
  virtual std::uint64_t next_tick_ns(std::uint64_t /*now*/) const { return kTickNever; }
  // The drain loop ended; the targets are as they were.
  virtual void last_look(std::uint64_t /*now*/) {}
  // What is still in flight comes in (the GPU bridges flush CUPTI);
  // `drain` reads the ring (false: stop reading). Every probe is still in.
  virtual void flush(const std::function<bool()>& /*drain*/) {}
  // Its probes come out (the ring is drained after).
  virtual void detach() {}
  virtual std::size_t probes() const { return 0; }
  // For the --verbose "attached" line ("" for nothing).
  virtual std::string summary() const { return ""; }
  // The per-thread op stacks map others join (the op tracer's), else -1.
  virtual int op_stacks_fd() const { return -1; }
};

}  // namespace lt
