// `ltrace-bpf cluster`: one agent per node of a Slurm job (user/cluster/coordinator.h).
#include "user/cli/builtin.h"
#include "user/cli/stop_signals.h"
#include "user/cluster/coordinator.h"
#include "user/core/errors.h"

namespace lt {

void check_cluster(Options& o) {
  if (o.slurm_job.empty()) throw Error(ExitCode::usage, "cluster needs --slurm-job ID (the running job to attach to)");
  if (o.output.empty()) throw Error(ExitCode::usage, "cluster needs -o DIR (where the traces go)");
}

int cmd_cluster(Options& opts) {
  install_stop_signals(true);
  cluster::ClusterOptions co;
  co.job_id = opts.slurm_job;
  co.out_dir = opts.output;
  co.nodes = opts.nodes;
  co.gather = opts.gather == "stream"   ? cluster::Gather::stream
              : opts.gather == "shared" ? cluster::Gather::shared
                                        : cluster::Gather::automatic;
  co.agent_path = opts.agent_path;
  co.agent_args = opts.agent_args;
  co.duration_s = opts.duration_s;
  co.clock_host = opts.clock_addr;
  co.wait_s = opts.wait_s;
  co.verbose = opts.verbose;
  return cluster::run_cluster(co, stop_requested());
}

}  // namespace lt
