// `ltrace-bpf watch`: what the always-on mode does with the record stream
// (docs/design-watch.md). Every record goes to the flight recorder
// (flight_ring.h) and past the live step split (live_steps.h); the trigger
// rules (triggers.h) decide when a capture is kept: the ring's last
// `before` plus `after` more, written to DIR/captures/<when>-<host>-<pid>-
// <rank>-<trigger>/ once that window has passed (at the end of the watch at
// the latest), then rendered by the caller (reports, dashboard). At most
// max_captures are kept: the oldest go, and that is said. The metrics text
// (Prometheus) is made from the same state.
#pragma once
#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "reports/aggregate/live_steps.h"
#include "user/watch/flight_ring.h"
#include "user/watch/straggler.h"
#include "user/watch/triggers.h"

namespace lt {

// Where the straggler rule runs elsewhere (`cluster ... watch`: the
// coordinator, over every node's ranks; user/cluster/watch_uplink.h): the
// c10d calls and the exits it needs go there instead.
struct ArrivalSink {
  virtual ~ArrivalSink() = default;
  virtual void arrival(std::uint32_t pid, std::uint64_t pg, std::uint64_t seq, std::uint8_t kind,
                       std::uint64_t ts_ns) = 0;
  virtual void gone(std::uint32_t pid) = 0;
};

struct WatchOptions {
  FlightRingOptions ring;
  TriggerOptions triggers;
  std::uint64_t before_ns = 60'000'000'000;  // of the ring, before the trigger
  std::uint64_t after_ns = 10'000'000'000;   // after it
  unsigned max_captures = 50;
  std::string host;                 // in capture names
  ArrivalSink* arrivals = nullptr;  // set: the straggler rule is not run here (named by name_straggler)
  StragglerOptions straggler;       // the rule, where it runs here
};

// A watched process's progress, as the metrics and summary count it.
struct ProcProgress {
  std::uint32_t pid = 0;
  int rank = -1;
  std::uint64_t steps = 0, median_ns = 0;
};

// What the caller keeps of the process at the moment a trigger fires.
struct AtTrigger {
  std::string threads;  // threads.txt of the capture ("" for none)
  std::string cause;    // one line, "" for none
};

// The caller's reading at a trigger, as it comes: a stall's read of every
// rank takes half a second and more, off the drain thread; the capture
// waits for it only when it is written, after its window (5 s at most).
// From a std::promise, not std::async: a future of std::async would make
// the drain wait for the read when the capture is dropped.
using AtTriggerRead = std::shared_future<AtTrigger>;
// A reading there is nothing more to wait for.
AtTriggerRead at_trigger_ready(AtTrigger at = {});

struct Capture {
  Trigger trigger;
  int rank = -1;
  std::uint64_t from_ns = 0, to_ns = 0;
  std::string dir;         // DIR/captures/<name>
  std::string trace;       // dir + "/trace.ltrace"
  AtTriggerRead read;      // what the caller read when it fired, as it comes
  std::string at_trigger;  // ...once in: threads' stacks of a stall
  std::string cause;       // ...and the cause it read there (a stall: where its main thread waits)
  std::uint64_t records = 0;
  // trigger.for_uid: the processes of that user it holds (the others'
  // records are left out), looked up at the trigger and again at the write.
  std::set<std::uint32_t> only_pids;
  // The before-window, taken from the ring at the trigger and held (its
  // segments' files open) until the write takes the rest: the records after
  // the trigger (escalated: ops, full-rate stacks) would otherwise push it
  // out of a ring bounded by --keep-bytes first (an audit: a 400K ring's
  // slow-step capture held 2 s, without the slow step). Shared: a Capture
  // is copied; the write takes it.
  std::shared_ptr<WindowCopy> before;
};

// The finding that speaks of a trigger's own cause, where one does: a
// memory trigger's "memory growth", a slow step's "outliers", a
// straggler's "straggler"; "" for the others (a stall has its threads, an
// exit its status, a request none).
std::string_view trigger_finding(TriggerKind k);
// How the trigger's own finding begins in the verdict's text: its kind and,
// for a slow step's outliers and a memory growth, its process ("outliers
// (pid 7)"); "" for none.
std::string own_finding(const Trigger& t);
// The capture's summary line, once its reports are written (stderr, so the
// journal): trigger, pid, rank, step, what fired, and the top cause (the
// trigger's own: a stall's main thread; a slow step taken apart, from
// step_taken_apart), else its finding ("top finding:
// ..."), else the capture's first finding, said as that: over the whole
// window, not necessarily why the trigger fired (an audit: a 0.5 s step's
// summary named an input-bound finding of 1.3 ms a step).
std::string capture_summary(const Capture& c, const std::string& top_finding);
// The first finding of `--report verdict`'s text (reports.txt begins with
// it), as one line: "outliers (pid 7): 19.6 ms per train step at stake:
// 1 of 60 train steps took over ..."; "" when it has none.
// With `prefer`: the first finding of that kind, if any ("memory growth"
// for a memory trigger). With `pids`: only a finding of one of them (or of
// no process): a capture of one job under --all holds the others too (an
// audit: a job's exit summary named another job's checkpoints).
std::string first_finding(std::string_view reports, std::string_view prefer = "",
                          const std::set<std::uint32_t>& pids = {});
// What `report --why-step N` wrote of pid's step N after the findings, as
// one line: "train step N taken apart: 512.30 ms, 72.1x the median ...;
// mostly its dataloader part (...)"; "" when it has none. A slow step's
// summary gives it as the top cause where no outliers finding is.
std::string step_taken_apart(std::string_view reports, std::uint32_t pid);

class Watcher {
 public:
  // At the moment a trigger fires (the process as it is now), on the
  // drain thread: what it reads slowly it reads on a thread of its own
  // (std::async), so the drain goes on; at_trigger_ready() otherwise.
  using OnTrigger = std::function<AtTriggerRead(const Trigger&)>;
  // Once a capture's trace is written: its reports next to it; returns
  // their first finding, one line ("" for none). Runs on a thread of its
  // own (rendering a minute of records takes a while; the drain must go on
  // meanwhile); finish() waits for every one.
  using OnCapture = std::function<std::string(const Capture&)>;
  // Whether pid is inside a Lightning loop now (its stacks, read from
  // outside): asked of a process that ended no action since it was first
  // watched, once its stall bound passed, so that a job already hung when
  // the watcher came (a restart, an attach after noticing) is a stall from
  // then; a process before its fit (imports, preprocessing) or one that
  // never runs Lightning (--all) is not.
  using InALoop = std::function<bool(std::uint32_t pid)>;
  void set_in_a_loop(InALoop f) { in_a_loop_ = std::move(f); }
  // Throws lt::Error(io | unsafe_output) when DIR cannot be used.
  Watcher(WatchOptions o, OnTrigger on_trigger, OnCapture on_capture);
  ~Watcher();

