// A live attach: discovers targets, loads and attaches the sources, drains
// the ring buffer into a Trace until a stop condition, then detaches.
// Stop conditions: SIGINT/SIGTERM, --duration, or every target gone.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "bpf/events.h"
#include "user/collector/every.h"
#include "user/collector/exec_pairing.h"
#include "user/collector/pending_attach.h"
#include "user/collector/record_normalizer.h"
#include "user/collector/session_options.h"
#include "user/collector/source_set.h"
#include "user/collector/synthesized_records.h"
#include "user/collector/target_tracker.h"
#include "user/collector/tracer.h"
#include "user/core/errors.h"
#include "user/model/trace.h"
#include "user/python/discovery.h"
#include "user/python/thread_states.h"
#include "user/tracefile/trace_writer.h"

struct ring_buffer;

namespace lt {

class ProcTrackSource;
class ActionTracer;
class TargetHolder;
class LibLoadSource;
class StatsSampler;
namespace python {
class Symbolizer;
}  // namespace python
namespace proc {
class EligibleWatcher;
}  // namespace proc

struct SessionStats {
  double attach_latency_ms = 0;  // session start -> probes live
  std::size_t probes = 0;
  std::size_t processes = 0;
  std::size_t found = 0;   // --all: eligible processes met
  std::size_t traced = 0;  // processes adopted with probes (forked children included)
  int first_refusal = 0;   // --all: the exit code of the first one that could not be profiled
  // Processes met on the way (a child, an exec) whose adoption failed for
  // another reason than not being a CPython we read, and that are gone by
  // the end: they exited while we were attaching.
  std::vector<pid_t> exited_during_attach;
  std::uint64_t records = 0;
  std::uint64_t file_bytes = 0;
  // A live report's -o file that failed: the error (its code is the exit
  // status after the report) and what had been written; 0 / "" when none.
  int file_error_code = 0;
  std::string file_error;
  // CLOCK_SYNC results, attach then detach (empty without clock_host).
  std::vector<lt_clock_sync_event> clock_syncs;
  std::vector<std::string> clock_errors;
};

// How a process comes to be adopted changes what its adoption may expect
// of it.
struct Adoption {
  bool held_at_exec = false;  // held at its exec: its interpreter is not initialized yet
  bool provisional = false;   // --all: not known to be a torch or Lightning job yet
};

class Session {
 public:
  explicit Session(SessionOptions opts);
  ~Session();
  // Validates every --pid and discovers its interpreter.  Throws lt::Error.
  void prepare();
  // Attaches, records, detaches.  `stop` is polled (set from a signal handler).
  Trace run(const std::atomic<bool>& stop);
  const SessionStats& stats() const { return stats_; }
  // The probes' losses so far, summed over CPUs (the same counters the
  // trace gets at the end as DROPS): for live readers (watch's metrics);
  // after the session ended, those it ended with (watch's last line).
  lt_drop_counters drops_now() const;
  // Notes for stderr (processes we could not trace, etc.)
  const std::vector<std::string>& notes() const { return notes_; }
  // watch's escalation, from the drain loop (on_tick, the sink): every
  // tracer records more of pid (0: every target) from now on, or goes back
  // to the cheap tier. Returns "pid N: what" lines of what changed.
  std::vector<std::string> escalate(pid_t pid, bool on);
  std::vector<pid_t> live_targets() const;  // every target with probes
  // Whether a tracer's data of pid (0: any target's) is still coming up (an
  // escalation's op observer in its handshake).
  bool settling(pid_t pid) const;

  // The lines of sampled instructions are written again when next sampled
  // (watch: once per ring segment, so that they go with it).
  void forget_lines();

 private:
  // Why a process could not be adopted.
  struct Refusal {
    ExitCode code;
    std::string why;
  };

  // The steps of run(), in order.
  void start_sources();
  void adopt_targets();
  void mark_attached(std::uint64_t t0);
  double await_bridges(ring_buffer* rb, const std::atomic<bool>& stop);
  void announce_attached(double bridge_ms);
  int drain(ring_buffer* rb);
  void start_chores(std::uint64_t now);
  // The drain loop's chores (session.cpp, "chores"): when each is next due
  // while no record comes, and its work between two drains.
  struct Chore {
    const char* what;
    std::uint64_t (*due)(const Session&, std::uint64_t now);  // Tracer::kTickSoon, a time, or kNever
    void (*run)(Session&, std::uint64_t now);
  };
  static constexpr std::uint64_t kNever = UINT64_MAX;
  static std::span<const Chore> chores();
  std::uint64_t next_due(std::uint64_t now, std::uint64_t deadline) const;  // the quiet loop's next wake
  void tell_library_loads();
  std::uint64_t do_chores();  // between two drains; returns when the last began
  void detach(ring_buffer* rb);
  void finish();

  // Targets (Adoption: how the process came to be adopted).
  void adopt(pid_t pid, bool must_be_python, Adoption how = {});
  void adopt_eligible();  // --all: the watcher's new processes
  std::optional<Refusal> try_adopt(pid_t pid, Adoption how = {});
  void adopt_checked(pid_t pid, Adoption how);  // throws lt::Error; try_adopt() turns it into a Refusal
  // How BPF finds its thread states, or why not (`not_yet`: the
  // interpreter has no key yet, python::NotInitialisedYet).
  std::optional<python::TsdLookup> thread_state_key(const python::Interpreter& interp, std::string& why,
                                                    bool* not_yet = nullptr) const;
  lt_target target_for(const python::Interpreter& interp);
  bool sampling() const { return wants_stacks(opts_); }
  bool explicit_target(pid_t pid) const;
  void check_forked_tsd();
  void adopt_execed(std::uint64_t now);
  void adopt_provisional(pid_t pid, bool held);
  void promote(pid_t pid);
  void refresh_thread_states(pid_t only = 0);  // 0: every LT_TARGET_TSTATE_MAP target
  bool reap_exited();                          // exits found by polling; false: every process gone

