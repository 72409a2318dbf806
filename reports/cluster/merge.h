// The offline multi-rank merge (`report DIR --merge`): trace files of one
// distributed job, typically one per node, each aggregated on its own (pids
// collide across hosts), become one list of ranks on one common clock.
//
// Clocks.  Every ts_ns is its host's CLOCK_MONOTONIC.  A file's HOST_INFO
// clock pair maps it to that host's CLOCK_REALTIME; a per-host correction
// (clock_offset_ns, added) then puts it on the common clock, the clock of a
// reference host (the one with the lowest rank).  Corrections are measured
// (the cluster agent's round-trip exchange, given to plan_merge) or estimated
// from the job's own collectives (estimate_offsets_from_collectives).
//
// Pure functions of the reports: no I/O, no clocks.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/comm.h"
#include "reports/aggregate/gpu.h"
#include "reports/aggregate/ops.h"

namespace lt {

// One trace file, aggregated on its own.
struct MergeInput {
  std::string file;                // as given: names the file in notes
  ActionsReport actions;           // aggregated with keep_intervals = true
  std::optional<OpsReport> ops;    // kept intervals: op slices in the traces
  std::optional<GpuReport> gpu;    // kept slices: kernel, copy, API rows and launch flows in the traces
  std::optional<CommReport> comm;  // kept calls: who arrived last at each collective (reports/cluster/arrivals.h)
  bool damaged = false;            // parts of the file were damaged and skipped
};

enum class ClockSource {
  recorded,   // the host's own wall clock (HOST_INFO pair), uncorrected
  measured,   // a correction measured by the cluster agents, given to plan_merge
  estimated,  // a correction estimated from the job's collectives
};
const char* clock_source_name(ClockSource s);

// One clock: the files recorded on one host (one HOST_INFO host name and
// clock mapping).
struct HostClock {
  std::string host;                // HOST_INFO host name, else the file name
  std::vector<std::size_t> files;  // indexes into the inputs
  bool clock_pair = true;          // every file of it has a HOST_INFO clock pair
  std::int64_t clock_offset_ns = 0;
  ClockSource source = ClockSource::recorded;
  std::int64_t residual_ns = -1;  // of an estimate: median |deviation|; of a measurement: its bound; -1 unknown
  std::int64_t stderr_ns = -1;    // of an estimate: the standard error of its median; -1 unknown
  // Of a measurement from the files' CLOCK_SYNC records: the host measured
  // against (the cluster coordinator), how many round-trip measurements, and
  // how far the first and last differ (drift over the capture).
  std::string measured_against;
  std::size_t measurements = 0;
  std::int64_t drift_ns = 0;
};

// One host's correction from its CLOCK_SYNC records (pure): the mean of the
// measurements, each good to +-delay/2; the bound is the largest of those
// plus half the spread between them (a constant correction cannot follow
// drift).  nullopt when there are none.
struct MeasuredOffset {
  std::int64_t offset_ns = 0, bound_ns = 0, drift_ns = 0;
  std::size_t measurements = 0;
  std::string reference;
};
std::optional<MeasuredOffset> measured_offset(const std::vector<ClockSync>& syncs);

// One rank: a process that ran Lightning actions.
struct RankRun {
  int rank = -1;  // the job's rank (labels); -1: none, or a duplicate
  int index = 0;  // unique: rank, else a free number above the job's ranks; the trace pid
  int local_rank = -1, world_size = -1;
  std::string label;  // "rank 3", "pid 1234@node-b"
  std::string host;   // its node: its own host name (PROC_ENV), else the recording host's
  std::size_t host_index = 0;
  std::string file;
  std::size_t file_index = 0;
  const ProcessActions* proc = nullptr;
  const ActionsReport* report = nullptr;
  const OpsReport* ops = nullptr;
  const GpuReport* gpu = nullptr;
  const ProcessComm* comm = nullptr;  // its COMM calls, when the input has them
  std::int64_t clock_offset_ns = 0;   // its host's correction
  bool exited = false;                // the process exited during the capture
  bool file_cut = false;              // its recording ended abruptly (no detach record)
  bool ended_early = false;           // other ranks went on training after its data ends

  // A ts_ns of its host on the common clock.
  std::int64_t common_ns(std::uint64_t mono_ns) const;
  std::int64_t begin_ns() const { return common_ns(proc->window_begin_ns); }
  std::int64_t end_ns() const { return common_ns(proc->window_end_ns); }
};

struct MissingNode {
  int node;                   // rank / local world size
  int first_rank, last_rank;  // inclusive
};

struct MergePlan {
  std::vector<HostClock> hosts;  // in order of their first file
  std::vector<RankRun> ranks;    // by index
  int world_size = -1;           // the largest WORLD_SIZE label; -1 unknown
  int local_world_size = -1;     // the largest LOCAL_RANK + 1; -1 unknown
  std::vector<int> missing_ranks;
  // Nodes none of whose ranks has a trace, assuming ranks are numbered node
  // by node (torchrun, srun): node n holds ranks n*L .. n*L+L-1.
  std::vector<MissingNode> missing_nodes;
  std::vector<std::string> notes;  // duplicates, disagreeing labels, files without ranks
  // On the common clock: every rank's window together, and the part that
  // the ranks that did not end early all share (all ranks', if all did).
  std::int64_t begin_ns = 0, end_ns = 0, overlap_begin_ns = 0, overlap_end_ns = 0;
  std::size_t reference_host = 0;  // the host of the lowest rank

