// Who a process is in a distributed job, from its environment: the
// variables torchrun / torch.distributed, Slurm, Open MPI and MPICH (PMI)
// set for each rank.  Pure parsing, plus the hostname as the process's own
// UTS namespace names it.
#pragma once
#include <sys/types.h>

#include <map>
#include <string>

#include "bpf/events.h"

namespace lt::proc {

struct RankEnv {
  // The first variable of each list that holds a valid number wins (a set
  // but unparsable one is skipped); -1 when none does.
  int rank = -1;              // RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK
  int local_rank = -1;        // LOCAL_RANK, SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK
  int world_size = -1;        // WORLD_SIZE, SLURM_NTASKS, OMPI_COMM_WORLD_SIZE
  int local_world_size = -1;  // LOCAL_WORLD_SIZE
  int group_rank = -1;        // GROUP_RANK (torchrun: the node's index)
  int slurm_procid = -1;      // SLURM_PROCID
  int slurm_nodeid = -1;      // SLURM_NODEID
  unsigned master_port = 0;   // MASTER_PORT (1..65535), 0 = unset or invalid
  std::string master_addr;    // MASTER_ADDR
  std::string slurm_job_id;   // SLURM_JOB_ID, else SLURM_JOBID
  std::string run_id;         // TORCHELASTIC_RUN_ID

  // Any sign of a distributed job: worth a PROC_ENV record.
  bool any() const { return rank >= 0 || !slurm_job_id.empty() || !master_addr.empty(); }
};

// Never throws: invalid numbers (non-digits, negative, out of range) are -1.
RankEnv parse_rank_env(const std::map<std::string, std::string>& env);

// A non-negative decimal int, surrounding blanks allowed; -1 otherwise.
int parse_env_number(const std::string& s);

// The PROC_ENV record of `pid` (header filled, ts_ns = 0: the caller stamps
// it); strings longer than their fields are truncated, always NUL-terminated.
lt_proc_env_event to_event(pid_t pid, const RankEnv& env, const std::string& hostname);

// The hostname in the UTS namespace of `pid` (a container or a simulated
// node may name itself differently from us).  Same namespace as ours:
// gethostname().  Otherwise a short-lived child setns()es into it and sends
// its gethostname() back (1 s at most); on any failure, our own hostname.
// Cached per namespace, so it costs one stat(2) per call after the first.
std::string process_hostname(pid_t pid);

}  // namespace lt::proc
