// `ltrace-bpf diff A B` (issue 34): what changed between two recordings of
// a Lightning job, row by row, with a test that says which changes are real.
//
// Rows: the train step itself; each of its parts (dataloader, step
// function, backward, optimizer, hooks, other: steps.h's split, which
// adds up to the step); each action; each op, with the op observer's
// calls; each stack line, with stack samples; each kind of c10d
// collective, with the comm probes' times (the time a thread was blocked
// on it); and each GPU kernel, with CUPTI's records (its GPU time). Samples: per step for the step, its parts and the
// ops (an op's self time in the step), per call for the actions. Each row: time per train step in A and B (its share of
// the step), the change of its own time (an action's less the actions it holds), the Hodges-Lehmann shift with its 95%
// interval, and the Mann-Whitney p-value, adjusted: the train step has
// half of alpha to itself, the rows at least the floor per step share the other half under Holm (rows under it are not
// tested); "~" where it is not significant, or where the shift's 95% interval (times the row's calls per step) reaches
// within min_effect of A's median step of no change: two runs of one job differ by a little in everything (measured:
// +1.2 % in the step, p 0.04, between two runs of the same fit), and with enough steps a test finds it; a verdict says
// the change is at least that large. Sorted by the change in own time per step: what costs the step most comes
// first, and a container (run_training_batch around the step that moved) after what it holds.
//
// With several runs on a side (diff A1 A2 ... --vs B1 ...), the test is over
// runs instead (reports/diff/run_test.h): each run gives each row its typical
// time per step (the median step or part; an action's median call times
// its calls per step), and Welch's t compares those, so that what differs
// between runs of one job is in the test; the shift is per step, and a
// verdict needs the shift itself past the floor.
#pragma once
#include <array>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bpf/events.h"
#include "reports/aggregate/actions.h"
#include "reports/aggregate/comm.h"
#include "reports/aggregate/gpu.h"
#include "reports/aggregate/py_symbols.h"
#include "reports/aggregate/steps.h"
#include "reports/diff/rank_test.h"
#include "reports/diff/run_test.h"
#include "reports/export/export_range.h"

