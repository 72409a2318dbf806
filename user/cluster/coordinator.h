// `ltrace-bpf cluster --slurm-job N -o DIR`: one agent per node of a running
// Slurm job, started through Slurm itself (srun --jobid=N --overlap), each
// recording its node's ranks; a clock server the agents measure their wall
// clocks against; the traces gathered into DIR (written there directly when
// the nodes share it, else streamed back through srun), with a manifest,
// DIR/cluster-nodes.tsv, of what each node did, which `report DIR --merge`
// reads to say what is missing.
#pragma once
#include <atomic>
#include <string>
#include <vector>

#include "user/cluster/slurm_job.h"

namespace lt::cluster {

enum class Gather { automatic, shared, stream };

struct ClusterOptions : JobNodes {
  std::string out_dir;
  Gather gather = Gather::automatic;
  std::vector<std::string> agent_args;  // record options passed on (--rate, --ops, ...)
  double duration_s = 0;
  double wait_s = 10;      // how long an agent waits for its node's ranks
  std::string clock_host;  // the address agents reach us at; "": what srun tells them
};

// Returns the exit code: 0 when every node gave a trace, ExitCode::partial
// when some did not (their reasons are printed and in the manifest).
// Throws lt::Error (usage, slurm, no_such_process, io) before any agent
// starts.  `stop` (a signal) ends the capture early on every node.
int run_cluster(const ClusterOptions& opt, const std::atomic<bool>& stop);

// The manifest's notes for `report DIR --merge`: one line per node that
// failed ("node2: agent failed: ..."); empty when there is no manifest.
std::vector<std::string> manifest_notes(const std::string& dir);

}  // namespace lt::cluster
