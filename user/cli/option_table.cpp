// Every option of ltrace-bpf, once: its names, the commands that take it,
// its --help text and how its value is checked and stored.  Table order is
// --help order.
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "reports/export/export_range.h"
#include "user/cli/cli_table.h"
#include "user/cli/report_registry.h"
#include "user/core/errors.h"
#include "user/watch/request_server.h"

namespace lt {
namespace {

using C = Options::Command;
constexpr CommandSet kEvery = command_bit(C::live) | command_bit(C::record) | command_bit(C::report) |
                              command_bit(C::run) | command_bit(C::agent) | command_bit(C::cluster) |
                              command_bit(C::ps) | command_bit(C::dump);
// Everything but ps and dump, which read processes and take a few options.
constexpr CommandSet kAll = kEvery & ~command_bit(C::ps) & ~command_bit(C::dump);
// The commands that attach (report reads a trace file instead).
constexpr CommandSet kAttaching = kAll & ~command_bit(C::report);
// The commands that print reports (record, agent and cluster only write traces).
constexpr CommandSet kReporting = command_bit(C::live) | command_bit(C::report) | command_bit(C::run);
// The commands given their targets (run launches its own, cluster finds every rank).
constexpr CommandSet kTargeted = command_bit(C::live) | command_bit(C::record) | command_bit(C::agent);
// watch takes its targets and a few attach options; its own below.
constexpr CommandSet kWatch = command_bit(C::watch);
// watch's own that `cluster --slurm-job N watch` passes on to every node's watcher.
constexpr CommandSet kWatchOwn = kWatch | command_bit(C::cluster);

constexpr const char* kClusterOnly = "--slurm-job, --nodes, --gather, --agent and --clock-addr apply to cluster";
constexpr const char* kAgentOnly =
    "--clock-server, --stream, --shared-marker, --dump-threads and --capture-via apply to agent";
constexpr const char* kMergeOnly = "--merge and --chrome-dir apply to report: ltrace-bpf report DIR --merge";

// Only what a person types as a number: strtol and strtod alone also take
// leading blanks and a '+' (" 7", "+5"), which no option means.
bool starts_like_a_number(const std::string& s) {
  const size_t i = !s.empty() && s[0] == '-' ? 1 : 0;
  return i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.');
}

long parse_long(const std::string& s, long lo, long hi, const std::string& error) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s.c_str(), &end, 10);
  if (!starts_like_a_number(s) || *end != '\0' || errno != 0 || v < lo || v > hi) throw Error(ExitCode::usage, error);
  return v;
}

// A number within [lo, hi]; the error names the option and what it wants.
double parse_number(const std::string& s, double lo, double hi, const std::string& option, const std::string& want) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (!starts_like_a_number(s) || *end != '\0' || errno != 0 || !std::isfinite(v) || v < lo || v > hi)
    throw Error(ExitCode::usage, "--" + option + ": invalid value '" + s + "': expected " + want);
  return v;
}

// The longest time any option takes (a year): past it a time is a typo, and
// a count of nanoseconds of it still fits 64 bits many times over.
constexpr double kMaxSeconds = 366.0 * 24 * 3600;

double parse_seconds(const std::string& s, const std::string& option) {
  const double v = parse_number(s, 0, kMaxSeconds, option, "seconds > 0, at most a year");
  if (v <= 0) throw Error(ExitCode::usage, "--" + option + ": invalid value '" + s + "': expected seconds > 0");
  return v;
}

// "90", "90s", "10m", "2h": seconds > 0, at most a year.
double parse_span(const std::string& s, const std::string& option) {
  double unit = 1;
  std::string n = s;
  if (!n.empty() && (n.back() == 's' || n.back() == 'm' || n.back() == 'h')) {
    unit = n.back() == 'h' ? 3600 : n.back() == 'm' ? 60 : 1;
    n.pop_back();
  }
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(n.c_str(), &end);
  if (!starts_like_a_number(n) || *end != '\0' || errno != 0 || !std::isfinite(v) || v <= 0 || v * unit > kMaxSeconds)
    throw Error(ExitCode::usage, "--" + option + ": invalid time '" + s +
                                     "': expected seconds, or a number with s, m or h (more than 0, at most a year)");
  return v * unit;
}

// "512K", "256M", "2G", "1048576": bytes > 0.
std::uint64_t parse_bytes(const std::string& s, const std::string& option) {
  std::uint64_t unit = 1;
  std::string n = s;
  if (!n.empty() && std::string("KMG").find(static_cast<char>(std::toupper(n.back()))) != std::string::npos) {
    const char c = static_cast<char>(std::toupper(n.back()));
    unit = c == 'G' ? 1ull << 30 : c == 'M' ? 1ull << 20 : 1ull << 10;
    n.pop_back();
  }
  const long v = parse_long(n, 1, 1L << 40,
                            "--" + option + ": invalid size '" + s + "': expected bytes, or a number with K, M or G");
  return static_cast<std::uint64_t>(v) * unit;
}

// "a,b,,c" -> a, b, c
std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::string rest = s + ",";
  for (auto at = rest.find(','); at != std::string::npos; rest.erase(0, at + 1), at = rest.find(','))
    if (at > 0) out.push_back(rest.substr(0, at));
  return out;
}