namespace lt {

struct DiffRow {
  std::string what;  // "train step", "part: backward", "[Strategy]SingleDeviceStrategy.training_step", "op: aten::mm"
  enum class Kind { step, part, action, op, line, stack, collective, kernel } kind = Kind::action;
  std::vector<std::string> frames;        // Kind::stack: the whole stack, outermost frame first
  std::size_t n_a = 0, n_b = 0;           // samples (steps or calls)
  double per_step_a = 0, per_step_b = 0;  // seconds per train step
  double median_a = 0, median_b = 0;      // seconds per sample
  double calls_a = -1, calls_b = -1;      // calls per train step (-1: not a count: the step, parts, lines, stacks)
  // Its own time per train step (seconds): an action's calls less the
  // actions they hold on their thread (run_training_batch less its
  // optimizer_step, ...); every other row's time is its own already. The
  // rows sort by its change, so a container sorts below what moved it.
  double own_a = 0, own_b = 0;
  RankTest test;                         // B against A
  double p_holm = 1;                     // adjusted (see above), against alpha
  std::size_t steps_a = 0, steps_b = 0;  // the train steps its time and calls are per (an op row's: measured)
  bool tested = false;                   // false: under the floor per step on both sides together (no verdict possible)
  int verdict = 0;                       // +1 slower, -1 faster, 0 not significant
};

struct StepDiff {
  std::size_t steps_a = 0, steps_b = 0;
  std::size_t op_steps_a = 0, op_steps_b = 0;  // of those, the op observer measured whole (the op rows')
  std::size_t runs_a = 1, runs_b = 1;
  // The test over runs (shift per step) rather than over one run's steps
  // (shift per sample).
  bool by_run() const { return runs_a > 1 || runs_b > 1; }
  double alpha = 0.05;
  double min_effect = 0.01;  // of A's time per step
  std::size_t tested = 0;    // rows in the Holm family
  // Why there are no op rows, or line rows ("" when there are, or no run
  // has any).
  std::string no_op_rows, no_line_rows, no_stack_rows, no_collective_rows, no_kernel_rows;
  // Whole stacks under the floor per step on both sides together: not rows
  // (a fit's samples fall into hundreds of stacks of a sample or two).
  std::size_t stacks_under_floor = 0;
  std::vector<DiffRow> rows;  // the step row first, then by |change of own time per step|
  const DiffRow* step() const { return rows.empty() || rows[0].kind != DiffRow::Kind::step ? nullptr : &rows[0]; }
};

// A recording's op calls as diff reads them: the op observer's measured
// calls (OP_SPAN: start, end, self time, on its thread), named by OP_NAME.
class OpCalls {
 public:
  // Takes OP_NAME, OP_SPAN and OP (the op probes' entries: estimates).
  void add(const lt_event_header& h, const std::byte* record);
  struct Call {
    std::uint32_t pid, op;
    std::uint64_t begin_ns, self_ns;
  };
  std::vector<std::string> names;  // op index -> name
  std::vector<Call> calls;         // measured calls, hidden ones (--ops) left out
  bool probed = false;             // op probe records: times would be estimates
  // Per process, the spans of time its op probe entries cover (first, last),
  // a new one after each observer call between them: the probes' calls of a
  // process the observer took over from (run, --all), or that went back to
  // them (torch.compile), are not in `calls`.
  std::map<std::uint32_t, std::vector<std::pair<std::uint64_t, std::uint64_t>>> probed_ranges;
  // Per process, the spans the op observer measured: from its handshake's
  // end (its first OP_OBSERVER record, or the first call it recorded if
  // that began earlier) to its final record (open: to the recording's
  // end). An attach's observer begins seconds after the attach, a watch
  // escalation's ends with the window: a step outside would read 0 for
  // every op. A process with calls and no such record (an older trace) is
  // measured throughout.
  std::map<std::uint32_t, std::vector<std::pair<std::uint64_t, std::uint64_t>>> measured;
  // Whether the observer measured all of [begin, end] of process pid.
  bool measured_whole(std::uint32_t pid, std::uint64_t begin, std::uint64_t end) const;

 private:
  void probed_at(const lt_event_header& h);
  std::set<std::uint32_t> span_since_probe_;
  std::set<std::uint32_t> before_first_call_;  // an observer span opened, no call recorded in it yet
};

// A recording's stack samples as diff reads them: each on-CPU sample's
// innermost Python line (PY_SAMPLE, named by PY_CODE / PY_LINE) and the
// sampling period (SAMPLER_INFO): the line's time is an estimate, samples
// x period.
class LineSamples {
 public:
  // keep_stacks: each sample's whole stack too (diff's stack rows, and
  // --html's flame graphs).
  explicit LineSamples(bool keep_stacks = false) : keep_stacks_(keep_stacks) {}
  bool keeps_stacks() const { return keep_stacks_; }
  void add(const lt_event_header& h, const std::byte* record);
  struct Sample {
    std::uint32_t pid, line;  // line: index in `lines`
    std::uint64_t ts_ns;
    std::uint32_t stack = 0;   // index in `stacks` (keep_stacks)
    std::uint32_t weight = 1;  // sampling periods it stands for (sample_weight.h)
  };
  std::vector<std::string> lines;  // "function (file:line)": the innermost frames', and with keep_stacks every frame's
  std::vector<Sample> samples;
  std::vector<std::vector<std::uint32_t>> stacks;  // keep_stacks: frames as indexes in `lines`, outermost first
  std::uint64_t period_ns = 0;