  void add(const lt_event_header& h, const std::byte* record);
  // Between drains: the ring's upkeep, stalls, captures whose window ended.
  void tick(std::uint64_t now_ns);
  // When tick() next has timed work besides its stall checks (which the
  // drain loop's once-a-second wake covers): the ring's upkeep, a capture's
  // window ending.
  std::uint64_t next_due_ns() const;
  // What became of a request: a capture of DIR taken, or joined to DIR's;
  // or not, and why (the asker is told: a pid not watched here, the day's
  // requests spent, requests off).
  struct RequestOutcome {
    bool taken = false;
    std::string dir;  // taken: the capture that holds it
    std::string why;  // not taken
  };
  // watch --capture-now / SIGUSR1: pid 0 means every process watched.
  // for_uid: a user asked (the socket): the capture holds their processes
  // only and its files are theirs.
  // after_ns: the capture's after-window (0: --capture-after).
  RequestOutcome request(pid_t pid, std::uint64_t now_ns, std::optional<uid_t> for_uid = std::nullopt,
                         std::uint64_t after_ns = 0);
  // The straggler rule run elsewhere (WatchOptions::arrivals) named `pid`:
  // a straggler trigger for it, `what` its one line.
  void name_straggler(std::uint32_t pid, const std::string& what, std::uint64_t now_ns);
  // Every live process watched.
  std::vector<ProcProgress> progress() const;
  // The watch ends: steps still open closed, every capture waiting written
  // (its window cut at now).
  void finish(std::uint64_t now_ns);
  std::string metrics_text(std::uint64_t now_ns) const;
  // One line per process watched: "pid 7 (rank 3): 60 train step(s), median 0.021 s".
  std::vector<std::string> summary() const;
  // Captures taken (their window over): written, or being written on
  // their own thread; those whose trace could not be written, once known.
  std::uint64_t captures() const { return captures_written_; }
  std::uint64_t captures_failed() const { return captures_failed_; }
  std::size_t processes() const { return procs_.size(); }  // known now (exited ones until forget_exited)
  std::uint64_t forgotten() const { return forgotten_; }
  std::uint64_t joined() const { return joined_; }
  // pid's pending captures (and those of every process) hold at least until
  // `until_ns` (an escalation took effect late: its whole time goes in).
  void extend(pid_t pid, std::uint64_t until_ns);
  // The watcher's own work on pid (0: every process) from `from_ns` to
  // `until_ns`: a capture's write (on its own thread, from its window's end), a return to the
  // cheap tier (the op observer out) and the moment after it. A slow step
  // whose excess over the median is no more than its overlap with that work
  // is no trigger: on a machine whose cores the job keeps busy, the
  // watcher's busy time costs the job about as much (bench/waker_cost.py),
  // so that work may be all of it (an audit: one real 0.5 s step, then 7
  // captures each fired by the last one's own slowdown, steps of 100-390 ms
  // on 7 ms). A step slower than that still fires.
  void own_work(std::uint32_t pid, std::uint64_t from_ns, std::uint64_t until_ns);
  static constexpr std::uint64_t kOwnWorkTailNs = 250'000'000;  // a tier's return lands in the job after it
  std::uint64_t own_work_skipped() const { return own_work_skipped_; }
  const FlightRing& ring() const { return ring_; }

