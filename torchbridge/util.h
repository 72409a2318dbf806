// Small helpers of the bridge: clocks, the kernel tid, stderr diagnostics
// (only with LTRACE_BRIDGE_DEBUG=1; never stdout).
#pragma once

#include <cstdint>

#include "bpf/events.h"

namespace ltb {

uint64_t mono_ns();      // CLOCK_MONOTONIC
uint64_t realtime_ns();  // CLOCK_REALTIME
lt::u32 current_tid();   // gettid(), cached per thread (reset in a fork child)
void reset_tid_cache();  // for the fork child

// Reads LTRACE_BRIDGE_DEBUG once (the constructor calls it): 1 = state
// changes, 2 = also one line per record handed to a probe (for checks on a
// GPU machine without a tracer; the probe sites themselves are nops).
void init_debug();
bool debug_enabled();
int debug_level();
// printf-style line to stderr, prefixed "ltrace-bridge[pid]: ", when enabled.
void debug(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

const char* state_name(lt::u32 state);  // LT_BRIDGE_* -> "ACTIVE", ...

}  // namespace ltb
