// `ltrace-bpf cluster --slurm-job N dump`: one dump agent per node of a
// running Slurm job (`agent --dump-threads`, started through srun --overlap
// as the recording agents are: coordinator.h), their dump-* lines read
// back into each rank's dump.  Nothing is written to disk.
#pragma once
#include <atomic>
#include <string>
#include <vector>

#include "user/cluster/dump_lines.h"
#include "user/cluster/slurm_job.h"

namespace lt::cluster {

struct ClusterDumpOptions : JobNodes {
  double wait_s = 10;     // how long an agent waits for its node's ranks
  double interval_s = 1;  // between each agent's two reads
};

struct NodeDump {
  std::string node, host;
  bool done = false;  // the agent said "done"
  std::string error;  // why this node gave nothing (or less than all)
  std::vector<RankProcess> processes;
};

struct ClusterDump {
  std::string job_id, nodelist;
  std::vector<NodeDump> nodes;  // in the job's node order
  double seconds = 0;           // from the start to the last agent's end (monotonic)
  // Every process read, ranks first in rank order, then those with no rank.
  std::vector<RankProcess> by_rank() const;
};

// Throws lt::Error (usage, slurm, no_such_process) before any agent
// starts.  A node whose agent fails has `error` set; the others are kept.
// `stop` (a signal) ends the agents still running.
ClusterDump gather_cluster_dump(const ClusterDumpOptions& opt, const std::atomic<bool>& stop);

}  // namespace lt::cluster