 private:
  // The step-time histogram's upper bounds, seconds (Prometheus's `le`).
  static constexpr std::array<double, 13> kStepBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                          1,     2.5,  5,     10,   30,  60};
  struct Proc {
    int rank = -1;
    bool exited = false;
    std::uint64_t exited_ns = 0;  // when it exited: its state goes once no window can want it
    std::uint32_t ppid = 0;
    int local_rank = -1;
    std::string job_key;  // from its environment: the Slurm job, torchrun's run, or MASTER_ADDR:PORT ("": none)
    std::uint64_t steps = 0, last_step_ns = 0, median_ns = 0;
    std::array<std::uint64_t, kStepBuckets.size()> step_le{};  // steps of at most each bound (not cumulative)
    double step_sum_s = 0;
    std::uint64_t rss_bytes = 0, cpu_ns = 0, collectives = 0;
    std::deque<LiveStep> recent;      // the last steps closed (a capture's STEP_BASE anchor is among them)
    std::uint64_t first_ns = 0;       // when it was first watched
    std::uint64_t stuck_since = 0;    // no progress yet, found inside a loop (InALoop): its stall counts from first_ns
    std::uint64_t next_loop_ask = 0;  // when InALoop is asked next (0: at its stall bound past first_ns)
  };
  // STEP_BASE records for a window: each process's first step wholly in it.
  std::vector<std::vector<std::byte>> step_bases(std::uint64_t from_ns, std::uint64_t to_ns) const;
  void on_steps(std::uint64_t now);
  // Its last progress for the stall rule: its last action's end, else,
  // when it was found stuck inside a loop (InALoop), when it was first
  // watched; 0: none yet.
  std::uint64_t last_progress(std::uint32_t pid, Proc& p, std::uint64_t now_ns);
  // Returns the capture's directory (new, or the pending one it joined);
  // "" for none.
  std::string on_trigger(std::optional<Trigger> t);
  void check_stragglers(std::uint64_t now_ns);
  // The exceptions that escaped Lightning's loop (LiveSteps::take_thrown):
  // exit triggers.
  void take_thrown(std::uint64_t now_ns);
  // Takes the capture's window from the ring and starts its thread, which
  // writes it (run_capture) and then its reports (on_capture_).
  void write_capture(Capture& c, std::uint64_t now_ns);
  // The body of a capture's thread: run_capture at nice 0, its reports,
  // its summary line, its requester answered; `done` last.
  void capture_thread(Capture& c, const WindowCopy& window, const std::vector<std::vector<std::byte>>& bases,
                      std::uint64_t began, std::atomic<bool>& ok, std::atomic<std::uint64_t>& written_after,
                      std::atomic<bool>& done);
  static void run_capture(Capture& c, const WindowCopy& window, const std::vector<std::vector<std::byte>>& bases,
                          std::atomic<bool>& ok);
  void keep_captures_bounded();
  void forget_exited(std::uint64_t now_ns);
  // The ranks of pid's job watched here, pid among them, labelled (pid,
  // rank): the live processes that entered a c10d collective and share its
  // topmost watched ancestor (a launcher and its ranks) or its job key.
  // Fewer than two: none.
  std::vector<std::pair<std::uint32_t, int>> job_ranks(std::uint32_t pid) const;
  std::string capture_name(const Trigger& t, int rank) const;
  void add_owned(Capture& c) const;  // only_pids: the watched processes of trigger.for_uid now