 private:
  std::uint32_t name_index(const StackFrame& f);
  bool keep_stacks_ = false;
  PySymbols symbols_;
  std::map<std::string, std::uint32_t> index_;
  std::map<std::vector<std::uint32_t>, std::uint32_t> stack_index_;
};

// One recording: its actions, with their intervals (ActionAggregator(
// keep_intervals)), and its op calls (null: not read). Op rows ("op: NAME")
// come from the op observer's measured calls: per train step, the self
// time of the op's calls that began in it (torch.profiler's Self CPU, as
// the observer measured it); there are op rows only when every run of both
// sides has measured calls.
//
// Line rows ("line: FUNCTION (FILE:LINE)") come from the stack samples: per
// train step, the samples whose innermost Python frame was at that line,
// times the sampling period (an estimate); only when every run has them.
// Stack rows ("stack: FUNCTION (FILE:LINE)", the innermost frame, with the
// whole stack in `frames`) likewise per whole Python stack, when the
// samples kept their stacks (LineSamples(keep_stacks)): one line reached
// from two callers is two stacks. Only stacks at or over the floor per
// step are rows.
//
// Collective rows ("collective: all_reduce (blocked)") come from the c10d
// calls (CommAggregator(keep_calls)): per train step, the time a thread of
// the process was blocked waiting for the calls of that kind issued in the
// step (what a collective costs the step; a straggler's peers show it).
// Only when every run has the comm probes' times (COMM_MARK records).
//
// Kernel rows ("kernel: NAME", nsys's short name, so that a kernel's
// template arguments changing between torch versions keep its row) come
// from the GPU slices (GpuAggregator(keep_slices)): per train step, the GPU
// time of the kernels launched in it (by their launch: a kernel still
// running after its step's end is its step's). Only when every run has
// kernels.
struct DiffRun {
  const ActionsReport* actions = nullptr;
  const OpCalls* ops = nullptr;
  const LineSamples* lines = nullptr;
  const CommReport* comm = nullptr;
  const GpuReport* gpu = nullptr;
};
StepDiff diff_runs(const std::vector<DiffRun>& a, const std::vector<DiffRun>& b, double alpha = 0.05,
                   double min_effect = 0.01);

// What diff keeps of one run: its samples per row (per step for the step,
// its parts, ops, lines, stacks, collectives and kernels; per call for the
// actions), a few numbers per step or call, where the recording holds every
// interval, op call and sample. Taken from each run as it is read, so that a
// diff holds one recording at a time (diff_runs above is these two calls).
struct DiffSamples {
  std::vector<double> steps;
  std::array<std::vector<double>, kStepParts> parts;
  std::map<std::string, std::vector<double>> actions;  // per call
  std::map<std::string, double> action_own;            // seconds: its calls less the actions they hold
  std::map<std::string, std::vector<double>> ops;      // per train step: the op's self time
  std::map<std::string, std::vector<double>> lines;    // per train step: samples at the line x period
  std::map<std::string, std::vector<double>> stacks;   // per train step: samples of the whole stack x period
  std::map<std::string, std::vector<double>> colls;    // per train step: blocked on that kind's calls
  std::map<std::string, std::vector<double>> kernels;  // per train step: GPU time of the kernels launched in it
  // The train steps the op observer measured whole: the op rows' samples
  // (one per such step) and the steps their time and calls are per.
  std::size_t op_steps = 0;
  // Calls in the train steps: per op, per collective kind (those timed), per kernel.
  std::map<std::string, std::uint64_t> op_calls, coll_calls, kernel_calls;
  // Why this run has no op / line / stack / collective / kernel samples.
  std::string no_ops, no_lines, no_stacks, no_colls, no_kernels;
};
DiffSamples collect_diff_samples(const DiffRun& run);
StepDiff diff_samples(std::vector<DiffSamples> a, std::vector<DiffSamples> b, double alpha = 0.05,
                      double min_effect = 0.01);

// Both sides need their intervals (ActionAggregator(keep_intervals)).
StepDiff diff_steps(const ActionsReport& a, const ActionsReport& b, double alpha = 0.05, double min_effect = 0.01);
// Several runs a side (each one trace); one run each is the call above.
StepDiff diff_steps(const std::vector<ActionsReport>& a, const std::vector<ActionsReport>& b, double alpha = 0.05,
                    double min_effect = 0.01);

// What lies wholly within `range` of a recording (its steps, or seconds
// after its attach): the intervals that begin and end inside each process's
// span (an epoch around it is not), so that two parts of one run can be
// compared. `summary`: what the range matched, for stderr ("" when all).
ActionsReport within(ActionsReport rep, const ExportRange& range, std::string* summary = nullptr);

// The text table; labels name A and B.
std::string render_step_diff(const StepDiff& d, const std::string& label_a, const std::string& label_b);

}  // namespace lt
