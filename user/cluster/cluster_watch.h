// `ltrace-bpf cluster --slurm-job N watch [watch options]`: `watch` on every
// node of a running Slurm job, started through Slurm itself (srun --jobid=N
// --overlap, as the agents are), each watching its node's ranks (found by
// the job's environment, and adopted again when they restart), its flight
// recorder and captures in DIR/NODE on that node. Every watcher's lines (its
// captures' summary lines among them) come back prefixed by its node; a stop
// (SIGINT, SIGTERM) is passed on to every watcher, which flushes and exits.
#pragma once
#include <atomic>
#include <string>
#include <vector>

#include "user/cluster/slurm_job.h"
#include "user/watch/straggler.h"

namespace lt::cluster {

struct ClusterWatchOptions : JobNodes {
  std::vector<std::string> watch_args;  // watch's options, as given
  std::string dir;                      // each node's watcher gets DIR/NODE
  std::string clock_host;               // the address the watchers reach us at; "": what srun tells them
  StragglerOptions straggler;           // the rule run here over every node's ranks
};

// Runs until every node's watcher ended (the job's ranks gone, or a stop
// passed on). Returns 0 when each ended cleanly, ExitCode::partial when
// some did not (each node's reason printed). Throws lt::Error (usage,
// slurm) before any watcher starts.
int run_cluster_watch(const ClusterWatchOptions& opt, const std::atomic<bool>& stop);

}  // namespace lt::cluster
