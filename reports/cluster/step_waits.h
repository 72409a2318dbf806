// Time waiting in collectives per rank and training step, and who is most
// often last to arrive (`report DIR --merge --html`): the waiting heat map
// and the last-to-arrive finding of the merged page (docs/design-html.md).
//
// Measured, from the arrivals (reports/cluster/arrivals.h): a rank's wait at
// a complete instance is the last arrival - its own arrival, on the common
// clock.  An instance belongs to the training step of that rank whose
// [begin, end] holds the rank's own entry (its recording's clock, the
// steps' clock); an entry in no step (setup, validation, teardown) is
// counted apart, so a rank's cells plus its outside wait are its whole wait.
//
// Pure functions of the reports.
#pragma once
#include <cstdint>
#include <vector>

#include "reports/aggregate/steps.h"
#include "reports/cluster/arrivals.h"

namespace lt {

inline constexpr std::size_t kLastArrivalMinInstances = 10;  // fewer: no finding

// The share of a (group, kind)'s complete instances a rank must be last at
// for the finding, in a group of k ranks: halfway between chance (1/k) and
// always, (k + 1) / 2k: 75% for 2 ranks, 62.5% for 4, -> 50% for many.
// (A flat 50% fires for every 2-rank group: one of two is last at >= half
// by chance.)
double last_arrival_threshold(std::size_t k);

struct RankStepWaits {
  std::vector<std::int64_t> step_ns;  // per training step (ProcessSteps::train order)
  std::int64_t in_steps_ns = 0;       // sum of step_ns
  std::int64_t outside_ns = 0;        // waits at instances entered in no training step
  std::size_t instances = 0;          // complete instances it took part in
  std::size_t outside = 0;            // of those, entered in no training step
  std::size_t last = 0;               // of those, it was the last to arrive (decided: last_decided)
};

// `steps`: per rank position (plan.ranks order), as step_records made them.
std::vector<RankStepWaits> waits_per_step(const ArrivalReport& rep, const std::vector<ProcessSteps>& steps);

// One (group, kind) where one rank was last to arrive in at least
// last_arrival_threshold(ranks) of at least kLastArrivalMinInstances complete
// instances (ties and gaps within the clocks' bounds: no rank's).
struct LastArrival {
  unsigned group = 0;
  std::uint8_t kind = 0;
  int rank = -1;  // rank position
  std::size_t last = 0, instances = 0;
  std::size_t ranks = 0;  // the group's ranks (k of the threshold)
  double threshold() const { return last_arrival_threshold(ranks); }
  double share() const { return instances ? static_cast<double>(last) / static_cast<double>(instances) : 0; }
};
// By share, largest first.
std::vector<LastArrival> last_arrivals(const ArrivalReport& rep, std::size_t nranks);

// The straggler to highlight: the rank most often last over all complete
// instances, when some LastArrival names it; -1 otherwise.
int arrival_straggler(const std::vector<LastArrival>& found, const std::vector<RankStepWaits>& waits);

}  // namespace lt
