// Command-line parsing: what the command line asks for (Options), parsed by
// the option and command tables (user/cli/cli_table.h).  Errors are
// lt::Error(usage) with one line of text.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "reports/advanced/advanced_report.h"
#include "reports/export/export_range.h"

namespace lt {

struct Options {
  enum class Command { live, record, report, run, agent, cluster, ps, dump, watch, diff } command = Command::live;
  std::vector<std::string> run_argv;  // run: the command to launch under ltrace-bpf
  std::vector<pid_t> pids;
  // --all, or live/record without --pid and --job-env: every process with
  // torch or Lightning loaded, and those that start later (implies --children)
  bool all = false;
  // --job-env KEY=VALUE: every local process of a job (by its environment), e.g. SLURM_JOB_ID=4242
  std::vector<std::pair<std::string, std::string>> job_env;
  std::string output;  // -o FILE: trace file (record: required; live: optional)
  std::string input;   // report FILE
  // diff A B, or diff A1 A2 ... --vs B1 B2 ...: the traces of each side
  std::vector<std::string> diff_a, diff_b;
  bool diff_vs = false;                     // --vs given: later files are B's
  std::optional<ExportRange> diff_b_range;  // --vs-steps / --vs-window (A's: export_range)
  int diff_rank = -1, diff_b_rank = -1;     // --rank / --vs-rank: only that rank's processes (-1: all)
  bool diff_any_job = false;                // diff --any-job: compare recordings of different jobs
  double fail_if_slower_pct = -1;           // diff --fail-if-slower PCT (-1: never fail)
  bool children = false;
  double duration_s = 0;
  bool extended = true;
  std::string dirpath, filename;
  std::string report = "simple";  // comma-separated report names (user/cli/report_registry.h)
  bool report_given = false;      // --report given (else gpu tables show when there is GPU data)
  bool verdict_given = false;     // --verdict: the verdict beside whatever --report names, in either order
  std::int64_t why_step = -1;     // --why-step N: after the verdict, train step N taken apart (-1: none)
  bool wants_report(const std::string& name) const {
    // --why-step: the verdict, beside the reports given or recorded.
    if (why_step >= 0 && name == "verdict") return true;
    return ("," + report + ",").find("," + name + ",") != std::string::npos;
  }
  // Python stacks (advanced report, flame graphs)
  unsigned rate_hz = 0;      // --rate; 0: default (99) when stacks are needed
  bool off_cpu = false;      // --off-cpu
  bool full_stacks = false;  // --full-stacks: stacks keep the frames above their action's opening frame
  std::string collapsed_path, flamegraph_path, speedscope_path;
  LineRestriction line_count_restriction;  // AdvancedProfiler's: int = rows, fraction = share
  std::string dump_stats_dir;              // --dump-stats DIR: AdvancedProfiler's .prof per action (samples stacks)
  bool wants_stacks() const {
    return wants_report("advanced") || rate_hz || off_cpu || !collapsed_path.empty() || !flamegraph_path.empty() ||
           !speedscope_path.empty() || !dump_stats_dir.empty();
  }
  // aten ops (PyTorchProfiler's table)
  std::string sort_by = "cpu_time_total";  // Lightning's sort_by_key
  int row_limit = 20;                      // -1: every row
  bool group_by_input_shapes = false;      // ops: one row per (op, input shapes)
  bool profile_memory = false;             // ops: memory columns from the allocator probes
  bool module_names = false;               // ops: MODULE_CALL / MODULE_NAME records ([pl][module] rows)
  bool memory_bytes = false;               // ops: memory cells in exact bytes
  std::vector<std::string> op_filters;     // --ops globs
  bool schedule = false;                   // Lightning's default schedule: wait 1, warmup 1, active 3
  bool ops_records = false;                // --ops-layout records: Lightning 2.x's one "records" table
  bool wants_ops() const { return wants_report("ops") || !op_filters.empty() || profile_memory || module_names; }
  // Op times are sampled: they need a higher rate than stacks to be useful
  // on short ops (999 Hz costs ~1% of a CPU, docs/benchmarks.md).
  unsigned effective_rate() const { return rate_hz ? rate_hz : wants_ops() ? 999 : (wants_stacks() ? 99 : 0); }
  // GPU
  bool gpu = true;             // --no-gpu: no GPU records
  bool inject = true;          // --no-inject: never ptrace-inject the bridge
  bool launch_stacks = false;  // --launch-stacks: the Python stack of each launch (at most one per ms per thread)
  bool device_stats = false;   // --device-stats: NVML + /proc samples per action
  bool verbose = false;
  bool json = false;              // dump, cluster ... dump: one JSON document instead of text
  bool cluster_dump = false;      // cluster --slurm-job N dump: every rank's threads and a hang verdict
  bool cluster_watch = false;     // cluster --slurm-job N watch: a watcher on every node
  bool cluster_capture = false;   // cluster --slurm-job N capture: every rank captured by its node's watcher
  std::string agent_capture_via;  // agent --capture-via DIR: the node's ranks asked of its watcher there
  bool agent_dump = false;  // agent --dump-threads: the node's ranks dumped twice (--duration apart), not recorded
  std::string dump_path;
  bool merge = false;                  // report DIR --merge: several trace files (nodes) as one job
  bool findings_for_page = false;      // (no flag) a merged page's rank: its steps kept for its verdict findings
  std::string chrome_dir;              // --chrome-dir DIR: rank-<N>.json per rank (HTA's multi-rank input)
  std::string chrome_path, html_path;  // exports  // --dump FILE: every record as text
  std::string perfetto_path;           // --perfetto FILE: Perfetto's protobuf trace
  ExportRange export_range;            // --steps A-B / --window START,END: what the trace exports keep
  bool wants_trace_export() const { return !chrome_path.empty() || !perfetto_path.empty() || !chrome_dir.empty(); }
  // cluster: --slurm-job ID -o DIR [--nodes A,B] [--gather auto|shared|stream] [--agent PATH] [--clock-addr HOST]
  std::string slurm_job;
  std::vector<std::string> nodes;
  std::string gather = "auto";
  std::string agent_path;
  std::string clock_addr;
  std::vector<std::string> agent_args;  // the record options given, passed on to every agent
  // ...each one's name and the commands that take it (cluster checks that
  // the node's command, agent or watch, takes it).
  std::vector<std::pair<std::string, unsigned>> agent_arg_specs;
  // agent: --clock-server [HOST]:PORT, --stream, --shared-marker PATH, --wait SECS
  std::string clock_server;
  bool stream = false;
  std::string shared_marker;
  double wait_s = 10;
  // watch (docs/design-watch.md): the flight recorder's directory and
  // bounds, the metrics address, the triggers and captures.
  std::string watch_dir = "/var/lib/ltrace-bpf/watch";
  double keep_s = 600;
  std::uint64_t keep_bytes = 256ull << 20;
  std::string metrics_addr;  // [HOST]:PORT; "" = none
  std::string triggers = "slow-step,stall,memory,exit,request,straggler";
  double slow_factor = 2.0, slow_floor_s = 0.05;
  double stall_s = 60;       // a stall is at least this long (and stall_factor x the median step)
  double stall_factor = 10;  // --stall-factor
  unsigned straggler_last = 12, straggler_of = 16;  // --straggler-rule K/N
  double straggler_wait_s = 0.005;                  // --straggler-wait
  double memory_growth_pct = 50, memory_window_s = 600;
  long memory_warmup = 10;  // watch --memory-warmup N: train steps before memory growth counts
  std::uint64_t memory_floor_bytes = 256ull << 20;
  double capture_before_s = 60, capture_after_s = 10;
  unsigned capture_rate_hz = 99;  // watch: escalated stacks per second (0: the cheap rate)
  unsigned max_captures = 50, max_per_day = 20;
  bool capture_now = false;  // watch --capture-now: ask the running watcher for a capture
  bool dump_now = false;     // watch --dump-now: ask it for a dump of --pid PID
  std::string admin_group;   // watch: members may ask about any process (its socket)
  std::string upstream;      // watch --upstream [HOST]:PORT: cluster ... watch's node side (watch_uplink.h)
  bool help = false, version = false;
};

Options parse_options(int argc, char** argv);
std::string usage_text();

}  // namespace lt
