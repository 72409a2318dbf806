// The aggregators behind the reports, as one catalogue: each line makes one
// from the options and the action aggregator it reads (every aggregator
// charges its records to the action open on their thread), and names the
// member of ReportResults its result goes to. ReportSet feeds the same
// record stream to each, in the catalogue's order, after the actions.
// Adding an aggregator: its ReportResults member (report_registry.h) and
// one line in aggregators.cpp (docs/extending.md).
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include "bpf/events.h"
#include "reports/aggregate/actions.h"
#include "user/cli/options.h"
#include "user/cli/report_registry.h"

namespace lt {

class AggregatorSlot {
 public:
  virtual ~AggregatorSlot() = default;
  virtual void add(const lt_event_header& h, const std::byte* p) = 0;
  // A damaged stretch of a trace file (aggregators that pair records).
  virtual void gap() = 0;
  // Its result into its member of `r`; once.
  virtual void finish(ReportResults& r) = 0;
};

// What the options ask the aggregators to keep beyond the reports' tables.
struct AggregatorNeeds {
  bool exports = false;    // --chrome, --perfetto, --html: every interval, slice, event
  bool intervals = false;  // a report that draws steps (reports_keep_intervals)
};
AggregatorNeeds aggregator_needs(const Options& opts);

// Every aggregator of the catalogue but the actions', in feeding order.
std::vector<std::unique_ptr<AggregatorSlot>> make_aggregators(const Options& opts, const AggregatorNeeds& needs,
                                                              const ActionAggregator& actions);
std::size_t aggregator_count();

}  // namespace lt
