// The catalogue of library tracers that need nothing of the session but the
// shared process table and the op stacks map: Session starts, for each
// entry whose source was asked for, one tracer, and treats them all alike
// (user/collector/library_tracer.h). Adding such a source is one line in
// library_tracers.cpp (and its flag in source_set.h).
#pragma once
#include <memory>
#include <span>
#include <string_view>

#include "user/collector/library_tracer.h"
#include "user/collector/source_set.h"

namespace lt {

class ProcTrackSource;

// What a tracer gets at its start.
struct TracerDeps {
  const ProcTrackSource& proctrack;
  int op_stacks_fd;  // the op probes' per-thread op stacks (-1: no ops traced)
};

struct LibraryTracerEntry {
  std::string_view name;
  bool SourceSet::*wanted;  // started when this source was asked for
  std::unique_ptr<LibraryTracer> (*make)(const TracerDeps&);
};

// In the order they are tried at each adoption.
std::span<const LibraryTracerEntry> library_tracers();

}  // namespace lt
