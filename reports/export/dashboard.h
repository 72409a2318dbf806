// The dashboard at the top of the HTML page (--html): an overview of the
// job with verdicts computed from the data, step time over the run, and
// what each step is made of (docs/design-html.md).  Charts are inline SVG
// with their numbers in data-* attributes (readable with script off, and
// checked by the tests); the script only adds a hover read-out.
#pragma once
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/steps.h"

namespace lt {

inline constexpr std::size_t kMaxStepPoints = 2000;  // step-time chart: more steps are bucketed
inline constexpr std::size_t kMaxStepBars = 500;     // stacked bars: more steps are bucketed
inline constexpr double kDataloaderVerdict = 0.10;   // share of training step time
inline constexpr double kGpuIdleVerdict = 0.20;      // share of training step time
inline constexpr double kSlowRankVerdict = 0.05;     // median step above the ranks' median
inline constexpr double kValidationVerdict = 0.10;   // share of the steps' span spent in validation runs
inline constexpr double kSlowStepFactor = 2.0;       // a training step over this many medians is named

// One finding, with the chart it comes from.
struct Verdict {
  std::string kind;  // "dataloader", "spikes", "slow_steps", "validation", "gpu_idle", "slow_rank", "lost"
  std::string text;  // plain text (escaped when written)
  std::string href;  // "#id" of its chart
  double value = 0;  // the share (0..1) or count it states
};

// Validation runs: maximal sequences of validation steps with no training
// step between them (Lightning's sanity check is the first when seen).
struct ValidationRuns {
  std::size_t runs = 0, min_steps = 0, max_steps = 0;
  std::uint64_t run_ns = 0;   // sum over runs of first step's begin .. last step's end
  std::uint64_t span_ns = 0;  // first step's begin .. last step's end, training and validation
};
ValidationRuns validation_runs(const ProcessSteps& s);

// `id`: a prefix unique in the page for this process's charts ("p1234").
// `step_name`: how a finding names a training step by its index (empty:
// "step N"); the merged page names it in the ranks' common numbering.
std::vector<Verdict> step_verdicts(const ProcessSteps& s, const std::string& id,
                                   const std::function<std::string(std::uint32_t)>& step_name = {});

// The page's style and script (once, in <head>).
void write_dashboard_head(std::ostream& out);
// The overview: job, hosts, ranks, versions, attach window, lost events and
// the verdicts (each a link).
void write_overview(const ActionsReport& rep, const std::vector<ProcessSteps>& steps, const std::vector<Verdict>& extra,
                    std::ostream& out);
// What a chart's export commands name: the recording (its path, or "TRACE"
// where the page does not know it) and its attach time, which `--window`
// counts from (0: unknown, no windows).
struct ExportHint {
  std::string trace = "TRACE";
  std::uint64_t origin_ns = 0;
  std::string prefix;  // of the output file names ("rank3-"), "" for one process
};
// `ltrace-bpf report TRACE --window S,E --perfetto OUT` ("" without a window).
std::string window_command(const ExportHint& hint, const std::string& window, const std::string& out_name);

// One process's charts: step time per stage and the stacked parts per step
// (and GPU kernel / copy / idle when the steps have GPU records).  Every
// point and bar carries `data-window` (its step's, or its bucket's, span
// as `--window` takes it) when the origin is known; each spike link its
// export command (`data-cmd`, and its title): `--steps i-i` for a training
// step, `--window` for the other stages'.
void write_step_charts(const ProcessSteps& s, const std::string& id, const std::string& title, std::ostream& out,
                       const ExportHint& hint = {});

std::string process_chart_id(const ProcessMeta& m);  // "p<pid>"
}  // namespace lt
