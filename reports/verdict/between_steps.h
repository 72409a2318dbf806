// The fit's time between its train steps, for the verdict's validation and
// "between steps" findings (findings.h): what the steps' own parts cannot
// show.
//
// A validation run is timed from the end of the train step before it (where
// Lightning makes the validation DataLoader's iterator: non-persistent
// workers start there, before the first validation hook) to its last
// validation action on the loop thread; one before the first train step
// (the sanity check), from its first validation action. The validation
// steps alone missed that start and the run's own hooks: 2.6x too little
// on an audit fit with non-persistent validation workers.
//
// The rest of each gap between two train steps is the epoch turns (the
// epoch hooks, a new train iterator: non-persistent train workers start
// again) and the loop's own time. Checkpoint time (the checkpoints
// finding's) is apart from both.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/steps.h"
#include "reports/verdict/spans.h"

namespace lt {

struct BetweenSteps {
  struct Run {
    std::uint64_t begin_ns = 0, end_ns = 0;
    double ms = 0;        // checkpoints apart
    double steps_ms = 0;  // its validation steps' time
  };
  std::vector<Run> runs;  // the validation runs, in time order
  std::size_t validation_runs = 0;
  double validation_ms = 0;                                               // the runs' wall time, checkpoints apart
  std::uint64_t validation_begin_ns = UINT64_MAX, validation_end_ns = 0;  // of the first and last run
  double gaps_ms = 0;         // the rest of the time between train steps, checkpoints apart
  double longest_gap_ms = 0;  // of those rests
  std::size_t long_gaps = 0;  // rests over kLongGapMs
  double long_gaps_ms = 0;    // their time
  static constexpr double kLongGapMs = 10;
  // The loop thread's actions held whole in those rests, checkpoint time
  // (and what it holds: a save inside a checkpoint hook) apart: their time
  // (the outermost's where they nest), and the top 3 by name.
  double in_actions_ms = 0;
  std::vector<std::pair<std::string, double>> top_actions;
};

// An action of a validation run by its name (its hooks, steps, fetches,
// loader; the sanity check's).
bool is_validation_action(const std::string& name);

// `checkpoint`: per interval of `p`, 1 where it is checkpoint time (the
// checkpoints finding's intervals; hooks never nest in each other).
// `tid`: the loop thread (0: any).
// `validation`: the validation steps (their time per run).
BetweenSteps between_steps(const ProcessActions& p, const std::vector<StepRecord>& train,
                           const std::vector<StepRecord>& validation, const std::vector<char>& checkpoint,
                           std::uint32_t tid);

}  // namespace lt
