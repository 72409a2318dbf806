// Lightning actions per process: pairs starts with stops and keeps, per
// action name, in the order SimpleProfiler would (dict order = order of
// first completion), what its tables need of the durations: their number
// and sums, never the durations themselves (a live attach at thousands of
// actions a second runs for hours in constant memory).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "user/model/exact_sum.h"
#include "user/model/trace.h"

namespace lt {

enum class Stage { none, fit, validate, test, predict };
const char* stage_title(Stage s);  // "FIT", ... ; "" for none
const char* stage_name(Stage s);   // "fit", ... ; "" for none

struct ProcessMeta {
  std::uint32_t pid = 0, ppid = 0;
  int rank = -1, local_rank = -1, world_size = -1;
  int py_major = 0, py_minor = 0;
  std::uint32_t flags = 0;
  std::string comm, cmdline, torch_version;
  // From PROC_ENV (the job identity in the process's environment): "", -1
  // or 0 when unset or when the trace has no PROC_ENV for the process.
  std::string hostname, slurm_job_id, master_addr;
  int group_rank = -1, slurm_nodeid = -1;
  unsigned master_port = 0;
  // From PROC_CONTAINER: the container it runs in (flags 0: none seen).
  unsigned container_flags = 0, ns_pid = 0;
  std::string container_host, container_id;
  // From STEP_BASE (a window of a longer recording: a watch capture): one
  // of the job's train steps, its index and span, from which the window's
  // steps are numbered as the job numbers them (steps.h); index -1: none.
  std::int64_t anchor_index = -1;
  std::uint64_t anchor_begin_ns = 0, anchor_end_ns = 0;
};

struct ActionSeries {
  ActionSeries() = default;
  // A series from its durations (tests, reports built by hand).
  ActionSeries(std::string n, std::initializer_list<double> durations_s = {}) : name(std::move(n)) {
    for (double d : durations_s) add(d);
  }
  std::string name;
  std::uint64_t calls = 0;
  ExactSum total_s;            // math.fsum of the durations: SimpleProfiler's total
  double running_total_s = 0;  // the durations added left to right (the other tables' totals)
  void add(double seconds) {
    ++calls;
    total_s.add(seconds);
    running_total_s += seconds;
  }
};

// One completed action on the timeline (kept only when asked: exports,
// diff). 24 bytes: a diff holds one per action of a whole trace (a 10 M-event
// trace is 5 M of them), so the flag shares the action index's word.
struct ActionInterval {
  ActionInterval() = default;
  ActionInterval(std::uint32_t action_index, std::uint32_t thread, std::uint64_t begin, std::uint64_t end,
                 bool end_estimated = false)
      : action(action_index), estimated(end_estimated), tid(thread), begin_ns(begin), end_ns(end) {}
  std::uint32_t action : 31 = 0;    // index into ProcessActions::actions
  std::uint32_t estimated : 1 = 0;  // end inferred (fetches, manual optimizer_step)
  std::uint32_t tid = 0;
  std::uint64_t begin_ns = 0, end_ns = 0;  // CLOCK_MONOTONIC of the recording host
};
static_assert(sizeof(ActionInterval) == 24);

// Records a process lost (or sent degraded), by kind and cause (PROC_DROPS).
struct RecordLoss {
  std::uint16_t kind = 0;   // lt_event_kind of the records; 0: unknown
  std::uint16_t cause = 0;  // lt_loss_cause
  std::uint64_t count = 0;
};

struct ProcessActions {
  ProcessMeta meta;
  std::vector<ActionSeries> actions;      // first-completion order
  std::vector<ActionInterval> intervals;  // in completion order
  Stage stage = Stage::none;
  std::uint64_t window_begin_ns = 0, window_end_ns = 0;
  std::uint64_t open_at_end = 0;      // started, never stopped in the window
  std::uint64_t unmatched_stops = 0;  // stopped, start not seen (began before attach)
  std::uint64_t truncated_names = 0;  // names not seen whole (past the tails' bound, or pieces lost): cut
  std::uint64_t estimated = 0;        // *_next fetches, manual optimizer_step: closed by the next action
  std::vector<RecordLoss> losses;     // what this process lost, by kind and cause
  std::uint64_t lost_to_damage = 0;   // start or stop in a damaged part of a trace file: not counted
  bool exited = false;
  // Action records (begin, end, fetch) lost: each is an action missing or
  // left open.  Resumes whose generator frame was unreadable count too:
  // each may have been one.
  std::uint64_t lost_action_records() const;
  double window_seconds() const {
    return window_end_ns > window_begin_ns ? (window_end_ns - window_begin_ns) / 1e9 : 0.0;
  }
  std::size_t total_calls() const;
};

// This host's wall clock measured against a reference host's (CLOCK_SYNC).
struct ClockSync {
  std::uint64_t monotonic_ns = 0;  // when
  std::int64_t offset_ns = 0;      // reference = this host + offset
  std::int64_t delay_ns = 0;       // |error| <= delay / 2
  std::uint32_t samples = 0;
  bool at_detach = false;
  std::string reference;
};

struct HostMeta {
  std::string hostname;
  std::uint64_t monotonic_ns = 0, realtime_ns = 0;  // one clock pair (0: unknown)
  std::vector<ClockSync> clock_syncs;               // in stream order
};

struct ActionsReport {
  HostMeta host;
  std::vector<ProcessActions> processes;  // in order of first appearance
  std::uint64_t ringbuf_drops = 0, read_faults = 0;
  std::uint64_t unreadable = 0;          // records not sent: target memory unreadable (PROC_DROPS)
  std::vector<RecordLoss> unattributed;  // losses the per-process table could not hold
  bool complete = true;                  // the stream has its detach record
  std::uint64_t window_begin_ns = 0;     // the attach (WINDOW begin; 0: none in the stream)
  std::uint64_t damaged_ranges = 0;      // gaps in the stream (damaged chunks of a trace file)
};

// The frame that opened an action (ACTION_ORIGIN): stack samples charged to
// the action are cut there.  code 0: unknown (no cut).
struct ActionOrigin {
  std::uint64_t code = 0;
  std::uint32_t checksum = 0;
  std::uint32_t depth = 0;  // 1-based from the thread's root frame; 0: unknown
  bool known() const { return code != 0; }
};

// One completed action: name, begin and end (CLOCK_MONOTONIC ns), thread.
struct CompletedSpan {
  std::string name;
  std::uint64_t begin_ns = 0, end_ns = 0;
  std::uint32_t tid = 0;
};
// A record completes at most a few actions (a pending fetch and its own).
inline constexpr std::uint64_t kRecentSpans = 8;

// Consumes records one at a time, so a live session needs no copy of the
// stream in memory; finish() once, at the end.
class ActionAggregator {
 public:
  explicit ActionAggregator(bool keep_intervals = false);
  ~ActionAggregator();
  void add(const lt_event_header& h, const std::byte* record);
  ActionsReport finish();
  // The trace file lost records here (a damaged chunk): actions open now
  // may have ended in the gap, and a stop after it may belong to a start
  // in it, so nothing pairs across it.  Both are counted as lost_to_damage.
  void gap();
  // The innermost action open on a thread right now (after the records
  // added so far), or "" outside any.  Stack samples are charged to it.
  std::string innermost_action(std::uint32_t pid, std::uint32_t tid) const;
  // The opening frame of that same action (unknown outside actions, for
  // windows no probe opens, and in traces without ACTION_ORIGIN records).
  ActionOrigin innermost_origin(std::uint32_t pid, std::uint32_t tid) const;
  // How many actions of a process completed so far, and the name of the
  // last one: the op report sees step functions end through these.
  std::uint64_t completed(std::uint32_t pid) const;
  std::string last_completed(std::uint32_t pid) const;
  // The index-th completed action of a process (0-based, in completion
  // order) while it is among the last kRecentSpans: the op report reads
  // every completion after each record ([pl][profile] rows).
  const CompletedSpan* completed_span(std::uint32_t pid, std::uint64_t index) const;
  // Action names of a process in the order they first began.
  const std::vector<std::string>& begin_order(std::uint32_t pid) const;

