// The cluster summary of `report DIR --merge`: which ranks and hosts are
// there (and which are not), the time of each Lightning action per rank,
// step-time skew, the straggler, and an estimate of the time ranks wait at
// the gradient all-reduce.  Pure functions of a MergePlan.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "reports/cluster/merge.h"

namespace lt {

// One training step across ranks.  Step k of a rank is matched to step k of
// the others on the common clock (the step of the rank with the most steps
// whose end is nearest), not by counting: the hosts' recorders attach at
// different moments, so their first steps differ.
struct ClusterStep {
  std::int64_t index = 0;           // 0: the earliest step any rank was seen in
  std::vector<int> at;              // per plan rank: index into TrainingSteps::per_rank[r]; -1 not seen
  std::vector<double> wait_s;       // per plan rank: estimated wait at the all-reduce (0 when not seen)
  std::vector<double> load_s;       // per plan rank: the rank's own time for the step (see StepSkew)
  int present = 0;                  // ranks that have it
  std::int64_t start_skew_ns = 0;   // max - min of the begins
  std::int64_t sync_spread_ns = 0;  // max - min of the all-reduce ends (else step ends)
};

struct RankStepStats {
  std::size_t seen = 0;  // its steps in the window
  // The steps the means are over: those every rank with steps has (else
  // those shared by two or more ranks, else all), so ranks compare alike.
  std::size_t steps = 0;
  double step_s = 0, wait_s = 0;  // sums over those steps
  double mean_step_s = 0, mean_wait_s = 0, mean_load_s = 0;
};

// Wait and load.  With a sync action (the backward that holds DDP's
// all-reduce) in every rank's steps: a rank's wait in a step is its sync
// action's time minus the fastest rank's (the fastest is the last to arrive:
// it waits for nobody), and its load is its step time minus its wait plus
// how late it began the step (a slow data loader shows there).  Without
// one: wait = its step time minus the fastest rank's, load = its step time.
// Both are estimates from action times, not measured blocking.
struct StepSkew {
  TrainingSteps steps;
  std::vector<ClusterStep> cluster;  // by index
  std::vector<RankStepStats> ranks;  // plan.ranks order
  std::size_t shared_steps = 0;      // steps seen on at least two ranks
  std::size_t common_steps = 0;      // steps seen on every rank with steps (that did not end early)
  std::int64_t median_skew_ns = 0, max_skew_ns = 0;
  std::int64_t max_skew_step = -1;
  std::int64_t median_sync_spread_ns = 0;
  // The rank whose mean load is largest, when it exceeds the median of the
  // ranks' mean loads by more than 5%; -1 none.  Position in plan.ranks.
  int straggler = -1;
  double straggler_excess = 0;  // its mean load / median - 1
  double median_load_s = 0;
};
StepSkew analyze_steps(const MergePlan& plan);

struct ClusterSummaryOptions {
  std::size_t max_rank_columns = 16;
  std::size_t worst_steps = 5;  // rows of the "largest start skew" table
};

// The whole summary as text.  `clock` (optional): the estimate the plan's
// corrections came from, for its residuals and why a host was not estimated.
std::string render_cluster_summary(const MergePlan& plan, const ClockEstimate* clock = nullptr,
                                   const ClusterSummaryOptions& opt = {});

}  // namespace lt
