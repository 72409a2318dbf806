// One text line per record, like `perf script`: for debugging and tests.
#pragma once
#include <ostream>

#include "user/model/trace.h"

namespace lt {
void dump_events(const Trace& trace, std::ostream& out);
}
