// `cluster ... dump`: a node agent's dumps of its ranks as agent status
// lines (agent_protocol.h) on its stdout, and their reading back on the
// coordinator.  Lines, not JSON, because srun carries lines and the
// protocol's percent-encoding already keeps any bytes (a file name with a
// newline, a lone surrogate) whole.  Pure: no I/O.
//
//   @ltrace-agent dump-process pid= rank= world_size= comm= cmdline= python= python_binary=
//                              gil_known= gil_tid= read_ms= interval_s=
//   @ltrace-agent dump-thread tid= name= state= syscall= pc= runs= gone= python= holds_gil=
//                             truncated= torn= blocked_s= [leaf_function= leaf_dso= leaf_path=]
//   @ltrace-agent dump-frame function= file= line= readable=
//
// A thread belongs to the process line above it, a frame to the thread
// line above it (innermost first).
#pragma once
#include <string>
#include <vector>

#include "user/cluster/agent_protocol.h"
#include "user/python/process_dump.h"

namespace lt::cluster {

// One process of a job as its node's agent read it.
struct RankProcess {
  int rank = -1;          // RANK / SLURM_PROCID...; -1: none (a launcher)
  int world_size = -1;    // WORLD_SIZE / SLURM_NTASKS...; -1: not known
  std::string node;       // the Slurm node it runs on (set by the coordinator)
  double interval_s = 0;  // between the agent's two reads (0: one read only)
  python::ProcessDump dump;
};

std::vector<std::string> dump_lines(const RankProcess& p);

// Builds RankProcesses from the dump-* lines of one agent, in order.
class DumpLineReader {
 public:
  // False when `m` is a dump-* line out of place (a thread before any
  // process, a frame before any thread) or with a bad number; the line is
  // then ignored and error() says why.  Other kinds are not dump lines:
  // false, with no error.
  bool take(const AgentMessage& m);
  std::vector<RankProcess>& processes() { return out_; }
  const std::string& error() const { return error_; }

 private:
  std::vector<RankProcess> out_;
  std::string error_;
};

}  // namespace lt::cluster
