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
#include "reports/verdict/findings.h"

namespace lt {

inline constexpr std::size_t kMaxHeatColumns =
    300;                                         // more steps are bucketed (mean of each bucket, one size for all rows)
inline constexpr std::size_t kMaxHeatRows = 64;  // more ranks: these rows only (merged_chart_ranks', then slowest)
// Step charts and step timelines: every rank up to this many ranks; past
// that only merged_chart_ranks' few, the page says which were left out.
inline constexpr std::size_t kMergedChartRanks = 8;
// All drawn ranks' step timelines together: each gets the single-process
// budget (kTimelineBudgetBytes), or an equal share of this when less (4
// ranks: 2 MiB each, 8: 1 MiB).  The page's worst case, estimated: this,
// plus each drawn rank's step charts (<= ~0.75 MB: a 36,000-step page is
// 767 KB), plus both heat maps (64 rows x 300 columns: 7.2 MB measured):
// ~15 MB at 8 ranks, ~17-18 MB past 64 ranks (5 drawn), under the 20 MB
// target.  tests/unit/merged_page_test.cpp measures 64 x 3000 steps, and
// full timelines at 8 and 72 ranks (8.6 and 14.3 MB).
inline constexpr std::size_t kMergedTimelineBudgetBytes = 8 * 1024 * 1024;

// The ranks (positions) whose step charts and timelines the page draws: all
// up to kMergedChartRanks; past that the straggler (last to arrive), the
// slowest, the fastest and the median rank by median training step, and
// position 0 (no repeats, ascending).  -1: none.
std::vector<std::size_t> merged_chart_ranks(const std::vector<ProcessSteps>& steps, int slowest, int straggler);

// The rank whose median training step is the longest, when it is at least
// kSlowRankVerdict above the median of the ranks' medians (2+ ranks with
// steps); empty otherwise.  `steps`: per rank, plan.ranks order; `slowest`
// gets that rank's position in plan.ranks (-1: none).
std::vector<Verdict> slow_rank_verdicts(const MergePlan& plan, const std::vector<ProcessSteps>& steps,
                                        int* slowest = nullptr);

// `findings`: each file's verdict findings (--report verdict's), by file
// index; they head the page's findings, every rank's ranked together by
// train step time at stake, each naming its rank.  nullptr: none.
void write_merged_html(const MergePlan& plan, const std::string& summary_text, std::ostream& out,
                       const std::vector<std::vector<Finding>>* findings = nullptr);

}  // namespace lt