// Lightning's PyTorchProfiler.AVAILABLE_SORT_KEYS and its error text.
std::string parse_sort_key(const std::string& s) {
  static const char* const keys[] = {"cpu_time",
                                     "cuda_time",
                                     "cpu_time_total",
                                     "cuda_time_total",
                                     "cpu_memory_usage",
                                     "cuda_memory_usage",
                                     "self_cpu_memory_usage",
                                     "self_cuda_memory_usage",
                                     "count"};
  for (const char* k : keys)
    if (s == k) return s;
  std::string set;
  for (const char* k : keys) set += std::string(set.empty() ? "{'" : ", '") + k + "'";
  throw Error(ExitCode::usage, "Found sort_by_key: " + s + ". Should be within " + set + "}. ");
}

void store_report(Options& o, const std::string& v) {
  std::string rest = v + ",";
  for (auto at = rest.find(','); at != std::string::npos; rest.erase(0, at + 1), at = rest.find(',')) {
    std::string one = rest.substr(0, at);
    if (!is_report_name(one))
      throw Error(ExitCode::usage,
                  "unknown report '" + one + "' (available: " + report_names_text() + ", or several: simple,ops,gpu)");
  }
  o.report = v;
  o.report_given = true;
  if (o.verdict_given && (v + ",").find("verdict,") == std::string::npos) o.report += ",verdict";
}

// --verdict: `--report verdict`, or verdict added to the --report given
// (before or after it).
void store_verdict(Options& o) {
  o.verdict_given = true;
  if (!o.report_given)
    o.report = "verdict";
  else if ((o.report + ",").find("verdict,") == std::string::npos)
    o.report += ",verdict";
  o.report_given = true;
}

void store_job_env(Options& o, const std::string& kv) {
  auto eq = kv.find('=');
  if (eq == std::string::npos || eq == 0)
    throw Error(ExitCode::usage, "--job-env needs KEY=VALUE, e.g. SLURM_JOB_ID=4242 (got '" + kv + "')");
  o.job_env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  o.children = true;
}

void store_wait(Options& o, const std::string& w) {
  char* end = nullptr;
  o.wait_s = std::strtod(w.c_str(), &end);
  if (w.empty() || *end || !std::isfinite(o.wait_s) || o.wait_s < 0 || o.wait_s > 3600)
    throw Error(ExitCode::usage, "invalid --wait '" + w + "': expected seconds, 0 to 3600");
}

// A-B steps (--steps, --vs-steps) or START,END seconds (--window,
// --vs-window): the range, or one line.
ExportRange parse_range(const std::string& v, ExportRange::Kind kind, const std::string& flag) {
  const bool steps = kind == ExportRange::Kind::steps;
  const auto r = steps ? parse_step_range(v) : parse_time_window(v);
  if (!r)
    throw Error(ExitCode::usage, "invalid " + flag + " '" + v + "': expected " +
                                     (steps ? "A-B (training steps, 0 <= A <= B) or A"
                                            : "START,END in seconds after the attach, 0 <= START < END"));
  return *r;
}

void store_range(Options& o, const std::string& v, ExportRange::Kind kind) {
  const ExportRange r = parse_range(v, kind, kind == ExportRange::Kind::steps ? "--steps" : "--window");
  if (!o.export_range.all() && o.export_range.kind != kind)
    throw Error(ExitCode::usage, "--steps and --window exclude each other");
  o.export_range = r;
}
void store_steps(Options& o, const std::string& v) {
  store_range(o, v, ExportRange::Kind::steps);
}
void store_window(Options& o, const std::string& v) {
  store_range(o, v, ExportRange::Kind::window);
}

// diff's B part: --vs-steps or --vs-window, one of them.
void store_b_range(Options& o, const std::string& v, ExportRange::Kind kind) {
  const ExportRange r = parse_range(v, kind, kind == ExportRange::Kind::steps ? "--vs-steps" : "--vs-window");
  if (o.diff_b_range) throw Error(ExitCode::usage, "--vs-steps and --vs-window exclude each other");
  o.diff_b_range = r;
}