  // The tracers (user/collector/tracer.h): made, and the library tracers
  // served by the one pending-attach poller.
  void start_tracers();
  PendingAttach::Attempt attach_library(Tracer& tracer, pid_t pid, bool first);
  // A CPython held at its exec whose probes wait for a library: kept
  // seized until it loads (true), or let go (false).
  bool await_libraries(pid_t pid);
  bool waits_for_library(pid_t pid) const;
  // Library loads the holder paused: their probes in now; awaiting targets
  // done (attached by the poll, gone, too long) let go.
  void serve_library_loads(std::uint64_t now);
  void stop_awaiting(pid_t pid);
  void retarget(pid_t pid);  // the target's entry in BPF's table, again
  python::Symbolizer& symbolizer();
  bool drain_rest(ring_buffer* rb);  // detach: reads the ring; false on an error

  // Records.
  static int on_ring_record(void* ctx, void* data, std::size_t size);  // the ring buffer's callback
  void on_record(const void* data, std::size_t size);
  void on_process_record(const lt_event_header& h, const lt_proc_event& p);
  void emit_process_records(pid_t pid, const python::Interpreter* interp, std::uint32_t flags, std::uint64_t ts);
  // PROC_INFO's word that a process's children are followed: the verdict
  // tells "no DataLoader workers" from "workers not recorded".
  std::uint32_t children_flag() const { return opts_.children ? LT_PROC_CHILDREN_FOLLOWED : 0; }
  // Every record goes through here: into the in-memory Trace and/or the file.
  void emit(const void* record, std::size_t size);
  void emit(std::span<const std::byte> record) { emit(record.data(), record.size()); }
  template <typename R>
  void emit(const R& r) {
    emit(&r, sizeof r);
  }
  // Runs a TraceWriter call; with a live report, a failure stops the file
  // (said once on stderr) instead of the session.  Record mode rethrows.
  template <typename F>
  void write_file(F&& f);
  void emit_clock_sync(std::uint32_t phase);

  SessionOptions opts_;
  std::map<pid_t, python::Interpreter> prepared_;
  TargetTracker targets_;
  std::unique_ptr<proc::EligibleWatcher> watcher_;  // --all
  // The process table and ring every tracer shares.
  std::unique_ptr<ProcTrackSource> proctrack_;
  lt_drop_counters final_drops_{};                  // proctrack_'s at finish()
  std::unique_ptr<python::Symbolizer> symbolizer_;  // made at first use (stacks, compiled regions)
  std::unique_ptr<TracerContext> tracer_ctx_;       // before the tracers: they keep it
  std::uint64_t ring_read_at_ = 0;                  // when the last read of the ring began
  // Every tracer, the actions first (then tracer_catalogue()'s order).
  std::vector<std::unique_ptr<Tracer>> tracers_;
  ActionTracer* actions_ = nullptr;       // tracers_[0]: its finalize probe wakes the holder
  std::vector<Tracer*> library_tracers_;  // those with a library(), by their index in pending_
  PendingAttach pending_;                 // targets whose libraries are not mapped yet
  // The drain loop's periodic chores (start_chores() sets their clocks).
  Every thread_states_, watch_, liveness_;
  std::set<pid_t> escalated_;  // watch: targets escalated now (cadence())
  LoopCadence cadence() const;
  void apply_cadence();  // after escalated_ changed
  std::unique_ptr<StatsSampler> stats_sampler_;
  RecordNormalizer normalizer_;
  std::exception_ptr callback_error_;  // raised inside the ring-buffer callback
  Trace trace_;
  std::unique_ptr<tracefile::TraceWriter> writer_;
  SessionStats stats_;
  std::vector<std::string> notes_;
  std::uint32_t generation_ = 1;
  std::vector<pid_t> failed_adoptions_;  // see SessionStats::exited_during_attach
  // --all: CPythons held at their exec and adopted before anyone knows
  // whether they are torch or Lightning jobs; their records wait here.
  struct Provisional {
    std::uint64_t since_ns = 0;
    std::vector<std::byte> records;
    bool overflowed = false;
  };
  static constexpr std::size_t kProvisionalBytes = 16u << 20;
  std::map<pid_t, Provisional> provisional_;
  // Held CPythons we do not follow, to adopt: pid, and whether its
  // environment made it ours (else --all's provisional adoption).
  std::vector<std::pair<pid_t, bool>> exec_candidates_;
  // Execs of followed processes: their records paired with the holder's
  // verdicts before they are adopted.
  ExecPairing exec_pairing_{1'000'000'000};
  // Library loads of CPythons held at their exec (user/sources/libload.h):
  // null when no probe waits for a library or the source cannot load.
  // Declared before the holder, which reads its ring and map.
  std::unique_ptr<LibLoadSource> libload_;
  bool library_holds_ = false;  // ...which also holds CPythons at their loads
  std::set<pid_t> untold_;      // waiting targets whose loader cannot be probed: polled
  // Targets seized until their libraries load: pid -> since (ns).
  std::map<pid_t, std::uint64_t> awaiting_libs_;
  // Targets found gone at the last liveness look, reaped at the next
  // (reap_exited).
  std::set<pid_t> gone_at_last_look_;
  // Holds a CPython at its exec until its probes are in, and a finalizing
  // target at its exit until the drain has read it; last member: gone
  // before the sources whose rings it reads.
  std::unique_ptr<TargetHolder> holder_;
};

}  // namespace lt
