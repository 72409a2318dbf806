// Lightning's training steps as the records arrive (watch mode: its
// triggers and metrics), per process, in one pass and bounded memory.
//
// A step is the one steps.h splits offline for the train stage: it opens
// at the first train batch hook that starts a batch (the fetch: the
// train loop's FETCH_BEGIN, or [_TrainingEpochLoop].train_dataloader_next
// where Lightning profiles it; or on_train_batch_start) and
// closes at the end of its last on_train_batch_end hook. That last end is
// known when any other action begins after it (the next step's fetch, the
// validation loop, the epoch's end hooks), so a step is reported then, a
// few microseconds after it ended; finish() closes the ones still open.
// Any action's end is progress (stall detection reads last_progress()).
// After a Trainer run's last hooks (on_fit_end, teardown) with no action
// open, the process is between runs: Lightning is not running, and no
// action ending is no stall (between_runs()).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bpf/events.h"
#include "reports/aggregate/step_batches.h"
#include "user/model/action_name.h"

namespace lt {

// An exception unwound the outermost action open on a thread (its END came
// through gen.throw, LT_ACT_THROW, with no other action of that thread
// open): it escaped Lightning's loop — the run was interrupted. The data
// fetches' ends by StopIteration (an epoch's end: "..._next") are not.
struct ThrownAction {
  std::uint32_t pid = 0, tid = 0;
  std::uint64_t ts_ns = 0;
  std::string action;
};

struct LiveStep {
  std::uint32_t pid = 0, tid = 0;
  std::uint32_t index = 0;  // 0-based, per process, in time order
  std::uint64_t begin_ns = 0, end_ns = 0;
  std::uint64_t duration_ns() const { return end_ns - begin_ns; }
};

class LiveSteps {
 public:
  // Feeds one record; the steps it closes are appended to `closed`.
  void add(const lt_event_header& h, const std::byte* record, std::vector<LiveStep>& closed);
  // Closes every step whose last end hook has run (at the end of a watch).
  void finish(std::vector<LiveStep>& closed);
  // The last time any action of pid ended (0: none yet).
  std::uint64_t last_progress(std::uint32_t pid) const;
  // Steps pid has completed.
  std::uint32_t steps(std::uint32_t pid) const;
  // Whether pid's last Trainer run has ended (its on_fit_end or teardown
  // hooks the last actions, or an exception that escaped it; none open
  // since) and no action began after.
  bool between_runs(std::uint32_t pid) const;
  // Whether pid's steps are numbered as the job numbers them: an
  // on_train_start hook began before its first step (the fit was seen from
  // its start); else they count from the first one seen (a watcher that
  // came mid-fit: its step 0 was the job's 233rd in an audit).
  bool numbered_from_the_start(std::uint32_t pid) const;
  void forget(std::uint32_t pid) { procs_.erase(pid); }
  // The exceptions that escaped since the last call (ThrownAction), as of
  // `now_ns` (CLOCK_MONOTONIC). An evaluation step (validation, test,
  // predict) unwound with no loop action open around it -- trainer.validate
  // and the like run their loop unprofiled -- is not yet known to have
  // escaped: in dataloader_iter mode the step's own next() raises
  // StopIteration at the data's end and the loop catches it. It escaped if
  // Lightning's on_exception hooks begin next, or no action begins within
  // kEscapeQuietNs (a run without callbacks has no on_exception action to
  // run), or the process ends first; any other action begun means the loop
  // went on (the epoch's end hooks).
  std::vector<ThrownAction> take_thrown(std::uint64_t now_ns = 0);
  static constexpr std::uint64_t kEscapeQuietNs = 2'000'000'000;

 private:
  struct Proc {
    struct Open {
      BatchHook hook;
      bool run_end = false;  // on_fit_end or teardown: a Trainer run's last hooks
      std::uint32_t tid = 0;
      std::string name;
    };
    std::map<std::uint64_t, Open> open;   // action key -> what it is
    bool in_step = false, ended = false;  // a step is open / its end hook ran
    // Opened by a fetch (FETCH_BEGIN) no train batch hook has followed yet:
    // the epoch's last fetch raises StopIteration, and the epoch's end
    // hooks come next instead, which drop it.
    bool fetch_only = false;
    bool fetch_train = true;  // the next fetch is the train loop's (fetch_context)
    bool between_runs = false;
    bool train_started = false;  // an on_train_start hook began before its first step
    std::uint32_t tid = 0, next_index = 0;
    std::uint64_t begin_ns = 0, end_ns = 0;
    std::uint64_t last_progress = 0;
    std::vector<ThrownAction> maybe_escaped;  // evaluation steps unwound, the next action not begun yet
  };
  void settle(Proc& p, bool escaped);
  void close(std::uint32_t pid, Proc& p, std::vector<LiveStep>& closed);
  void on_begin(const lt_event_header& h, const lt_action_event& e, std::vector<LiveStep>& closed);
  void on_end(const lt_event_header& h, const lt_action_event& e);
  void on_fetch(const lt_event_header& h, std::vector<LiveStep>& closed);
  ActionNameAssembler names_;
  std::map<std::uint32_t, Proc> procs_;
  std::vector<ThrownAction> thrown_;
};

}  // namespace lt
