#include "user/collector/tracers.h"

#include "user/collector/comm_tracer.h"
#include "user/collector/gc_tracer.h"
#include "user/collector/gpu_tracer.h"
#include "user/collector/mem_tracer.h"
#include "user/collector/op_tracer.h"
#include "user/collector/stack_tracer.h"
#include "user/collector/xla_tracer.h"

namespace lt {
namespace {

template <typename T>
std::unique_ptr<Tracer> make(const TracerContext& ctx) {
  return std::make_unique<T>(ctx);
}

constexpr TracerEntry kTracers[] = {
    {"ops", [](const SessionOptions& o) { return o.sources.ops; }, make<OpTracer>},
    {"GPU", [](const SessionOptions& o) { return o.gpu; }, make<GpuTracer>},
    {"memory", [](const SessionOptions& o) { return o.sources.memory || o.sources.oom; }, make<MemTracer>},
    {"comm", [](const SessionOptions& o) { return o.sources.comm; }, make<CommTracer>},
    {"XLA", [](const SessionOptions& o) { return o.sources.xla; }, make<XlaTracer>},
    {"GC", [](const SessionOptions& o) { return o.sources.gc; }, make<GcTracer>},
    {"stacks", wants_stacks, make<StackTracer>},
};

}  // namespace

std::span<const TracerEntry> tracer_catalogue() {
  return kTracers;
}

}  // namespace lt
