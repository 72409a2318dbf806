#include "user/collector/library_tracers.h"

#include "user/collector/comm_tracer.h"
#include "user/collector/mem_tracer.h"

namespace lt {
namespace {

template <typename T>
std::unique_ptr<LibraryTracer> make(const TracerDeps& d) {
  return std::make_unique<T>(d.proctrack, d.op_stacks_fd);
}

constexpr LibraryTracerEntry kTracers[] = {
    {"memory", &SourceSet::memory, make<MemTracer>},
    {"comm", &SourceSet::comm, make<CommTracer>},
};

}  // namespace

std::span<const LibraryTracerEntry> library_tracers() {
  return kTracers;
}

}  // namespace lt
