// How many sampling periods (SAMPLER_INFO's period_ns) one PY_SAMPLE stands
// for. Samples are weighted where stacks were taken at two rates (watch:
// the cheap tier's rate, and a faster one while a target is escalated);
// elsewhere, and in traces from before weights, every sample weighs 1.
#pragma once
#include <cstdint>

#include "bpf/events.h"

namespace lt {

inline std::uint64_t sample_weight(const lt_py_sample_event& e) {
  return e.weight ? e.weight : 1;
}

}  // namespace lt