  WatchOptions o_;
  OnTrigger on_trigger_;
  InALoop in_a_loop_;
  OnCapture on_capture_;
  FlightRing ring_;
  LiveSteps steps_;
  TriggerPolicy policy_;
  std::map<std::uint32_t, Proc> procs_;
  std::vector<Capture> pending_;
  std::vector<std::string> kept_;  // capture directories written, oldest first
  std::uint64_t records_ = 0, captures_written_ = 0, captures_removed_ = 0, captures_failed_ = 0;
  std::uint64_t forgotten_ = 0;                         // exited processes whose state went (forget_exited)
  std::map<TriggerKind, std::uint64_t> captures_kind_;  // captures written, by their trigger
  std::uint64_t joined_ = 0;             // triggers inside a pending capture of theirs (no capture of their own)
  std::int64_t realtime_offset_ns_ = 0;  // CLOCK_REALTIME - CLOCK_MONOTONIC
  std::uint64_t now_ns_ = 0;             // the last tick
  std::vector<LiveStep> closed_;         // scratch
  // A capture's write, then its reports, on a thread of its own.
  struct Render {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
    std::uint32_t pid = 0;                                      // its trigger's (0: every process)
    std::string dir;                                            // the capture it writes
    std::uint64_t window_end_ns = 0, began_ns = 0;              // the watcher's clock (own_work)
    std::shared_ptr<std::atomic<std::uint64_t>> written_after;  // ns from began_ns to its trace written (0: not yet)
    std::shared_ptr<std::atomic<bool>> ok;                      // its trace written
  };
  // own_work(): per pid (0: every process), the last spans of the
  // watcher's own work, and the slow steps left untriggered in them.
  std::map<std::uint32_t, std::deque<std::pair<std::uint64_t, std::uint64_t>>> own_work_;
  std::uint64_t own_work_skipped_ = 0;
  std::uint64_t own_work_in(const LiveStep& s) const;  // ns of it inside the step
  std::vector<Render> renders_;                        // on_capture_ calls under way (joined when done)
  StragglerWatch stragglers_;
  std::uint32_t straggler_ = 0;       // the rank named now (0: none): named once per episode
  std::size_t straggler_misses_ = 0;  // checks in a row without a verdict since it was named
  std::uint64_t straggler_checked_ns_ = 0;
  bool comm_since_check_ = false;
  void join_renders(bool all);
};

}  // namespace lt
