// The catalogue of optional tracers (user/collector/tracer.h): Session
// makes, in this order, each one the options ask for, after the action
// tracer every session has, and treats them all alike. The first is the op
// tracer: the others join its per-thread op stacks. Adding a source is one
// line in tracers.cpp (and, for a report's source, its flag in source_set.h).
#pragma once
#include <memory>
#include <span>
#include <string_view>

#include "user/collector/session_options.h"
#include "user/collector/tracer.h"

namespace lt {

struct TracerEntry {
  std::string_view name;
  bool (*wanted)(const SessionOptions&);
  std::unique_ptr<Tracer> (*make)(const TracerContext&);
};

// In the order they are made, tried at each adoption, and filled into a
// target's entry; detached in the reverse order.
std::span<const TracerEntry> tracer_catalogue();

}  // namespace lt
