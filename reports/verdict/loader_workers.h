// Who loads a trainer's batches, for the verdict's input-bound and
// between-steps findings (findings.h): its DataLoader workers as the
// recording saw them (traced children, or untraced forks from /proc),
// how busy they were, whether they were started anew, and what the
// input-bound finding says of them.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/device_stats.h"
#include "reports/aggregate/loader_waits.h"
#include "reports/aggregate/steps.h"
#include "reports/verdict/between_steps.h"
#include "reports/verdict/findings.h"

namespace lt {

// The trainer's DataLoader workers: its descendants in the recording
// (forks keep its command line; Python 3.14's forkserver's children keep
// the server's) with no Lightning action, alive during its train steps;
// with --pid alone, the forks the /proc sampler saw (FORK_STATS). With
// /proc samples, how much of the steps' time each was on a CPU.
struct Workers {
  std::vector<std::uint32_t> pids;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> lives;  // each one's, as far as the recording says
  double busy_sum = 0;                                         // of the CPU shares judged
  double waiting_sum = 0;                                      // of their shares waiting for a CPU (run queue)
  std::size_t judged = 0;
  bool followed = false;         // the trainer's children were followed
  bool scanned = false;          // its untraced forks looked for in /proc, over enough of the steps to see one
  bool scans_too_short = false;  // looked for, but the steps were too short to see one
  bool untraced = false;         // the pids are such forks
  // How many at once, counted at each train step's middle (not at an
  // epoch's turn, where the old ones are still exiting as the new ones
  // start): more in all means they were started anew (persistent_workers=
  // False: every epoch, and every validation run, pays for starting them).
  std::size_t at_once = 0;
  bool anew() const { return at_once && pids.size() > at_once; }
  // "2 DataLoader worker process(es) at a time, 6 started in all (pid ...)"
  std::string who() const;
  // None, and none could have been missed: the batches load in the trainer.
  bool known_none() const { return pids.empty() && (followed || scanned); }
};

// The /proc sampler's scans for untraced forks, at most this far apart
// (user/collector/stats_sampler.cpp).
inline constexpr std::uint64_t kForkScanNs = 1'000'000'000;

// Its workers (validation runs' apart: `gaps`).
Workers find_workers(const ActionsReport& rep, const ProcessActions& trainer, const ProcessSteps& ps,
                     const BetweenSteps& gaps, const DeviceStatsReport* stats);

// Started anew: persistent_workers=True the first thing to try, whatever
// else `try_this` says.
void persistent_workers_first(std::string& try_this);

// The input-bound finding `f` says who loads the batches and what to try.
// `no_core_free`: the loop thread waited for a CPU past the contention
// threshold. `restarts_elsewhere`: the between-steps finding fired, and
// says what starting the workers anew costs at the epoch turns; else that
// cost shows in the steps' fetches, and persistent_workers=True is the
// first thing to try.
void input_workers(const Workers& w, const ProcessSteps& ps, const LoaderWaitsReport* loader, bool no_core_free,
                   bool restarts_elsewhere, Finding& f);

}  // namespace lt
