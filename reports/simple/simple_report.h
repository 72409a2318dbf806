// Lightning's SimpleProfiler.summary(), byte for byte (spec §4), from
// recorded durations.  A pure function: no I/O, no clocks.
#pragma once
#include <string>
#include <vector>

#include "reports/aggregate/actions.h"

namespace lt {

struct SimpleReportInput {
  std::string stage_title;            // "FIT", ... or "" (no stage)
  std::vector<ActionSeries> actions;  // first-completion order
  double total_seconds = 0;           // the percentage base
  bool extended = true;
};

std::string render_simple_report(const SimpleReportInput& in);

// The table's cells as SimpleProfiler formats them: the Total row first
// (extended only), then the actions in report order.  Shared by the text
// report and the HTML page.
struct SimpleRow {
  std::string name, mean, calls, total, pct;
};
std::vector<SimpleRow> simple_rows(const SimpleReportInput& in);

// Lightning's _prepare_filename (2.6.1+ sanitising): "{stage}-{filename}[-{local_rank}][-{action}].txt"
// (AdvancedProfiler's dump_stats names a .prof per action with it).
std::string lightning_report_filename(const std::string& stage, const std::string& filename, int local_rank,
                                      const std::string& extension = ".txt", const std::string& action = "");

// The rank Lightning's profilers name a process by: the trainer's *local*
// rank when world_size > 1 (0 when unknown, as Profiler.local_rank), else
// none (-1).  Used in file names and in the " rank: N" of report headers.
int lightning_local_rank(int world_size, int local_rank);
// "Profile stats for: {action}" + this: " rank: {local_rank}", or "".
std::string lightning_rank_suffix(int world_size, int local_rank);

}  // namespace lt
