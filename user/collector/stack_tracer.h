// Python stacks (--sample-rate, off-CPU time, and the stacks of launches
// and allocations): the sampler's perf events and BPF walker
// (user/sources/pysample.h), and the names of what it records — code
// objects (the shared symbolizer) and native leaves — written ahead of each
// stack while they are still alive. Which targets are sampled is their
// entry in the target table: those whose thread states BPF can find.
#pragma once
#include <cstdint>
#include <memory>
#include <set>

#include "user/collector/tracer.h"

namespace lt {

class PySampleSource;
namespace proc {
class NativeSymbols;
}  // namespace proc

class StackTracer final : public Tracer {
 public:
  explicit StackTracer(const TracerContext& ctx);  // throws lt::Error(bpf|permission)
  ~StackTracer() override;
  std::string_view name() const override { return "stacks"; }
  void fill_target(pid_t pid, lt_target& t) const override;
  void forget(pid_t pid) override;
  void observe(const lt_event_header& h, std::span<const std::byte> record) override;
  std::string escalate(pid_t pid, bool on) override;
  void detach() override;

 private:
  const TracerContext& ctx_;
  std::unique_ptr<PySampleSource> source_;
  std::unique_ptr<proc::NativeSymbols> natives_;
  std::set<pid_t> full_rate_;               // escalated: sampled at escalated_rate_hz
  bool fork_waits_ = false;                 // the forks' blocking only (SourceSet::fork_waits)
  std::set<pid_t> acting_forks_;            // ...less those that run Lightning actions (trainers)
  std::uint64_t leaves_while_loading_ = 0;  // native leaves not named: their symbols not read yet
};

}  // namespace lt