 private:
  void on_action(const lt_event_header& h, const lt_action_event& e);
  struct State;
  std::unique_ptr<State> s_;
};

ActionsReport aggregate_actions(const Trace& trace, bool keep_intervals = false);

// A process's rank labels, completed: Lightning's own DDP launcher sets the
// rank variables of rank 0 in its os.environ at run time, which
// /proc/PID/environ does not show; its children (ranks 1..N-1) have them
// from exec.  A parent with ranked children and no labels of its own is the
// first rank of its node.
ProcessMeta with_rank_labels(const ProcessMeta& m, const ActionsReport& rep);

// "pid 123 rank 1 (python)": a process as the smaller reports title it,
// rank and command name from `rep` when it has them (nullptr: the pid).
// The command name is shown as utf8_text shows target text.
std::string process_title(std::uint32_t pid, const ActionsReport* rep);

// The processes of a report by pid, and their rank labels completed as
// with_rank_labels does, each in O(1): a crafted trace may hold 100,000
// processes, and a scan of all of them per process made `report` quadratic.
class ProcessIndex {
 public:
  explicit ProcessIndex(const ActionsReport& rep);
  const ProcessActions* find(std::uint32_t pid) const;
  ProcessMeta with_rank_labels(const ProcessMeta& m) const;

 private:
  std::unordered_map<std::uint32_t, const ProcessActions*> by_pid_;
  std::unordered_map<std::uint32_t, const ProcessActions*> ranked_child_;  // ppid -> its first ranked child
};

}  // namespace lt
