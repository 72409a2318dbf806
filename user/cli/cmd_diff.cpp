// `ltrace-bpf diff A B`: what changed from trace A to trace B
// (reports/diff/step_diff.h), as a table; with --fail-if-slower PCT, exit
// 17 when B's train step is significantly slower by PCT % or more.
#include <iostream>

#include "reports/aggregate/actions.h"
#include "reports/diff/step_diff.h"
#include "user/cli/builtin.h"
#include "user/core/errors.h"
#include "user/tracefile/trace_reader.h"

namespace lt {
namespace {

ActionsReport read_actions(const std::string& path, bool& damaged) {
  ActionAggregator agg(/*keep_intervals=*/true);
  const auto r = tracefile::read_trace_file(
      path, [&agg](const lt_event_header& h, const std::byte* p) { agg.add(h, p); },
      [&agg](const tracefile::DamagedRange&) { agg.gap(); });
  for (const auto& w : r.warnings) std::cerr << "ltrace-bpf: " << path << ": " << w << "\n";
  damaged |= r.data_lost();
  return agg.finish();
}

}  // namespace

void check_diff(Options& o) {
  if (o.input.empty() || o.input_b.empty())
    throw Error(ExitCode::usage, "diff needs two trace files: ltrace-bpf diff A B");
}

int cmd_diff(Options& opts) {
  bool damaged = false;
  const ActionsReport a = read_actions(opts.input, damaged);
  const ActionsReport b = read_actions(opts.input_b, damaged);
  const StepDiff d = diff_steps(a, b);
  std::cout << render_step_diff(d, opts.input, opts.input_b);
  const DiffRow* step = d.step();
  if (!step || !step->n_a || !step->n_b)
    std::cerr << "ltrace-bpf: diff: no train steps in " << (step && step->n_a ? opts.input_b : opts.input)
              << ": only the actions are compared\n";
  if (opts.fail_if_slower_pct >= 0 && step && step->verdict > 0 && step->median_a > 0) {
    const double pct = 100 * step->test.shift / step->median_a;
    if (pct >= opts.fail_if_slower_pct) {
      std::cerr << "ltrace-bpf: diff: B's train step is slower by " << pct << " % of A's median (Holm p "
                << step->p_holm << "), at least --fail-if-slower " << opts.fail_if_slower_pct << "\n";
      return static_cast<int>(ExitCode::regression);
    }
  }
  return damaged ? static_cast<int>(ExitCode::damaged_trace) : 0;
}

}  // namespace lt
