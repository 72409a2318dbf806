// The bridge's process-wide state, as the other parts of the library see it.
#pragma once

#include <cstdint>

namespace ltb {

// LT_BRIDGE_F_* that apply now (late injection, timestamp callback).
uint32_t bridge_flags();

}  // namespace ltb
