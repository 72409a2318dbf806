// `ltrace-bpf cluster --slurm-job N capture [--dir DIR]`: every rank of a
// running job captured by its node's watcher (`agent --capture-via DIR`
// on each node: agent_capture.h), through the watchers' sockets. Root
// needs nothing more; the job's owner needs no sudo (their captures hold
// their own processes and are theirs); anyone else's request for the job
// is refused before any step starts.
#pragma once
#include <atomic>
#include <string>

#include "user/cluster/slurm_job.h"

namespace lt::cluster {

struct ClusterCaptureOptions : JobNodes {
  double wait_s = 10;       // how long each node's agent waits for its ranks
  std::string watcher_dir;  // the watchers' DIR (DIR/NODE under `cluster ... watch`)
};

// Prints a line per rank asked for (stdout) and per node that failed
// (stderr). Returns 0 (every rank asked for), 18 (refused: every answer a
// refusal), 11 (some nodes or ranks not); throws lt::Error (usage, slurm,
// no_such_process, refused: not the caller's job) before any step starts.
int run_cluster_capture(const ClusterCaptureOptions& opt, const std::atomic<bool>& stop);

}  // namespace lt::cluster
