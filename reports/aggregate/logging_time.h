// The on-CPU stack samples taken in logging (PY_SAMPLE records, the stack
// sampler): metric logging (LightningModule.log / log_dict, Lightning's
// logger connector and loggers), the logger libraries (TensorBoard's
// writers, wandb, MLflow) and Python's `logging` module.  What the
// verdict's logging finding charges to the train steps the samples fall in
// (reports/verdict/findings.h): an estimate, samples x the period.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bpf/events.h"
#include "user/model/stack_profile.h"

namespace lt {

// Whether a frame is logging code (by its file and function).
bool is_logging_frame(const StackFrame& f);

struct LoggingSample {
  std::uint64_t ts_ns = 0;
  std::uint32_t tid = 0;
  std::uint32_t entry = 0;  // the outermost logging frame ("LightningModule.log (module.py:512)"): LoggingReport::names
  std::uint32_t caller = 0;  // the frame that called it (its call site), or kNoCaller
  std::uint32_t weight = 1;  // sampling periods it stands for (sample_weight.h)
};

struct LoggingReport {
  static constexpr std::uint32_t kNoCaller = UINT32_MAX;
  std::uint64_t period_ns = 0;                                // the on-CPU sampling period (0: none)
  std::map<std::uint32_t, std::vector<LoggingSample>> procs;  // by pid, in time order
  std::map<std::uint32_t, std::uint64_t> sampled;             // on-CPU samples per pid, all of them
  std::vector<std::string> names;                             // entry / caller frames
  bool any() const { return period_ns != 0 && !sampled.empty(); }
};

class LoggingAggregator {
 public:
  LoggingAggregator();
  ~LoggingAggregator();
  void add(const lt_event_header& h, const std::byte* record);
  LoggingReport finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace lt
