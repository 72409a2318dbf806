// `ltrace-bpf cluster`: one agent per node of a Slurm job (user/cluster/coordinator.h);
// `cluster ... dump`: every rank's threads now and a hang verdict (user/cluster/cluster_dump.h);
// `cluster ... watch`: a watcher on every node (user/cluster/cluster_watch.h);
// `cluster ... capture`: every rank captured by its node's watcher (user/cluster/cluster_capture.h).
#include <iostream>

#include "user/cli/builtin.h"
#include "user/cli/cli_table.h"
#include "user/cli/cluster_dump_output.h"
#include "user/cli/stop_signals.h"
#include "user/cluster/cluster_capture.h"
#include "user/cluster/cluster_dump.h"
#include "user/cluster/cluster_watch.h"
#include "user/cluster/coordinator.h"
#include "user/cluster/hang_verdict.h"
#include "user/core/errors.h"
#include "user/watch/request_server.h"

namespace lt {

void check_cluster(Options& o) {
  if (o.slurm_job.empty()) throw Error(ExitCode::usage, "cluster needs --slurm-job ID (the running job to attach to)");
  if (o.cluster_watch) {
    if (!o.output.empty() || o.gather != "auto" || o.json)
      throw Error(ExitCode::usage,
                  "cluster ... watch runs a watcher on every node: -o, --gather and --json do not apply "
                  "(it takes --nodes, --agent, --clock-addr, --dir and watch's options)");
    for (const auto& [name, commands] : o.agent_arg_specs)
      if (!(commands & command_bit(Options::Command::watch)))
        throw Error(ExitCode::usage, name +
                                         " does not apply to watch (cluster ... watch gives its options to watch "
                                         "on every node)");
    return;
  }
  for (const auto& [name, commands] : o.agent_arg_specs)
    if (!(commands & command_bit(Options::Command::agent)))
      throw Error(ExitCode::usage, name + " applies to watch: cluster --slurm-job ID watch " + name + " ...");
  if (o.cluster_capture) {
    if (!o.agent_args.empty() || o.gather != "auto" || !o.clock_addr.empty() || o.json)
      throw Error(ExitCode::usage,
                  "cluster ... capture asks each node's watcher: it takes --dir (the watchers'), -o DIR (the "
                  "captures' traces brought back there), --duration (each capture's time after the request), "
                  "--nodes, --agent, --wait and -v");
    if (o.duration_s > RequestServer::kMaxCaptureAfterS)
      throw Error(ExitCode::usage, "cluster ... capture --duration: at most " +
                                       std::to_string(static_cast<int>(RequestServer::kMaxCaptureAfterS)) +
                                       " s (a watcher escalates a process for that long)");
    return;
  }
  if (o.cluster_dump) {
    if (!o.output.empty() || !o.agent_args.empty() || o.gather != "auto" || !o.clock_addr.empty())
      throw Error(ExitCode::usage,
                  "cluster ... dump prints every rank's threads: it takes --nodes, --agent, --wait, --duration, "
                  "--json and -v");
    return;
  }
  if (o.json) throw Error(ExitCode::usage, "--json applies to dump and cluster ... dump");
  if (o.output.empty()) throw Error(ExitCode::usage, "cluster needs -o DIR (where the traces go)");
}

namespace {

// What each cluster command takes alike.
void take_job_nodes(const Options& opts, cluster::JobNodes& j) {
  j.job_id = opts.slurm_job;
  j.nodes = opts.nodes;
  j.agent_path = opts.agent_path;
  j.verbose = opts.verbose;
}

int cluster_dump(Options& opts) {
  cluster::ClusterDumpOptions co;
  take_job_nodes(opts, co);
  co.wait_s = opts.wait_s;
  co.interval_s = opts.duration_s > 0 ? opts.duration_s : 1.0;
  const cluster::ClusterDump cd = cluster::gather_cluster_dump(co, stop_requested());
  const auto processes = cd.by_rank();
  const cluster::Verdict v = cluster::hang_verdict(processes);
  std::cout << (opts.json ? cluster_dump_json(cd, processes, v) : cluster_dump_text(cd, processes, v));
  std::cout.flush();
  bool failed = false;
  for (const auto& n : cd.nodes) failed = failed || !n.error.empty();
  if (v.hang) return static_cast<int>(ExitCode::hang);
  return failed ? static_cast<int>(ExitCode::partial) : 0;
}

}  // namespace

int cmd_cluster(Options& opts) {
  install_stop_signals(true);
  if (opts.cluster_dump) return cluster_dump(opts);
  if (opts.cluster_capture) {
    cluster::ClusterCaptureOptions cc;
    take_job_nodes(opts, cc);
    cc.wait_s = opts.wait_s;
    cc.watcher_dir = opts.watch_dir;
    cc.out_dir = opts.output;
    cc.after_s = opts.duration_s;
    return cluster::run_cluster_capture(cc, stop_requested());
  }
  if (opts.cluster_watch) {
    cluster::ClusterWatchOptions cw;
    take_job_nodes(opts, cw);
    cw.watch_args = opts.agent_args;
    cw.dir = opts.watch_dir;
    cw.clock_host = opts.clock_addr;
    cw.straggler = straggler_options(opts);
    return cluster::run_cluster_watch(cw, stop_requested());
  }
  cluster::ClusterOptions co;
  take_job_nodes(opts, co);
  co.out_dir = opts.output;
  co.gather = opts.gather == "stream"   ? cluster::Gather::stream
              : opts.gather == "shared" ? cluster::Gather::shared
                                        : cluster::Gather::automatic;
  co.agent_args = opts.agent_args;
  co.duration_s = opts.duration_s;
  co.clock_host = opts.clock_addr;
  co.wait_s = opts.wait_s;
  return cluster::run_cluster(co, stop_requested());
}

}  // namespace lt
