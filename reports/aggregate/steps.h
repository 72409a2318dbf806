// Lightning's steps, one by one, for the dashboard (--html): each training,
// validation, test and predict batch's duration and what it is made of.
//
// A step is one batch of a stage, found from the batch hooks' names
// (step_batches.h): from the beginning of its fetch (or, with none seen,
// of its first batch hook) to the end of its last hook (on_*_batch_end).
// Its time is split by the innermost action open at each instant
// (exclusive time) into parts named by what the action is; instants inside
// the step but in no categorised action are "other", so the parts of a step
// always add up to its duration exactly.
//
// Pure functions of the kept intervals (ActionAggregator(keep_intervals)).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/gpu.h"
#include "reports/aggregate/step_batches.h"

namespace lt {

enum class StepPart : std::uint8_t { dataloader, step, backward, optimizer, hooks, other };
inline constexpr std::size_t kStepParts = 6;
const char* step_part_name(StepPart p);   // "dataloader", "training_step", ...
const char* step_part_label(StepPart p);  // for legends: "dataloader fetch + transfer", ...
// What an action is, by its name: the fetch ("*_next") and the batch
// transfer are `dataloader`; the step function (training_step,
// validation_step, ...) `step`; "backward" `backward`; optimizer_step and
// optimizer_zero_grad `optimizer`; [Callback] actions and other "on_*"
// hooks `hooks`; anything else (run_training_batch's own time) `other`.
StepPart step_part_of(std::string_view action);

struct StepRecord {
  std::uint32_t index = 0;  // within its stage, 0-based, in time order
  std::uint64_t begin_ns = 0, end_ns = 0;
  std::array<std::uint64_t, kStepParts> part_ns{};  // sum == end_ns - begin_ns
  // With GPU records of the process: the union of kernel time in the step,
  // copy/set time not under a kernel, and the rest (idle), summing to the
  // step's duration.
  bool has_gpu = false;
  std::uint64_t kernel_ns = 0, copy_ns = 0, gpu_idle_ns = 0;
  std::array<std::uint64_t, kStepParts> gpu_idle_part_ns{};  // the idle time by the part running on the CPU
  std::uint64_t duration_ns() const { return end_ns - begin_ns; }
};

struct ProcessSteps {
  std::uint32_t pid = 0, tid = 0;  // the thread the loop ran on
  // What the job calls train step i: i + train_offset (a watch capture's
  // steps, numbered from its STEP_BASE; 0 in a whole recording).
  std::int64_t train_offset = 0;
  std::vector<StepRecord> train, validation, test, predict;
  bool has_gpu = false;
  bool any() const { return !train.empty() || !validation.empty() || !test.empty() || !predict.empty(); }
};

// The stages in page order, with their names as the page writes them
// ("train", "validation", "test", "predict") and their steps.
struct StageSteps {
  const char* stage;
  const std::vector<StepRecord>* steps;
};
std::array<StageSteps, 4> stages_of(const ProcessSteps& s);

// `gpu`: kept slices (GpuAggregator(keep_slices)); null or none: no GPU parts.
ProcessSteps step_records(const ProcessActions& p, const GpuReport* gpu = nullptr);
// The same steps with the train steps' indexes as the job numbers them
// (index + train_offset, train_offset 0): what a watch capture's pages and
// tables show, so that they name the steps its summary line and findings
// name. A whole recording's are unchanged.
ProcessSteps numbered_as_the_job(ProcessSteps s);

// The step of `steps` (in time order, apart, as step_records gives them)
// that `ts` fell in, if any.
std::optional<std::size_t> step_at(const std::vector<StepRecord>& steps, std::uint64_t ts);

// Order statistics of step durations (ns): nearest-rank percentiles, the
// median absolute deviation, and the spike threshold: a step is a spike
// when it took longer than median + max(3 x MAD, 5% of the median).
struct StepStats {
  std::size_t count = 0;
  std::uint64_t p50 = 0, p90 = 0, p99 = 0, max = 0, mad = 0, spike_above = 0;
};
StepStats step_stats(const std::vector<StepRecord>& steps);
std::uint64_t percentile_ns(std::vector<std::uint64_t> sorted_or_not, double q);  // nearest rank, q in (0,1]
std::vector<std::size_t> spike_indexes(const std::vector<StepRecord>& steps, const StepStats& st);

// Steps folded into at most `max_buckets` consecutive buckets of equal size
// (the last may be shorter): each bucket's duration and parts are the mean
// of its steps'; `bucket` is the bucket size (1: not folded).
struct StepBuckets {
  std::size_t bucket = 1;
  std::vector<StepRecord> rows;       // index: of the bucket's first step
  std::vector<std::uint64_t> max_ns;  // the longest step of each bucket (spikes stay visible)
};
StepBuckets bucket_steps(const std::vector<StepRecord>& steps, std::size_t max_buckets);

// The position of the step whose [begin, end] holds t (steps by begin,
// disjoint); -1 none.
long step_holding(const std::vector<StepRecord>& steps, std::uint64_t t);

}  // namespace lt
