// `--report verdict` (issue 34): what is wrong with a Lightning job, ranked
// by the training step time at stake, each finding with its evidence and
// one line of what to try. Pure functions of the actions (kept intervals):
// the steps' exclusive parts (steps.h), the validation runs, the slowest
// actions. A finding is printed only past its stated threshold; step
// outliers only past a bound derived from the run's own spread.
//
//   input-bound   the dataloader part >= 10 % of the train step and >= 1 ms
//                 a step (kInputBoundMinMs: a worker's hand-over costs that)
//   hooks         callbacks and hooks >= 10 % of the train step (the top ones named)
//   optimizer     the optimizer part >= 40 % of the train step
//   validation    validation runs >= 10 % of the fit (first step to last),
//                 each from the train step before it to its last validation
//                 action (between_steps.h: its DataLoader's start included)
//   between steps the rest of the time between train steps (epoch turns:
//                 epoch hooks, a new train iterator), validation and
//                 checkpoints apart, >= 10 % of the fit
//   checkpoints   checkpoint saves >= 5 % of the fit: Trainer.save_checkpoint's
//                 action (Lightning 2.5+), else ModelCheckpoint's hooks, which
//                 hold the saves in older versions
//   outliers      train steps over median + 6 robust sigmas (1.4826 MAD) and
//                 over 1.5 x the median, the first (the warm-up) aside:
//                 their excess time per step, when >= 5 % of the steps' time
//   memory growth resident memory (the /proc samples of --device-stats and
//                 watch) growing over the train steps after the first 10 %:
//                 a least-squares line through the samples rising by >= 100
//                 MiB and >= 10 % of where it starts, the last quarter's
//                 median over the first's. No step time is at stake (0 ms:
//                 ranked last); what is at stake is the job's memory.
//   cpu contention the training loop's thread runnable but waiting for a
//                 CPU (its run queue: /proc schedstat, sampled with the
//                 /proc samples) >= 15 % of the train steps' time: other
//                 processes or threads on its CPUs; the time at stake is
//                 that wait per step. Where the batches load in the
//                 training process, that wait's share of the fetch (an
//                 estimate) leaves input-bound: one wait, one finding.
//   collective-bound a process's threads blocked waiting for collectives
//                 (the c10d probes' waits, comm.h) in its train steps'
//                 actions >= 15 % of the train steps' time: that wait
//                 per step at stake.
//   recompiles    torch.compile recompiling inside the train and validation
//                 steps: the compiles Dynamo recorded in the job (compiles.h:
//                 read from outside with the op report) that have a
//                 recompile reason and began inside such a step, their
//                 durations (Dynamo's own) >= 5 % of those steps' time, per
//                 train step; the most frequent reason and the graph breaks
//                 as evidence. That time is not also a step's outlier excess
//                 nor validation's.
//   graph_breaks  torch.compile's graph breaks: on-CPU stack samples inside
//                 the train steps in a function Dynamo compiled (a region
//                 ran for it) but outside all of its compiled regions and
//                 not compiling (compiles.h: Python run eagerly between
//                 the graphs) >= 5 % of the steps' time, where Dynamo's
//                 record has graph breaks: an estimate (samples x the
//                 period), with the line most sampled and Dynamo's reasons.
//   gc            CPython's garbage collections (the pygc probes: CPythons
//                 built with their USDT probes; or, without them, the stack
//                 samples taken inside a collection, an estimate) inside the
//                 train steps, each clipped to its step, >= 5 % of the
//                 steps' time: that time per step, by generation, the
//                 longest as evidence. Not also a step's outlier excess.
//   logging       the training loop thread's on-CPU stack samples inside
//                 the train steps that were in logging code (self.log and
//                 log_dict, Lightning's logger connector and loggers, the
//                 TensorBoard/wandb/MLflow libraries, Python's logging:
//                 logging_time.h) >= 5 % of the steps' time, from >= 10
//                 samples: an estimate (samples x the sampling period), with
//                 the logging entry and its call site most sampled.
//   straggler     of the processes of one report (ranks under --children),
//                 the one waiting least, when another is collective-bound
//                 and waits over twice as long: the rank the others wait
//                 for, with its cause (the part of its step furthest over
//                 the waiter's: input, its own compute, hooks) and its run-
//                 queue wait when sampled; the waiter's wait at stake.
#pragma once
#include <string>
#include <vector>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/comm.h"
#include "reports/aggregate/compiles.h"
#include "reports/aggregate/device_stats.h"
#include "reports/aggregate/gc.h"
#include "reports/aggregate/gpu.h"
#include "reports/aggregate/loader_waits.h"
#include "reports/aggregate/logging_time.h"