  const RankRun* find_rank(int rank) const;
};

// Builds the rank list.  The plan points into `inputs`: keep them alive and
// unmoved while it is used.  `measured_offsets_ns`: host name -> correction
// (ns added to that host's wall clock), e.g. from the cluster agent.
MergePlan plan_merge(const std::vector<MergeInput>& inputs,
                     const std::map<std::string, std::int64_t>& measured_offsets_ns = {});

// Sets one host's correction (and its ranks'), then the windows and flags.
void set_host_offset(MergePlan& plan, std::size_t host, std::int64_t offset_ns, ClockSource source,
                     std::int64_t residual_ns = -1);

// Training steps of every rank on the common clock.
struct RankStep {
  std::int64_t begin_ns = 0, end_ns = 0;
  // The action that holds the gradient all-reduce, inside the step.
  bool has_sync = false;
  std::int64_t sync_begin_ns = 0, sync_end_ns = 0;
};
struct TrainingSteps {
  // "run_training_batch", else "[Strategy]<class>.training_step"; "" none.
  std::string step_action;
  // "[Strategy]<class>.backward" when every rank with steps has it inside
  // its steps (DDP's all-reduce completes before backward returns), else "".
  std::string sync_action;
  std::vector<std::vector<RankStep>> per_rank;  // plan.ranks order; by begin
};
TrainingSteps training_steps(const MergePlan& plan);

// Estimates the per-host corrections from the job's own collectives.
//
// Assumes: the job is data-parallel and synchronous (DDP, gloo or NCCL): all
// ranks finish the gradient all-reduce of step k together, so the ends of
// the action that holds it (the sync action above; else whole steps, whose
// tail after the all-reduce — the optimizer step — then must take the same
// time everywhere) mark one instant on every rank.  For each host, each end
// on each of its ranks is paired with the nearest end of each rank of the
// reference host; pairs further apart than 40% of the median step period
// are dropped (so the hosts' recorded wall clocks must already agree to
// better than that, as NTP or a measured offset makes them); the correction
// is the median difference.
//
// Who waited matters: a rank blocked at the all-reduce for long leaves it
// later than the last rank to arrive (its thread must wake up: ~130 us
// measured with gloo on CPU).  So only pairs whose sync actions took alike
// times count (both waited, or neither).  A host with no such pair (its
// ranks are all stragglers, or it waits for a straggler alone on the
// reference host) uses the others, corrected by the wake-up latency seen
// between a waiting and a non-waiting rank of one host; with no such
// ranks anywhere, uncorrected, flagged role_bias: the estimate is then off
// by about that latency.
//
// The residual is the median |difference - that median| (and its 95th
// percentile): the jitter of the all-reduce ends plus what remains of the
// clock error.  A host whose all-reduce completion is systematically later
// (a slower link seeing the last bucket later) biases the estimate by that
// much; nothing here can tell the two apart.
struct HostOffsetEstimate {
  bool estimated = false;
  std::int64_t offset_ns = 0;  // the correction it suggests (total)
  std::int64_t change_ns = 0;  // relative to the host's correction now
  std::int64_t mad_ns = 0, p95_ns = 0;
  // The standard error of the median, 1.2533 * 1.4826 * MAD / sqrt(pairs)
  // (pairs taken as independent): the estimate's own uncertainty.
  std::int64_t stderr_ns = 0;
  std::size_t pairs = 0;        // the pairs the median is over
  std::size_t alike_pairs = 0;  // of ranks that waited alike
  bool wake_corrected = false;  // pairs of unlike waits, corrected by wake_latency_ns
  bool role_bias = false;       // pairs of unlike waits, uncorrected
  std::string why_not;          // when not estimated
};
struct ClockEstimate {
  std::string action;  // whose ends were matched ("" when nothing was)
  std::size_t reference_host = 0;
  std::int64_t wake_latency_ns = -1;      // waiting vs last-arriving rank, one host; -1 unseen
  std::vector<HostOffsetEstimate> hosts;  // plan.hosts order; the reference: 0
};
ClockEstimate estimate_offsets_from_collectives(const MergePlan& plan);

// Applies the estimate to every host it estimated; with keep_measured, hosts
// with a measured correction keep it (the estimate then only checks it).
void apply_clock_estimate(MergePlan& plan, const ClockEstimate& est, bool keep_measured = true);

}  // namespace lt
