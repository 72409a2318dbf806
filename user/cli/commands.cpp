// The command table: every command once, with the words --help shows, the
// check of its options and the function that runs it.  Table order is
// --help order.
#include <iostream>

#include "bpf/events.h"
#include "user/cli/builtin.h"
#include "user/cli/cli_table.h"
#include "user/cli/ps_command.h"
#include "user/core/errors.h"

namespace lt {
namespace {

using C = Options::Command;

void no_check(Options&) {}

// clang-format off
const CommandSpec kCommands[] = {
  {"", C::live, "ltrace-bpf [--pid PID ... | --job-env K=V | --all] [options]",
   "attach, print reports; with no target, every torch/Lightning process, now and later (--all)",
   "{} does not apply to a live attach", false, check_live, cmd_live},
  {"ps", C::ps, "ltrace-bpf ps [-v]", "list the torch/Lightning processes here",
   "ps takes no option but -v (got '{}')", true, no_check, cmd_ps},
  {"record", C::record, "ltrace-bpf record [--pid PID ...] -o FILE [options]", "attach, write a trace file",
   "{} does not apply to record", false, check_record, cmd_record},
  {"report", C::report, "ltrace-bpf report FILE|-|DIR [--merge] [options]",
   "reports from a trace file (-: stdin); with --merge, one job from the traces under DIR",
   "report reads a trace file: {} does not apply", false, check_report, cmd_report},
  {"run", C::run, "ltrace-bpf run [options] -- COMMAND [ARGS...]", "launch COMMAND under ltrace-bpf",
   "run launches its own target: {} does not apply", false, check_run, cmd_run},
  {"cluster", C::cluster,
   "ltrace-bpf cluster --slurm-job ID (-o DIR [options] | dump [--json] | watch [watch options] | capture [--dir DIR])",
   "every rank of a running Slurm job: traces, (dump) every rank's threads now and a hang verdict, (watch) a watcher "
   "on every node, or (capture) every rank captured by its node's watcher, for the job's owner too",
   "cluster finds every rank itself: {} does not apply", false, check_cluster, cmd_cluster},
  {"dump", C::dump, "ltrace-bpf dump --pid PID ... [--children] [--json]",
   "every thread's Python stack, state and native leaf now, without stopping the process",
   "dump takes --pid, --children, --json and -v (got '{}')", true, check_dump, cmd_dump},
  {"agent", C::agent, "ltrace-bpf agent --job-env K=V ... -o FILE [options]",
   "one node's recorder (cluster starts it)", "{} does not apply to agent", false, check_agent, cmd_agent},
  {"watch", C::watch, "ltrace-bpf watch [--pid PID ... | --all] [--dir DIR] [--keep SECS] [--metrics [HOST]:PORT] | watch --capture-now [--pid PID]",
   "always on: a flight recorder of the last minutes, captures of slow steps, stalls and failed exits, metrics for Prometheus",
   "{} does not apply to watch", false, check_watch, cmd_watch},
  {"diff", C::diff, "ltrace-bpf diff A B | A1 A2 ... --vs B1 B2 ... [--fail-if-slower PCT]",
   "what changed from trace A to trace B: per step, step part and action, with a rank test (Holm-corrected); "
   "over runs with several a side",
   "{} does not apply to diff", false, check_diff, cmd_diff},
};
// clang-format on

}  // namespace

std::span<const CommandSpec> command_table() {
  return kCommands;
}

const CommandSpec& command_spec(Options::Command id) {
  for (const CommandSpec& c : kCommands)
    if (c.id == id) return c;
  throw Error(ExitCode::internal, "no command " + std::to_string(static_cast<int>(id)) + " in the command table");
}

int cmd_ps(Options& opts) {
  return run_ps(opts.verbose, std::cout, std::cerr);
}

int run_command(Options& opts) {
  if (opts.help) {
    std::cout << usage_text();
    return 0;
  }
  if (opts.version) {
    std::cout << "ltrace-bpf 0.1.0 (event ABI " << LT_EVENT_ABI_VERSION << ")\n";
    return 0;
  }
  return command_spec(opts.command).run(opts);
}

}  // namespace lt
