// The Advanced report: per Lightning action, where its time went by
// function, in the shape of Lightning's AdvancedProfiler ("Profile stats
// for: {action}", pstats' table ordered by cumulative), with columns that
// say honestly what sampling measures: sample counts and shares, and
// seconds that are estimates (samples x period).  With --off-cpu, a second
// table per action gives measured time blocked, by stack.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "reports/aggregate/stacks.h"

namespace lt {

// AdvancedProfiler's line_count_restriction (pstats rules): a fraction in
// [0, 1) keeps int(n * f + 0.5) rows, an integer in [0, n) keeps that many,
// anything else keeps every row.
struct LineRestriction {
  bool is_integer = false;
  double value = 1.0;
  std::string text = "1.0";  // as the user wrote it (shown in the "reduced" line)
};
// nullopt for text that is not a number >= 0.
std::optional<LineRestriction> parse_line_restriction(const std::string& text);
std::size_t restricted_rows(std::size_t rows, const LineRestriction& r);

struct ActionTime {
  std::size_t calls = 0;
  double seconds = 0;
};

struct AdvancedReportInput {
  std::string stage_title;  // "FIT", ... ("" outside a Trainer stage)
  std::string rank_suffix;  // " rank: N" under distributed runs, else ""
  const ProcessStacks* stacks = nullptr;
  std::map<std::string, ActionTime> action_time;
  std::uint64_t period_ns = 0;
  LineRestriction restriction;
};

std::string render_advanced_report(const AdvancedReportInput& in);

// One function's row, exposed for tests and the HTML report.
struct FunctionRow {
  StackFrame function;           // line unused; first_line identifies it
  std::uint64_t self = 0;        // weight with this function as the leaf
  std::uint64_t cumulative = 0;  // weight of stacks containing it (once per stack)
  std::uint64_t count = 0;       // samples / periods containing it
};
// Rows ordered as pstats' "cumulative": cumulative, then self, descending.
std::vector<FunctionRow> function_rows(const StackProfile& p);

}  // namespace lt
