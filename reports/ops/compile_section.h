// The `compile` section of the op report (docs/design-compile.md): a
// compiled job's regions and the recompilations seen while attached.
#pragma once
#include <cstdint>
#include <string>

#include "reports/aggregate/compiles.h"

namespace lt {

// "" when the process ran no compiled region while attached.
std::string render_compile_section(std::uint32_t pid, const CompilesProcess& p, std::uint64_t window_begin_ns);

}  // namespace lt