namespace lt {

struct Finding {
  std::string kind;  // "input-bound", "hooks", ..., "straggler": the list above
  std::uint32_t pid = 0;
  double ms_per_step = 0;  // train step time at stake
  double share = 0;        // of the train step (validation: of the fit)
  std::string evidence;    // the numbers
  std::string try_this;    // one line
};

inline constexpr double kInputBound = 0.10, kHooks = 0.10, kOptimizer = 0.40, kValidation = 0.10, kCheckpoints = 0.05;
inline constexpr double kBetweenSteps = 0.10;
// ...and input-bound only from this much dataloader time a step: a
// DataLoader worker's hand-over of a batch (a queue get, the batch's
// tensors taken from shared memory) costs the training process about 1 ms
// (1.06-1.25 ms a batch with 1 or 2 workers against 0.13-0.17 ms loading
// it in the process, bench/loader_handover.py). The demo job's 0.15 ms
// fetch of a 0.8 ms step (17 %) was told to add workers. (0.5 ms, with a
// cheaper __getitem__ advised under 1 ms, made the demo job input-bound on
// a loaded CI machine, its fetch slowed by the CPU wait: CI 151.)
inline constexpr double kInputBoundMinMs = 1.0;
inline constexpr double kOutlierSigmas = 6.0, kOutlierFactor = 1.5, kOutlierShare = 0.05;
inline constexpr double kGrowthMiB = 100, kGrowthShare = 0.10;
inline constexpr double kContention = 0.15, kCollective = 0.15, kRecompiles = 0.05, kGc = 0.05;
inline constexpr double kLogging = 0.05, kGraphBreaks = 0.05;
// DataLoader workers on a CPU this share of the steps' time: CPU-bound loading.
inline constexpr double kWorkersBusy = 0.75;
inline constexpr std::size_t kLoggingMinSamples = 10;
// A process with fewer train steps is not judged (too few to say anything).
inline constexpr std::size_t kMinTrainSteps = 5;

// Ranked: most step time at stake first.
// `stats`: the /proc samples, when recorded (--device-stats, watch).
// `comm`: the c10d probes' calls and waits, when recorded.
// `compiles`: torch.compile's regions and Dynamo's records (with --report ops).
// `gc`: the garbage collections, when recorded (the verdict asks for them).
// `logging`: the stack samples in logging code, when sampled (the verdict
// asks for stacks).
// `gpu`: the CUPTI records with their slices kept (GpuAggregator(keep_slices)),
// for the host-device sync and GPU idle findings (gpu_findings.h).
// `loader`: where the DataLoader workers waited off a CPU (--off-cpu), for
// the input-bound finding.
std::vector<Finding> find_issues(const ActionsReport& rep, const DeviceStatsReport* stats = nullptr,
                                 const CommReport* comm = nullptr, const CompilesReport* compiles = nullptr,
                                 const GcReport* gc = nullptr, const LoggingReport* logging = nullptr,
                                 const GpuReport* gpu = nullptr, const LoaderWaitsReport* loader = nullptr);
// `not_judged`: what the recording had nothing to judge by (unjudged()),
// said after the findings, so that "none" is not read as "all is well".
std::string render_findings(const ActionsReport& rep, const std::vector<Finding>& f,
                            const std::string& not_judged = "");
// The findings a recording gave nothing to judge by, and how to record it:
// memory growth and CPU contention without /proc samples (--device-stats),
// GC pauses without CPython's gc probes or stack samples, logging without
// stack samples; "" when every one was judged.
std::string unjudged(const DeviceStatsReport* stats, const GcReport* gc, const LoggingReport* logging);

// What a finding puts at stake, as its header says it: "1.50 ms per train
// step at stake", or for memory growth (no step time) "memory at stake, not
// step time (+40%)".  The text verdict and the dashboard say it alike.
std::string finding_at_stake(const Finding& f);

// How every finding's evidence writes its numbers: "20.6%" of a share,
// "1.50 ms".
std::string finding_pct(double share);
std::string finding_ms(double ms);

}  // namespace lt
