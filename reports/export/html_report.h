// One self-contained HTML page (no network, no script): per process the
// Simple table and an SVG timeline of actions per thread, nested by time,
// and the lost-event counts.  Hover a slice for its name and duration.
#pragma once
#include <ostream>

#include "reports/aggregate/actions.h"

namespace lt {
// Built from a report aggregated with keep_intervals = true.
void write_html_report(const ActionsReport& rep, bool extended, std::ostream& out);
}  // namespace lt
