#include "user/cli/options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "user/core/errors.h"

namespace lt {

std::string usage_text() {
  return R"(usage: ltrace-bpf --pid PID [--pid PID ...] [options]     attach, print reports
       ltrace-bpf [--all] [options]                           every torch/Lightning process, now and later
       ltrace-bpf ps [-v]                                     list the torch/Lightning processes here
       ltrace-bpf record --pid PID ... -o FILE [options]      attach, write a trace file
       ltrace-bpf report FILE|- [report options]              reports from a trace file (- : stdin)
       ltrace-bpf report DIR --merge [--chrome F] [--chrome-dir D]  one job from many traces
       ltrace-bpf run [options] -- COMMAND [ARGS...]          launch COMMAND under ltrace-bpf
       ltrace-bpf cluster --slurm-job ID -o DIR [options]     every rank of a running Slurm job
       ltrace-bpf agent --job-env K=V ... -o FILE [options]   one node's recorder (cluster starts it)

Attach to running PyTorch Lightning jobs from outside (eBPF) and print the
report Lightning's SimpleProfiler would have printed for the attach window.
The target needs no restart and no code change; stop with Ctrl-C, SIGTERM,
--duration, or when every target has exited.  `record` keeps everything in a
trace file instead; `report` (no root or BPF needed) prints the same reports
from it later, on any machine.  `run` starts COMMAND itself, with the GPU
bridge preloaded (CUDA_INJECTION64_PATH, NVTX_INJECTION64_PATH: CUPTI and
NVTX from the first call) and every descendant followed.

options:
  -o, --output FILE     write the trace file (record: required; live: also keep it)
  -p, --pid PID         process to attach to (repeatable)
      --job-env KEY=VAL every process of a job on this machine, found by its
                        environment (repeatable: all must match), e.g.
                        SLURM_JOB_ID=4242 or TORCHELASTIC_RUN_ID=x; implies
                        --children (the node agent's way to find its ranks)
      --all             every process on this host (containers included) with
                        torch mapped, or CPython with Lightning on its
                        PYTHONPATH or in its script's name, and every one that
                        becomes so later (/proc polled every 500 ms); one
                        report each; those that cannot be profiled are noted.
                        The default without --pid and --job-env; implies
                        --children.  Exit code 3 if none was found
  -c, --children        also follow every descendant (torchrun ranks,
                        DataLoader workers), including ones forked later
  -d, --duration SECS   detach after SECS seconds
      --report NAME     simple (default): SimpleProfiler's table per action;
                        advanced: where each action's time went, by Python
                        function (AdvancedProfiler's layout, from sampled stacks);
                        ops: PyTorchProfiler's operator table (aten ops:
                        exact calls, sampled CPU times) per step function;
                        gpu: kernel, copy, CUDA API and NVTX summaries
                        (nsys stats layout) and GPU time per action; shown
                        by default when the targets used CUDA;
                        several at once: simple,advanced,ops,gpu
      --rate HZ         stack samples per second and CPU (default 99; 1-10000)
      --off-cpu         also record where threads block (sched_switch), per
                        action and per stack: dataloader waits, GIL, CUDA sync
      --line-count-restriction R
                        advanced: rows per action (integer) or share of rows (<1)
      --collapsed FILE  stacks as flamegraph.pl "frame;frame count" lines
      --flamegraph FILE stacks as an SVG flame graph
      --speedscope FILE stacks for https://www.speedscope.app (one profile per action)
      --full-stacks     whole stacks: by default a stack charged to an action
                        starts below the frame that opened the action, as
                        AdvancedProfiler's tables do (advanced, off-CPU, flame
                        exports, --html)
      --sort-by KEY     ops: Lightning's sort_by_key (default cpu_time_total)
      --row-limit N     ops: rows per table (default 20; -1: all)
      --ops LIST        trace only these aten ops: comma-separated globs,
                        e.g. 'aten::mm,aten::add*' (implies --report ops)
      --group-by-input-shapes
                        ops: one row per op and input shapes (records
                        tensor shapes at each op entry: ~1 us more per op)
      --schedule        ops: only the steps Lightning's default schedule
                        records (wait 1, warmup 1, active 3, per stage)
      --no-gpu          no GPU records (by default a CUDA target gets CUPTI
                        kernels/copies/API calls through the bridge library)
      --no-inject       never load the bridge into a running process with
                        ptrace (GPU launches are then counted by uprobes only)
      --launch-stacks   the Python stack of every kernel launch: GPU time by
                        launching stack in --collapsed/--flamegraph (.gpu
                        sibling files) and --speedscope
      --device-stats    GPU (NVML) and process CPU/memory samples per action,
                        with DeviceStatsMonitor's key names
      --no-extended     SimpleProfiler(extended=False) layout
      --dirpath DIR     with --filename: write Lightning's report files,
      --filename NAME     DIR/{stage}-NAME[-{local_rank}].txt (appended)
  -v, --verbose         attach details and notes on stderr
      --dump FILE       write every recorded event as one text line
      --chrome FILE     Chrome/Perfetto trace (kineto conventions; loads in HTA)
      --merge           report DIR: the trace files under DIR (one per node)
                        are one job: per-rank reports, a cluster summary
                        (time per action per rank, slowest rank, step skew,
                        straggler), and --chrome as one trace on a common clock
      --chrome-dir DIR  with --merge: rank-<N>.json per rank (HTA's input)
      --html FILE       one self-contained HTML page: tables and a timeline
cluster (on a login node; agents start through `srun --jobid=ID --overlap`,
one per node, and record every rank of the job there):
      --slurm-job ID    the running Slurm job (required)
  -o DIR                the traces, one per node, and cluster-nodes.tsv
      --nodes A,B       only these nodes of the job
      --gather MODE     auto (default): the agents write into DIR when their
                        node sees it (a shared file system), else send their
                        trace back through srun; shared; stream
      --agent PATH      ltrace-bpf on the nodes (default: this one's path)
      --wait SECS       how long each agent waits for its node's ranks (10)
      --clock-addr HOST the address the nodes reach this host at (default:
                        SLURM_LAUNCH_NODE_IPADDR, which srun gives them)
                        and record options (--duration, --rate, --off-cpu,
                        --ops, --no-gpu, ...), passed on to every agent
agent (what cluster runs on each node; also for a DaemonSet):
      --clock-server [HOST]:PORT  measure this host's wall clock against
                        the coordinator's, at attach and at detach (UDP)
      --wait SECS       wait this long for the job's processes (default 10)
      --stream          send the trace back on stdout (base64), not to -o
      --shared-marker F stream unless file F is visible here
  -h, --help            this text
  -V, --version         version

exit codes:
  0 ok   1 internal error   2 usage   3 no such process, or it exited during attach (--all: none found)
  4 not a CPython process   5 unsupported CPython version or build
  6 missing privileges (CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE)
  7 BPF load/attach failed   8 cannot read or write a file   9 not a trace file (or from a newer version)
  10 run: the command could not be started
  11 cluster: some nodes gave no trace (the others' are kept)   12 cluster: Slurm not available
  13 report: parts of the trace file were damaged and skipped (the rest is reported)
)";
}

namespace {

pid_t parse_pid(const std::string& s) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0 || v <= 0 || v > 4194304)
    throw Error(ExitCode::usage, "invalid pid '" + s + "': expected a positive number");
  return static_cast<pid_t>(v);
}

double parse_seconds(const std::string& s) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || errno != 0 || !std::isfinite(v) || v <= 0)
    throw Error(ExitCode::usage, "invalid duration '" + s + "': expected seconds > 0");
  return v;
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

int parse_row_limit(const std::string& s) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0 || v < -1 || v > 1000000)
    throw Error(ExitCode::usage, "invalid row limit '" + s + "': expected a count of rows, or -1 for all");
  return static_cast<int>(v);
}