// clang-format off
const OptionSpec kOptions[] = {
  {.name = "output", .short_name = 'o', .arg = "FILE", .commands = kAttaching,
   .help = "write the trace file (record, agent: required; live: also keep it); cluster: the directory "
           "for the traces, one per node, and cluster-nodes.tsv; cluster ... capture: where each capture's trace "
           "comes back",
   .store = [](Options& o, const std::string& v) { o.output = v; }, .example = "x.ltrace"},
  {.name = "pid", .short_name = 'p', .arg = "PID", .commands = kTargeted | command_bit(C::dump) | kWatch,
   .help = "process to attach to (repeatable)",
   .store = [](Options& o, const std::string& v) {
     o.pids.push_back(static_cast<pid_t>(
         parse_long(v, 1, 4194304, "invalid pid '" + v + "': expected a positive number")));
   }, .example = "1"},
  {.name = "job-env", .arg = "KEY=VAL", .commands = kTargeted | command_bit(C::run) | kWatch,
   .help = "every process of a job on this machine, found by its environment (repeatable: all must match), "
           "e.g. SLURM_JOB_ID=4242 or TORCHELASTIC_RUN_ID=x; implies --children (the node agent's way to "
           "find its ranks)",
   .store = store_job_env, .example = "A=1"},
  {.name = "all", .commands = command_bit(C::live) | command_bit(C::record) | kWatch,
   .help = "every process on this host (containers included) with torch mapped, or CPython with Lightning "
           "on its PYTHONPATH or in its script's name, and every one that becomes so later (/proc polled "
           "every 500 ms); one report each; those that cannot be profiled are noted. The default without "
           "--pid and --job-env; implies --children.  Exit code 3 if none was found",
   .store = [](Options& o, const std::string&) { o.all = true; },
   .refusal = "--all applies to live attach and record"},
  {.name = "children", .short_name = 'c', .commands = kAttaching | command_bit(C::dump) | kWatch,
   .help = "also follow every descendant (torchrun ranks, DataLoader workers), including ones forked later",
   .store = [](Options& o, const std::string&) { o.children = true; }, .passed_on = true},
  {.name = "duration", .short_name = 'd', .arg = "SECS", .commands = kAttaching | kWatch,
   .help = "detach after SECS seconds; cluster ... dump: the time between each node's two reads (default 1); "
           "cluster ... capture: each capture holds SECS after the request, escalated (at most 600)",
   .store = [](Options& o, const std::string& v) { o.duration_s = parse_seconds(v, "duration"); }, .example = "2.5"},
  {.name = "report", .arg = "NAME", .commands = kAll,
   .help = "the reports to print: ",
   .help_from_table = report_help_text,
   .store = store_report, .example = "simple,ops", .passed_on = true},
  {.name = "verdict", .commands = kAll,
   .help = "the ranked findings (what is wrong, with its evidence and what to try): --report verdict, or verdict "
           "added to the reports --report names",
   .store = [](Options& o, const std::string&) { store_verdict(o); }, .passed_on = true},
  {.name = "why-step", .arg = "N", .commands = kAll,
   .help = "after the verdict, train step N taken apart in each process that ran it: its time against the median "
           "step, the part furthest over that part's median, and that part's longest action in it (the verdict "
           "beside the reports given or recorded; steps indexed from each process's first step seen, a watch capture's as the job numbers "
           "them)",
   .store = [](Options& o, const std::string& v) {
     o.why_step = parse_long(v, 0, 1L << 40, "invalid step '" + v + "': expected a train step's index, 0 to 1099511627776");
   }, .example = "30", .passed_on = true},
  {.name = "rate", .arg = "HZ", .commands = kAttaching | kWatch,
   .help = "stack samples per second and CPU (default 99; 1-10000)",
   .store = [](Options& o, const std::string& v) {
     o.rate_hz = static_cast<unsigned>(
         parse_long(v, 1, 10000, "invalid rate '" + v + "': expected samples per second, 1 to 10000"));
   }, .example = "499", .passed_on = true},
  {.name = "off-cpu", .commands = kAttaching,
   .help = "also record where threads block (sched_switch), per action and per stack: dataloader waits, "
           "GIL, CUDA sync",
   .store = [](Options& o, const std::string&) { o.off_cpu = true; }, .passed_on = true},
  {.name = "line-count-restriction", .arg = "R", .commands = kAll,
   .help = "advanced: rows per action (integer) or share of rows (<1)",
   .store = [](Options& o, const std::string& v) {
     auto r = parse_line_restriction(v);
     if (!r)
       throw Error(ExitCode::usage, "invalid line count restriction '" + v +
                                        "': expected a number of rows (20) or a share of them (0.5)");
     o.line_count_restriction = *r;
   }, .example = "0.5"},
  {.name = "dump-stats", .arg = "DIR", .commands = kReporting,
   .help = "AdvancedProfiler(dump_stats=True)'s files (usually with --report advanced), one "
           "DIR/{stage}[-NAME][-{local_rank}]-{action}.prof per action, for pstats and snakeviz, from the sampled "
           "stacks: tottime and cumtime are CPU-time estimates (samples x period), ncalls a lower bound (distinct "
           "call paths sampled); DIR/README.ltrace-bpf.txt says so",
   .store = [](Options& o, const std::string& v) {
     if (v.empty()) throw Error(ExitCode::usage, "--dump-stats needs a directory");
     o.dump_stats_dir = v;
   }, .example = "d"},
  {.name = "collapsed", .arg = "FILE", .commands = kAll,
   .help = "stacks as flamegraph.pl \"frame;frame count\" lines",
   .store = [](Options& o, const std::string& v) { o.collapsed_path = v; }, .example = "s.txt"},
  {.name = "flamegraph", .arg = "FILE", .commands = kAll,
   .help = "stacks as an SVG flame graph",
   .store = [](Options& o, const std::string& v) { o.flamegraph_path = v; }, .example = "s.svg"},
  {.name = "speedscope", .arg = "FILE", .commands = kAll,
   .help = "stacks for https://www.speedscope.app (one profile per action)",
   .store = [](Options& o, const std::string& v) { o.speedscope_path = v; }, .example = "s.json"},
  {.name = "full-stacks", .commands = kAll,
   .help = "whole stacks: by default a stack charged to an action starts below the frame that opened the "
           "action, as AdvancedProfiler's tables do (advanced, off-CPU, flame exports, --html)",
   .store = [](Options& o, const std::string&) { o.full_stacks = true; }},
  {.name = "sort-by", .arg = "KEY", .commands = kAll,
   .help = "ops: Lightning's sort_by_key (default cpu_time_total)",
   .store = [](Options& o, const std::string& v) { o.sort_by = parse_sort_key(v); }, .example = "count"},
  {.name = "row-limit", .arg = "N", .commands = kAll,
   .help = "ops: rows per table (default 20; -1: all)",
   .store = [](Options& o, const std::string& v) {
     o.row_limit = static_cast<int>(parse_long(
         v, -1, 1000000, "invalid row limit '" + v + "': expected a count of rows, or -1 for all"));
   }, .example = "-1"},
  {.name = "ops-layout", .arg = "LAYOUT", .commands = kAll,
   .help = "ops: steps (default): one table per step function; records: Lightning 2.x's shape, one "
           "\"Profile stats for: records\" table summed over every step (diffable with old PyTorchProfiler output)",
   .store = [](Options& o, const std::string& v) {
     if (v != "steps" && v != "records")
       throw Error(ExitCode::usage, "unknown --ops-layout '" + v + "' (available: steps, records)");
     o.ops_records = v == "records";
   }, .example = "records"},
  {.name = "ops", .arg = "LIST", .commands = kAttaching,
   .help = "trace only these aten ops: comma-separated globs, e.g. 'aten::mm,aten::add*' (implies --report ops)",
   .store = [](Options& o, const std::string& v) {
     o.op_filters = split_commas(v);
     if (o.op_filters.empty())
       throw Error(ExitCode::usage, "--ops needs at least one op name or glob, e.g. 'aten::mm,aten::add*'");
   }, .example = "aten::mm", .passed_on = true},
  {.name = "group-by-input-shapes", .commands = kAll,
   .help = "ops: one row per op and input shapes (records tensor shapes at each op entry: ~1 us more per op)",
   .store = [](Options& o, const std::string&) { o.group_by_input_shapes = true; }, .passed_on = true},
  {.name = "profile-memory", .commands = kAll,
   .help = "ops: torch.profiler's memory columns (CPU Mem, Self CPU Mem; CUDA Mem for CUDA jobs), exact bytes from "
           "entry probes on torch's allocator hooks (implies --report ops)",
   .store = [](Options& o, const std::string&) { o.profile_memory = true; }, .passed_on = true},
  {.name = "module-names", .commands = kAttaching,
   .help = "ops: Lightning's [pl][module] rows: exact calls of each named submodule of the LightningModule, "
           "sampled time (an entry probe on CPython's eval loop: fires on every Python call made from C; implies "
           "--report ops)",
   .store = [](Options& o, const std::string&) { o.module_names = true; }, .passed_on = true},
  {.name = "memory-bytes", .commands = kAll,
   .help = "ops: the memory columns in exact bytes instead of torch's rounded KB/MB/GB (for scripts)",
   .store = [](Options& o, const std::string&) { o.memory_bytes = true; }, .passed_on = true},
  {.name = "schedule", .commands = kAll,
   .help = "ops: only the steps Lightning's default schedule records (wait 1, warmup 1, active 3, per stage)",
   .store = [](Options& o, const std::string&) { o.schedule = true; }},
  {.name = "no-gpu", .commands = kAll,
   .help = "no GPU records (by default a CUDA target gets CUPTI kernels/copies/API calls through the bridge "
           "library)",
   .store = [](Options& o, const std::string&) { o.gpu = false; }, .passed_on = true},
  {.name = "no-inject", .commands = kAll | kWatch,
   .help = "never load the bridge into a running process with ptrace (GPU launches are then counted by "
           "uprobes only; watch: no ops after a trigger)",
   .store = [](Options& o, const std::string&) { o.inject = false; }, .passed_on = true},
  {.name = "launch-stacks", .commands = kAll,
   .help = "the Python stack of every kernel launch: GPU time by launching stack in --collapsed/--flamegraph "
           "(.gpu sibling files) and --speedscope",
   .store = [](Options& o, const std::string&) { o.launch_stacks = true; }, .passed_on = true},
  {.name = "device-stats", .commands = kAll,
   .help = "GPU (NVML) and process CPU/memory samples per action, with DeviceStatsMonitor's key names; with "
           "CUDA allocator records (--report memory or --profile-memory), the torch.cuda.memory_stats() keys they "
           "determine",
   .store = [](Options& o, const std::string&) { o.device_stats = true; }, .passed_on = true},
  {.name = "no-extended", .commands = kAll,
   .help = "SimpleProfiler(extended=False) layout",
   .store = [](Options& o, const std::string&) { o.extended = false; }},
  {.name = "dirpath", .arg = "DIR", .commands = kAll,
   .help = "with --filename: write Lightning's report files, DIR/{stage}-NAME[-{local_rank}].txt (appended)",
   .store = [](Options& o, const std::string& v) { o.dirpath = v; }, .example = "d", .needs = "filename"},
  {.name = "filename", .arg = "NAME", .commands = kAll,
   .help = "with --dirpath: the NAME of Lightning's report files",
   .store = [](Options& o, const std::string& v) { o.filename = v; }, .example = "f", .needs = "dirpath"},
  {.name = "verbose", .short_name = 'v', .commands = kEvery | kWatch | command_bit(C::diff),
   .help = "attach details and notes on stderr (ps: what was skipped and why)",
   .store = [](Options& o, const std::string&) { o.verbose = true; }, .passed_on = true},
  {.name = "dump", .arg = "FILE", .commands = kAll,
   .help = "write every recorded event as one text line (-: stdout)",
   .store = [](Options& o, const std::string& v) { o.dump_path = v; }, .example = "d.txt"},
  {.name = "chrome", .arg = "FILE", .commands = kAll,
   .help = "Chrome/Perfetto trace (kineto conventions; loads in HTA)",
   .store = [](Options& o, const std::string& v) { o.chrome_path = v; }, .example = "t.json"},
  {.name = "perfetto", .arg = "FILE", .commands = kAll,
   .help = "Perfetto's protobuf trace (the --chrome content: actions, ops, GPU work, memory as counters; smaller, "
           "for ui.perfetto.dev and trace_processor)",
   .store = [](Options& o, const std::string& v) { o.perfetto_path = v; }, .example = "t.pftrace"},
  {.name = "steps", .arg = "A-B", .commands = kAll | command_bit(C::diff),
   .help = "the trace exports (--chrome, --perfetto, --chrome-dir) keep only training steps A to B (or step A), "
           "indexed from each process's first step seen (a watch capture's as the job numbers them): the events "
           "overlapping them, whole (an enclosing epoch "
           "too); the text reports and --html still cover the whole attach. diff: compare only what lies within "
           "those steps (A's, and B's unless --vs-steps or --vs-window)",
   .store = store_steps, .example = "2-4", .needs = "chrome|perfetto|chrome-dir", .stands_alone = command_bit(C::diff)},
  {.name = "window", .arg = "START,END", .commands = kAll | command_bit(C::diff),
   .help = "the trace exports keep only the events overlapping START to END seconds after the attach (whole, "
           "not clipped), e.g. 10,20; the text reports and --html still cover the whole attach. diff: compare "
           "only what lies within it (A's, and B's unless --vs-steps or --vs-window)",
   .store = store_window, .example = "1,2.5", .needs = "chrome|perfetto|chrome-dir", .stands_alone = command_bit(C::diff)},
  {.name = "html", .arg = "FILE", .commands = kAll | command_bit(C::diff),
   .help = "one self-contained HTML page: tables and a timeline. diff: the table and a differential flame graph "
           "of the train steps' Python stacks (red: B slower, blue: faster)",
   .store = [](Options& o, const std::string& v) { o.html_path = v; }, .example = "t.html"},
  {.name = "merge", .commands = command_bit(C::report),
   .help = "report DIR: the trace files under DIR (one per node) are one job: per-rank reports, a cluster "
           "summary (time per action per rank, slowest rank, step skew, straggler), and --chrome as one "
           "trace on a common clock",
   .store = [](Options& o, const std::string&) { o.merge = true; }, .refusal = kMergeOnly},
  {.name = "chrome-dir", .arg = "DIR", .commands = command_bit(C::report),
   .help = "with --merge: rank-<N>.json per rank (HTA's input)",
   .store = [](Options& o, const std::string& v) { o.chrome_dir = v; }, .example = "c",
   .refusal = kMergeOnly, .needs = "merge"},
  {.name = "slurm-job", .arg = "ID", .commands = command_bit(C::cluster),
   .help = "the running Slurm job (required)",
   .store = [](Options& o, const std::string& v) { o.slurm_job = v; }, .example = "4",
   .refusal = kClusterOnly,
   .heading = "cluster (on a login node; one agent per node, started by srun inside the job's allocation, "
              "records every rank of the job there; -o DIR takes the traces):"},
  {.name = "nodes", .arg = "A,B", .commands = command_bit(C::cluster),
   .help = "only these nodes of the job",
   .store = [](Options& o, const std::string& v) {
     o.nodes = split_commas(v);
     if (o.nodes.empty()) throw Error(ExitCode::usage, "--nodes needs node names, e.g. node1,node2");
   }, .example = "a,b", .refusal = kClusterOnly},
  {.name = "gather", .arg = "MODE", .commands = command_bit(C::cluster),
   .help = "auto (default): the agents write into DIR when their node sees it (a shared file system), else "
           "send their trace back through srun; shared; stream",
   .store = [](Options& o, const std::string& v) {
     if (v != "auto" && v != "shared" && v != "stream")
       throw Error(ExitCode::usage, "--gather takes auto, shared or stream (got '" + v + "')");
     o.gather = v;
   }, .example = "stream", .refusal = kClusterOnly},
  {.name = "agent", .arg = "PATH", .commands = command_bit(C::cluster),
   .help = "ltrace-bpf on the nodes (default: this one's path)",
   .store = [](Options& o, const std::string& v) { o.agent_path = v; }, .example = "/x/ltrace-bpf",
   .refusal = kClusterOnly},
  {.name = "clock-addr", .arg = "HOST", .commands = command_bit(C::cluster),
   .help = "the address the nodes reach this host at (default: SLURM_LAUNCH_NODE_IPADDR, which srun gives them)",
   .store = [](Options& o, const std::string& v) { o.clock_addr = v; }, .example = "10.0.0.1",
   .refusal = kClusterOnly},
  {.name = "wait", .arg = "SECS", .commands = command_bit(C::cluster) | command_bit(C::agent),
   .help = "cluster, agent: how long each agent waits for its node's ranks (default 10)",
   .store = store_wait, .example = "2", .refusal = "--wait applies to cluster and agent"},
  {.name = "clock-server", .arg = "[HOST]:PORT", .commands = command_bit(C::agent),
   .help = "measure this host's wall clock against the coordinator's, at attach and at detach (UDP)",
   .store = [](Options& o, const std::string& v) { o.clock_server = v; }, .example = ":9",
   .refusal = kAgentOnly,
   .heading = "agent (what cluster runs on each node; also for a DaemonSet):"},
  {.name = "stream", .commands = command_bit(C::agent),
   .help = "send the trace back on stdout (base64), not to -o; with --capture-via, each capture's trace once its "
           "watcher has written it",
   .store = [](Options& o, const std::string&) { o.stream = true; }, .refusal = kAgentOnly},
  {.name = "shared-marker", .arg = "F", .commands = command_bit(C::agent),
   .help = "stream unless file F is visible here",
   .store = [](Options& o, const std::string& v) { o.shared_marker = v; }, .example = "m",
   .refusal = kAgentOnly},
  {.name = "capture-via", .arg = "DIR", .commands = command_bit(C::agent),
   .help = "ask the node's watcher on DIR (DIR/NODE/watch.sock, else DIR/watch.sock) for a capture of each rank "
           "here (cluster ... capture), instead of recording",
   .store = [](Options& o, const std::string& v) { o.agent_capture_via = v; }, .example = "/tmp/w",
   .refusal = kAgentOnly},
  {.name = "dump-threads", .commands = command_bit(C::agent),
   .help = "dump the node's ranks twice, --duration apart, as status lines (cluster ... dump), instead of recording",
   .store = [](Options& o, const std::string&) { o.agent_dump = true; }, .refusal = kAgentOnly},
  {.name = "json", .commands = command_bit(C::dump) | command_bit(C::cluster),
   .help = "dump, cluster ... dump: one JSON document (every process, thread, frame; the verdict) instead of text",
   .store = [](Options& o, const std::string&) { o.json = true; }},
  {.name = "dir", .arg = "DIR", .commands = kWatchOwn,
   .help = "watch: the flight recorder (DIR/ring) and the captures (DIR/captures); default /var/lib/ltrace-bpf/watch "
           "(cluster ... watch: DIR/NODE on each node)",
   .store = [](Options& o, const std::string& v) { o.watch_dir = v; }, .example = "/tmp/w", .heading = "watch:"},
  {.name = "keep", .arg = "TIME", .commands = kWatchOwn,
   .help = "the time the flight recorder keeps (default 10m; 90s, 10m, 2h)",
   .store = [](Options& o, const std::string& v) { o.keep_s = parse_span(v, "keep"); }, .example = "10m", .passed_on = true},
  {.name = "keep-bytes", .arg = "SIZE", .commands = kWatchOwn,
   .help = "the disk the flight recorder's segments may use (default 256M; oldest segments dropped whole)",
   .store = [](Options& o, const std::string& v) { o.keep_bytes = parse_bytes(v, "keep-bytes"); }, .example = "64M", .passed_on = true},
  {.name = "metrics", .arg = "[HOST]:PORT", .commands = kWatchOwn,
   .help = "serve Prometheus metrics at http://HOST:PORT/metrics (steps, step time, progress, triggers, ring)",
   .store = [](Options& o, const std::string& v) { o.metrics_addr = v; }, .example = "127.0.0.1:9464", .passed_on = true},
  {.name = "triggers", .arg = "LIST", .commands = kWatchOwn,
   .help = "the triggers on (default slow-step,stall,memory,exit,request,straggler; 'none' for the recorder "
           "alone); straggler: one rank last to arrive at 12 or more of the last 16 collectives every rank made, "
           "keeping the others waiting 5 ms or more",
   .store = [](Options& o, const std::string& v) {
     const auto names = split_commas(v);
     if (names.empty()) throw Error(ExitCode::usage, "--triggers: no trigger named ('none' for the recorder alone)");
     for (const auto& t : names) {
       if (t != "slow-step" && t != "stall" && t != "memory" && t != "exit" && t != "request" && t != "straggler" &&
           t != "none")
         throw Error(ExitCode::usage, "--triggers: unknown trigger '" + t +
                                          "' (slow-step, stall, memory, exit, request, straggler, none)");
       if (t == "none" && names.size() > 1)
         throw Error(ExitCode::usage, "--triggers: 'none' stands alone (got '" + v + "')");
     }
     o.triggers = v;
   }, .example = "slow-step,exit", .passed_on = true},
  {.name = "slow-step", .arg = "K", .commands = kWatchOwn,
   .help = "a train step is slow past K x the rolling median of the process's last 100 steps (default 2)",
   .store = [](Options& o, const std::string& v) {
     o.slow_factor = parse_number(v, 0, 1e6, "slow-step", "a factor more than 1");
     if (o.slow_factor <= 1) throw Error(ExitCode::usage, "--slow-step: K must be more than 1 (got " + v + ")");
   }, .example = "3", .passed_on = true},
  {.name = "slow-floor", .arg = "SECS", .commands = kWatchOwn,
   .help = "...and only when longer than the median by SECS at least (default 0.05)",
   .store = [](Options& o, const std::string& v) { o.slow_floor_s = parse_number(v, 0, kMaxSeconds, "slow-floor", "seconds, 0 or more"); }, .example = "0.1", .passed_on = true},
  {.name = "stall", .arg = "TIME", .commands = kWatchOwn,
   .help = "a stall: no Lightning action of a live process ends for max(10 x its median step, TIME) (default 60s)",
   .store = [](Options& o, const std::string& v) { o.stall_s = parse_span(v, "stall"); }, .example = "60s", .passed_on = true},
  {.name = "stall-factor", .arg = "K", .commands = kWatchOwn,
   .help = "...the K of that: a stall is no action ending for K x the median step (default 10), or --stall if longer",
   .store = [](Options& o, const std::string& v) {
     o.stall_factor = parse_number(v, 1, 1e6, "stall-factor", "a factor of 1 or more");
   }, .example = "20", .passed_on = true},
  {.name = "straggler-rule", .arg = "K/N", .commands = kWatchOwn,
   .help = "straggler: one rank last to arrive at K or more of the last N collectives that kept the others waiting "
           "(default 12/16)",
   .store = [](Options& o, const std::string& v) {
     const auto slash = v.find('/');
     const std::string bad = "--straggler-rule: invalid value '" + v + "': expected K/N, 1 <= K <= N <= 128";
     if (slash == std::string::npos) throw Error(ExitCode::usage, bad);
     o.straggler_last = static_cast<unsigned>(parse_long(v.substr(0, slash), 1, 128, bad));
     o.straggler_of = static_cast<unsigned>(parse_long(v.substr(slash + 1), 1, 128, bad));
     if (o.straggler_last > o.straggler_of) throw Error(ExitCode::usage, bad);
   }, .example = "6/8", .passed_on = true},
  {.name = "straggler-wait", .arg = "SECS", .commands = kWatchOwn,
   .help = "...keeping them waiting SECS or more each (default 0.005; and a tenth of the slowest rank's median step)",
   .store = [](Options& o, const std::string& v) {
     o.straggler_wait_s = parse_number(v, 0, kMaxSeconds, "straggler-wait", "seconds, 0 or more");
   }, .example = "0.02", .passed_on = true},
  {.name = "memory-growth", .arg = "PCT", .commands = kWatchOwn,
   .help = "memory: a process's resident memory grew by PCT % over its lowest in --memory-window (default 50)...",
   .store = [](Options& o, const std::string& v) { o.memory_growth_pct = parse_number(v, 0, 1e6, "memory-growth", "a percentage more than 0");
     if (o.memory_growth_pct <= 0)
       throw Error(ExitCode::usage, "--memory-growth: invalid value '" + v + "': expected a percentage more than 0"); }, .example = "25", .passed_on = true},
  {.name = "memory-floor", .arg = "SIZE", .commands = kWatchOwn,
   .help = "...and by SIZE at least (default 256M)",
   .store = [](Options& o, const std::string& v) { o.memory_floor_bytes = parse_bytes(v, "memory-floor"); },
   .example = "64M", .passed_on = true},
  {.name = "memory-window", .arg = "TIME", .commands = kWatchOwn,
   .help = "...within TIME (default 10m); then it is measured from there again",
   .store = [](Options& o, const std::string& v) { o.memory_window_s = parse_span(v, "memory-window"); },
   .example = "5m", .passed_on = true},
  {.name = "memory-warmup", .arg = "N", .commands = kWatchOwn,
   .help = "...counted from a process's Nth train step (default 10: imports, the model and the first steps "
           "grow a job by hundreds of MiB), or 5 minutes after it was first seen where it has no train step",
   .store = [](Options& o, const std::string& v) {
     o.memory_warmup = parse_long(v, 0, 1'000'000, "invalid --memory-warmup '" + v + "': expected a number of train "
                                                   "steps, 0 to 1000000");
   }, .example = "3", .passed_on = true},
  {.name = "capture-before", .arg = "TIME", .commands = kWatchOwn,
   .help = "a capture keeps this much of the recorder before its trigger (default 60s)",
   .store = [](Options& o, const std::string& v) { o.capture_before_s = parse_span(v, "capture-before"); },
   .example = "30s", .passed_on = true},
  {.name = "capture-after", .arg = "TIME", .commands = kWatchOwn,
   .help = "...and this much after it (default 10s); written within a tick of that window's end",
   .store = [](Options& o, const std::string& v) {
     o.capture_after_s = parse_span(v, "capture-after");
     // The escalation (ops, full-rate stacks) lasts the after-window: bounded,
     // as a request's own is (an audit's 1h was taken).
     if (o.capture_after_s > RequestServer::kMaxCaptureAfterS)
       throw Error(ExitCode::usage, "--capture-after: invalid time '" + v + "': at most " +
                                        std::to_string(static_cast<int>(RequestServer::kMaxCaptureAfterS)) +
                                        " s (the process is escalated for that long)");
   }, .example = "5s", .passed_on = true},
  {.name = "capture-rate", .arg = "HZ", .commands = kWatchOwn,
   .help = "an escalated process's stack samples per second, in a capture's after-window (default 99; "
           "the --rate of the cheap tier, 19, is rounded to a whole fraction of it)",
   .store = [](Options& o, const std::string& v) {
     o.capture_rate_hz = static_cast<unsigned>(parse_long(v, 0, 10000, "--capture-rate: expected 0..10000"));
   }, .example = "999", .passed_on = true},
  {.name = "max-captures", .arg = "N", .commands = kWatchOwn,
   .help = "captures kept in DIR/captures (default 50): the oldest are removed, and said",
   .store = [](Options& o, const std::string& v) {
     o.max_captures = static_cast<unsigned>(parse_long(v, 1, 100000, "--max-captures: expected 1..100000"));
   }, .example = "10", .passed_on = true},
  {.name = "max-per-day", .arg = "N", .commands = kWatchOwn,
   .help = "each trigger fires at most N times in any 24 hours (default 20); the rest are counted",
   .store = [](Options& o, const std::string& v) {
     o.max_per_day = static_cast<unsigned>(parse_long(v, 1, 100000, "--max-per-day: expected 1..100000"));
   }, .example = "5", .passed_on = true},
  {.name = "capture-now", .commands = kWatch,
   .help = "ask the watcher running on --dir for a capture now (of --pid PID, else of every process; with "
           "--duration SECS, holding SECS after now, escalated, at most 600); any user may, of their own "
           "processes (through DIR/watch.sock)",
   .store = [](Options& o, const std::string&) { o.capture_now = true; }},
  {.name = "dump-now", .commands = kWatch,
   .help = "ask the watcher running on --dir for a dump of --pid PID (every thread's stack, as `dump` prints "
           "it); any user may, of their own processes",
   .store = [](Options& o, const std::string&) { o.dump_now = true; }},
  {.name = "admin-group", .arg = "GROUP", .commands = kWatchOwn,
   .help = "watch: members of GROUP may ask the watcher's socket about any process (else each user about "
           "their own; root about all)",
   .store = [](Options& o, const std::string& v) { o.admin_group = v; }, .example = "wheel", .passed_on = true},
  {.name = "upstream", .arg = "[HOST]:PORT", .commands = kWatch,
   .help = "what cluster ... watch gives each node's watcher: its ranks' collective arrivals go to the coordinator "
           "(stdout, on the wall clock of HOST:PORT's clock server), which runs the straggler rule over every "
           "node's ranks and asks for captures on stdin",
   .store = [](Options& o, const std::string& v) { o.upstream = v; }, .example = ":9"},
  {.name = "vs", .arg = "B", .commands = command_bit(C::diff),
   .help = "diff: the traces before --vs are A's runs, B and those after it B's (several runs a side: the test is "
           "over runs, so that what differs between two runs of one job is in it)",
   .store = [](Options& o, const std::string& v) {
     o.diff_vs = true;
     o.diff_b.push_back(v);
   }, .example = "b.ltrace", .heading = "diff:"},
  {.name = "vs-steps", .arg = "A-B", .commands = command_bit(C::diff),
   .help = "diff: B is training steps A to B (with one trace: of that same trace, so that two parts of one run "
           "are compared; e.g. diff t.ltrace --steps 0-49 --vs-steps 50-99)",
   .store = [](Options& o, const std::string& v) { store_b_range(o, v, ExportRange::Kind::steps); }, .example = "5-9"},
  {.name = "vs-window", .arg = "START,END", .commands = command_bit(C::diff),
   .help = "diff: B is what lies within START to END seconds after the attach (with one trace: of that same trace)",
   .store = [](Options& o, const std::string& v) { store_b_range(o, v, ExportRange::Kind::window); },
   .example = "2.5,4"},
  {.name = "rank", .arg = "N", .commands = command_bit(C::diff),
   .help = "diff: only rank N's processes (A's, and B's unless --vs-rank), e.g. two ranks of one job: diff "
           "node-a.ltrace node-b.ltrace --rank 0 --vs-rank 3 (with A's files standing for B's when --vs is not given)",
   .store = [](Options& o, const std::string& v) {
     o.diff_rank = static_cast<int>(parse_long(v, 0, 1 << 24, "--rank: expected a rank, 0 or more"));
   }, .example = "0"},
  {.name = "vs-rank", .arg = "N", .commands = command_bit(C::diff),
   .help = "diff: B is rank N's processes (of B's traces; without --vs, of the same traces as A)",
   .store = [](Options& o, const std::string& v) {
     o.diff_b_rank = static_cast<int>(parse_long(v, 0, 1 << 24, "--vs-rank: expected a rank, 0 or more"));
   }, .example = "1"},
  {.name = "fail-if-slower", .arg = "PCT", .commands = command_bit(C::diff),
   .help = "diff: exit 17 when B's train step is significantly slower than A's (Holm-corrected p < 0.05) by "
           "PCT % of A's median step or more (for regression checks in CI)",
   .store = [](Options& o, const std::string& v) {
     o.fail_if_slower_pct = parse_number(v, 0, 1e6, "fail-if-slower", "a percentage, 0 or more");
   }, .example = "2"},
  {.name = "any-job", .commands = command_bit(C::diff),
   .help = "diff: compare recordings of different jobs (by default refused, exit 19: A and B share no script "
           "name, nor a LightningModule class where both have one)",
   .store = [](Options& o, const std::string&) { o.diff_any_job = true; }},
  {.name = "help", .short_name = 'h', .commands = kEvery | kWatch | command_bit(C::diff),
   .help = "this text",
   .store = [](Options& o, const std::string&) { o.help = true; }, .heading = "help:"},
  {.name = "version", .short_name = 'V', .commands = kEvery | kWatch | command_bit(C::diff),
   .help = "version",
   .store = [](Options& o, const std::string&) { o.version = true; }},
};
// clang-format on

}  // namespace

std::span<const OptionSpec> option_table() {
  return kOptions;
}

}  // namespace lt
