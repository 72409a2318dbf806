// The dashboard of a merged job (`report DIR --merge --html FILE`): the
// job's overview (hosts, clock corrections, ranks, the slowest rank), a
// rank x step heat map of training step time, each rank's step charts, and
// the cluster summary's text below (docs/design-html.md).
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "reports/aggregate/steps.h"
#include "reports/cluster/merge.h"
#include "reports/export/dashboard.h"

namespace lt {

inline constexpr std::size_t kMaxHeatColumns = 300;  // more steps are bucketed (mean of each bucket)
// All ranks' step timelines together: each rank gets the single-process
// budget (kTimelineBudgetBytes) up to 8 ranks, an equal share of this past
// that, so a large job's page stays under the 20 MB target.
inline constexpr std::size_t kMergedTimelineBudgetBytes = 16 * 1024 * 1024;

// The rank whose median training step is the longest, when it is at least
// kSlowRankVerdict above the median of the ranks' medians (2+ ranks with
// steps); empty otherwise.  `steps`: per rank, plan.ranks order; `slowest`
// gets that rank's position in plan.ranks (-1: none).
std::vector<Verdict> slow_rank_verdicts(const MergePlan& plan, const std::vector<ProcessSteps>& steps,
                                        int* slowest = nullptr);

void write_merged_html(const MergePlan& plan, const std::string& summary_text, std::ostream& out);

}  // namespace lt
