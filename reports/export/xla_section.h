// The dashboard's XLA section (docs/design-xla.md): per process that ran
// torch_xla while attached, compile time over the run (one bar per uncached
// compile at its XLA step, recompilations in red) and the compiles listed
// with their step, time and action, beside the totals of the text report.
// Static SVG and HTML: readable with scripts off.
#pragma once
#include <ostream>

#include "reports/aggregate/xla.h"

namespace lt {

void write_xla_section(const XlaReport& rep, std::ostream& out);

}  // namespace lt
