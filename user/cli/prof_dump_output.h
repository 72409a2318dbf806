// --dump-stats DIR: AdvancedProfiler(dump_stats=True)'s files, one .prof per
// action of each process, named as Lightning names them, and the caveat
// beside them (reports/advanced/pstats_dump.h says what the numbers are).
#pragma once
#include <string>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/stacks.h"

namespace lt {

// Returns the number of .prof files written.  Throws lt::Error(io) or
// lt::Error(unsafe_output) (user/core/output_file.h).
int write_prof_dumps(const ActionsReport& rep, const StacksReport& stacks, const std::string& dir,
                     const std::string& filename);

}  // namespace lt
