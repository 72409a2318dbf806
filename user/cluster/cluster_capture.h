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
  // -o DIR: each capture's trace brought back here, as NODE-<capture>.ltrace,
  // once its watcher wrote it (through srun, as `cluster -o` streams).
  std::string out_dir;
  // --duration SECS: each capture holds SECS after its request, escalated
  // (a profile of every rank for SECS, as `cluster -o` records; 0: the
  // watchers' --capture-after).
  double after_s = 0;
};

// Prints a line per rank asked for (and brought back, with -o) on stdout
// and per node that failed on stderr. Returns 0 (every rank asked for, and
// brought back with -o), 18 (refused: every answer a
// refusal), 11 (some nodes or ranks not); throws lt::Error (usage, slurm,
// no_such_process, refused: not the caller's job) before any step starts.
int run_cluster_capture(const ClusterCaptureOptions& opt, const std::atomic<bool>& stop);

}  // namespace lt::cluster