std::vector<std::string> parse_op_filters(const std::string& s) {
  std::vector<std::string> out;
  std::string rest = s + ",";
  for (auto at = rest.find(','); at != std::string::npos; rest.erase(0, at + 1), at = rest.find(','))
    if (at > 0) out.push_back(rest.substr(0, at));
  if (out.empty()) throw Error(ExitCode::usage, "--ops needs at least one op name or glob, e.g. 'aten::mm,aten::add*'");
  return out;
}

unsigned parse_rate(const std::string& s) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0 || v < 1 || v > 10000)
    throw Error(ExitCode::usage, "invalid rate '" + s + "': expected samples per second, 1 to 10000");
  return static_cast<unsigned>(v);
}

LineRestriction parse_restriction(const std::string& s) {
  auto r = parse_line_restriction(s);
  if (!r)
    throw Error(ExitCode::usage,
                "invalid line count restriction '" + s + "': expected a number of rows (20) or a share of them (0.5)");
  return *r;
}

}  // namespace

Options parse_options(int argc, char** argv) {
  Options o;
  auto value = [&](int& i, const std::string& flag) -> std::string {
    if (i + 1 >= argc) throw Error(ExitCode::usage, "option " + flag + " needs a value");
    return argv[++i];
  };
  int first = 1;
  if (argc > 1 && std::string(argv[1]) == "record") {
    o.command = Options::Command::record;
    first = 2;
  } else if (argc > 1 && std::string(argv[1]) == "report") {
    o.command = Options::Command::report;
    first = 2;
  } else if (argc > 1 && std::string(argv[1]) == "agent") {
    o.command = Options::Command::agent;
    first = 2;
  } else if (argc > 1 && std::string(argv[1]) == "cluster") {
    o.command = Options::Command::cluster;
    first = 2;
  } else if (argc > 1 && std::string(argv[1]) == "ps") {
    o.command = Options::Command::ps;
    first = 2;
  } else if (argc > 1 && std::string(argv[1]) == "run") {
    o.command = Options::Command::run;
    o.children = true;
    first = 2;
  }
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (o.command == Options::Command::run && a == "--") {
      o.run_argv.assign(argv + i + 1, argv + argc);
      break;
    }
    // "-" is standard input.
    if (o.command == Options::Command::report && !a.empty() && (a[0] != '-' || a == "-") && o.input.empty()) {
      o.input = a;
      continue;
    }
    std::string inline_value;
    bool has_inline = false;
    if (a.rfind("--", 0) == 0) {
      if (auto eq = a.find('='); eq != std::string::npos) {
        inline_value = a.substr(eq + 1);
        a = a.substr(0, eq);
        has_inline = true;
      }
    }
    auto arg = [&]() { return has_inline ? inline_value : value(i, a); };
    // cluster: the record options go on to every agent as given.
    static const char* const passed_on[] = {"--rate",
                                            "--off-cpu",
                                            "--ops",
                                            "--group-by-input-shapes",
                                            "--no-gpu",
                                            "--no-inject",
                                            "--launch-stacks",
                                            "--device-stats",
                                            "-v",
                                            "--verbose",
                                            "-c",
                                            "--children"};
    static const char* const with_value[] = {"--rate", "--ops"};
    if (o.command == Options::Command::cluster)
      for (const char* f : passed_on)
        if (a == f) {
          o.agent_args.push_back(a);
          for (const char* w : with_value)
            if (a == w && !has_inline && i + 1 < argc) o.agent_args.push_back(argv[i + 1]);
          if (has_inline) o.agent_args.back() += "=" + inline_value;
        }
    if (o.command == Options::Command::ps && a != "-v" && a != "--verbose" && a != "-h" && a != "--help")
      throw Error(ExitCode::usage, "ps takes no option but -v (got '" + a + "')");
    if (a == "-p" || a == "--pid")
      o.pids.push_back(parse_pid(arg()));
    else if (a == "--job-env") {
      std::string kv = arg();
      auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0)
        throw Error(ExitCode::usage, "--job-env needs KEY=VALUE, e.g. SLURM_JOB_ID=4242 (got '" + kv + "')");
      o.job_env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
      o.children = true;
    } else if (a == "--all")
      o.all = true;
    else if (a == "-c" || a == "--children")
      o.children = true;
    else if (a == "-d" || a == "--duration")
      o.duration_s = parse_seconds(arg());
    else if (a == "--no-extended")
      o.extended = false;
    else if (a == "--dirpath")
      o.dirpath = arg();
    else if (a == "--filename")
      o.filename = arg();
    else if (a == "--report") {
      o.report = arg();
      std::string rest = o.report + ",";
      for (auto at = rest.find(','); at != std::string::npos; rest.erase(0, at + 1), at = rest.find(',')) {
        std::string one = rest.substr(0, at);
        if (one != "simple" && one != "advanced" && one != "ops" && one != "gpu")
          throw Error(ExitCode::usage, "unknown report '" + one +
                                           "' (available: simple, advanced, ops, gpu, or several: simple,ops,gpu)");
      }
      o.report_given = true;
    } else if (a == "--rate")
      o.rate_hz = parse_rate(arg());
    else if (a == "--off-cpu")
      o.off_cpu = true;
    else if (a == "--full-stacks")
      o.full_stacks = true;
    else if (a == "--sort-by")
      o.sort_by = parse_sort_key(arg());
    else if (a == "--row-limit")
      o.row_limit = parse_row_limit(arg());
    else if (a == "--group-by-input-shapes")
      o.group_by_input_shapes = true;
    else if (a == "--ops")
      o.op_filters = parse_op_filters(arg());
    else if (a == "--schedule")
      o.schedule = true;
    else if (a == "--no-gpu")
      o.gpu = false;
    else if (a == "--no-inject")
      o.inject = false;
    else if (a == "--launch-stacks")
      o.launch_stacks = true;
    else if (a == "--device-stats")
      o.device_stats = true;
    else if (a == "--line-count-restriction")
      o.line_count_restriction = parse_restriction(arg());
    else if (a == "--collapsed")
      o.collapsed_path = arg();
    else if (a == "--flamegraph")
      o.flamegraph_path = arg();
    else if (a == "--speedscope")
      o.speedscope_path = arg();
    else if (a == "-v" || a == "--verbose")
      o.verbose = true;
    else if (a == "--dump")
      o.dump_path = arg();
    else if (a == "-o" || a == "--output")
      o.output = arg();
    else if (a == "--chrome")
      o.chrome_path = arg();
    else if (a == "--merge")
      o.merge = true;
    else if (a == "--chrome-dir")
      o.chrome_dir = arg();
    else if (a == "--html")
      o.html_path = arg();
    else if (a == "--slurm-job")
      o.slurm_job = arg();
    else if (a == "--nodes") {
      std::string rest = arg() + ",";
      for (auto at = rest.find(','); at != std::string::npos; rest.erase(0, at + 1), at = rest.find(','))
        if (at > 0) o.nodes.push_back(rest.substr(0, at));
      if (o.nodes.empty()) throw Error(ExitCode::usage, "--nodes needs node names, e.g. node1,node2");
    } else if (a == "--gather") {
      o.gather = arg();
      if (o.gather != "auto" && o.gather != "shared" && o.gather != "stream")
        throw Error(ExitCode::usage, "--gather takes auto, shared or stream (got '" + o.gather + "')");
    } else if (a == "--agent")
      o.agent_path = arg();
    else if (a == "--clock-addr")
      o.clock_addr = arg();
    else if (a == "--clock-server")
      o.clock_server = arg();
    else if (a == "--stream")
      o.stream = true;
    else if (a == "--shared-marker")
      o.shared_marker = arg();
    else if (a == "--wait") {
      const std::string w = arg();
      char* end = nullptr;
      o.wait_s = std::strtod(w.c_str(), &end);
      if (w.empty() || *end || !std::isfinite(o.wait_s) || o.wait_s < 0 || o.wait_s > 3600)
        throw Error(ExitCode::usage, "invalid --wait '" + w + "': expected seconds, 0 to 3600");
    } else if (a == "-h" || a == "--help")
      o.help = true;
    else if (a == "-V" || a == "--version")
      o.version = true;
    else
      throw Error(ExitCode::usage, "unknown option '" + a + "' (see --help)");
  }
  if (o.help || o.version) return o;
  if (o.command == Options::Command::report) {
    if (o.input.empty()) throw Error(ExitCode::usage, "report needs a trace file: ltrace-bpf report FILE");
    if (!o.pids.empty() || o.children || o.duration_s > 0 || !o.output.empty() || o.rate_hz || o.off_cpu ||
        !o.op_filters.empty() || !o.job_env.empty())
      throw Error(ExitCode::usage,
                  "report reads a trace file: --pid, --children, --duration, --rate, --off-cpu, --ops and -o do not "
                  "apply");
  } else if (o.command == Options::Command::cluster) {
    if (o.slurm_job.empty())
      throw Error(ExitCode::usage, "cluster needs --slurm-job ID (the running job to attach to)");
    if (o.output.empty()) throw Error(ExitCode::usage, "cluster needs -o DIR (where the traces go)");
    if (!o.pids.empty() || !o.job_env.empty())
      throw Error(ExitCode::usage, "cluster finds every rank itself: --pid and --job-env do not apply");
  } else if (o.command == Options::Command::run) {
    if (o.run_argv.empty())
      throw Error(ExitCode::usage, "run needs a command: ltrace-bpf run [options] -- COMMAND [ARGS]");
    if (!o.pids.empty()) throw Error(ExitCode::usage, "run launches its own target: --pid does not apply");
  } else if (o.command == Options::Command::live || o.command == Options::Command::record) {
    if (o.all && (!o.pids.empty() || !o.job_env.empty()))
      throw Error(ExitCode::usage, "--all takes every torch/Lightning process: --pid and --job-env do not apply");
    if (o.pids.empty() && o.job_env.empty()) o.all = true;
    if (o.all) o.children = true;
  } else if (o.command == Options::Command::agent && o.pids.empty() && o.job_env.empty()) {
    throw Error(ExitCode::usage, "no target: give --pid PID or --job-env KEY=VALUE (see --help)");
  }
  if (o.all && o.command != Options::Command::live && o.command != Options::Command::record)
    throw Error(ExitCode::usage, "--all applies to live attach and record");
  if ((o.command == Options::Command::record || o.command == Options::Command::agent) && o.output.empty())
    throw Error(ExitCode::usage,
                std::string(o.command == Options::Command::agent ? "agent" : "record") + " needs -o FILE");
  const bool cluster_only =
      !o.slurm_job.empty() || !o.nodes.empty() || o.gather != "auto" || !o.agent_path.empty() || !o.clock_addr.empty();
  if (cluster_only && o.command != Options::Command::cluster)
    throw Error(ExitCode::usage, "--slurm-job, --nodes, --gather, --agent and --clock-addr apply to cluster");
  const bool agent_only = !o.clock_server.empty() || o.stream || !o.shared_marker.empty();
  if (agent_only && o.command != Options::Command::agent)
    throw Error(ExitCode::usage, "--clock-server, --stream and --shared-marker apply to agent");
  if (o.wait_s != 10 && o.command != Options::Command::agent && o.command != Options::Command::cluster)
    throw Error(ExitCode::usage, "--wait applies to cluster and agent");
  if ((o.merge || !o.chrome_dir.empty()) && o.command != Options::Command::report)
    throw Error(ExitCode::usage, "--merge and --chrome-dir apply to report: ltrace-bpf report DIR --merge");
  if (!o.chrome_dir.empty() && !o.merge) throw Error(ExitCode::usage, "--chrome-dir needs --merge");
  if (o.dirpath.empty() != o.filename.empty()) throw Error(ExitCode::usage, "--dirpath and --filename go together");
  return o;
}

}  // namespace lt
