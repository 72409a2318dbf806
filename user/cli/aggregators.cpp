#include "user/cli/aggregators.h"

#include <utility>

#include "reports/aggregate/comm.h"
#include "reports/aggregate/comm_stacks.h"
#include "reports/aggregate/compiles.h"
#include "reports/aggregate/device_stats.h"
#include "reports/aggregate/gc.h"
#include "reports/aggregate/gpu.h"
#include "reports/aggregate/loader_waits.h"
#include "reports/aggregate/logging_time.h"
#include "reports/aggregate/memory.h"
#include "reports/aggregate/nccl.h"
#include "reports/aggregate/ops.h"
#include "reports/aggregate/stacks.h"
#include "reports/aggregate/xla.h"

namespace lt {
namespace {

// One aggregator A whose finish() goes to ReportResults::*Result.
template <class A, auto Result>
class Slot final : public AggregatorSlot {
 public:
  template <class... Args>
  explicit Slot(Args&&... args) : a_(std::forward<Args>(args)...) {}
  void add(const lt_event_header& h, const std::byte* p) override { a_.add(h, p); }
  void gap() override {
    if constexpr (requires(A & a) { a.gap(); }) a_.gap();
  }
  void finish(ReportResults& r) override { r.*Result = a_.finish(); }

 private:
  A a_;
};

template <class A, auto Result, class... Args>
std::unique_ptr<AggregatorSlot> slot(Args&&... args) {
  return std::make_unique<Slot<A, Result>>(std::forward<Args>(args)...);
}

struct Ctx {
  const Options& o;
  const AggregatorNeeds& need;
  const ActionAggregator& actions;
};

using Maker = std::unique_ptr<AggregatorSlot> (*)(const Ctx&);

// In feeding order: the stack, op, GPU and device aggregators right after
// the actions (they read the action open on the record's thread).
constexpr Maker kAggregators[] = {
    [](const Ctx& c) { return slot<StackAggregator, &ReportResults::stacks>(c.actions, c.o.full_stacks); },
    [](const Ctx& c) {
      return slot<OpAggregator, &ReportResults::ops>(
          c.actions, OpAggregatorOptions{c.o.schedule, c.need.exports, c.o.group_by_input_shapes});
    },
    [](const Ctx& c) {
      return slot<GpuAggregator, &ReportResults::gpu>(c.actions, c.need.exports || c.need.intervals);
    },
    [](const Ctx& c) { return slot<DeviceStatsAggregator, &ReportResults::device_stats>(c.actions); },
    [](const Ctx& c) {
      return slot<MemoryAggregator, &ReportResults::memory>(c.actions, MemoryOptions{.keep_events = c.need.exports});
    },
    [](const Ctx& c) {
      return slot<CommAggregator, &ReportResults::comm>(c.actions, CommAggregatorOptions{.keep_calls = c.need.exports});
    },
    // NCCL API calls, joined to their kernels.
    [](const Ctx& c) { return slot<NcclAggregator, &ReportResults::nccl>(c.actions); },
    // --launch-stacks: c10d calls by Python stack.
    [](const Ctx&) { return slot<CommStackAggregator, &ReportResults::comm_stacks>(); },
    // torch.compile regions: the ops report's compile section.
    [](const Ctx& c) { return slot<CompileAggregator, &ReportResults::compiles>(&c.actions); },
    // torch_xla's compiles, executions, transfers.
    [](const Ctx& c) { return slot<XlaAggregator, &ReportResults::xla>(c.actions, c.need.exports); },
    // CPython's garbage collections: the verdict's GC finding.
    [](const Ctx&) { return slot<GcAggregator, &ReportResults::gc>(); },
    // The stack samples in logging code: the verdict's logging finding.
    [](const Ctx&) { return slot<LoggingAggregator, &ReportResults::logging>(); },
    // Where the DataLoader workers waited off a CPU: the input-bound finding.
    [](const Ctx&) { return slot<LoaderWaitsAggregator, &ReportResults::loader_waits>(); },
};

}  // namespace

AggregatorNeeds aggregator_needs(const Options& o) {
  return {.exports = !o.chrome_path.empty() || !o.perfetto_path.empty() || !o.html_path.empty(),
          .intervals = reports_keep_intervals(o) || o.findings_for_page};
}

std::vector<std::unique_ptr<AggregatorSlot>> make_aggregators(const Options& opts, const AggregatorNeeds& needs,
                                                              const ActionAggregator& actions) {
  std::vector<std::unique_ptr<AggregatorSlot>> v;
  const Ctx c{opts, needs, actions};
  for (Maker m : kAggregators) v.push_back(m(c));
  return v;
}

std::size_t aggregator_count() {
  return std::size(kAggregators);
}

}  // namespace lt
