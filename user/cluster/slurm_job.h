// What `cluster --slurm-job N` asks Slurm, through its own commands
// (scontrol), so it works wherever the user's srun does: the job's state and
// nodes, and the srun line that starts one agent on one node of it.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "user/cluster/subprocess.h"

namespace lt::cluster {

// What every cluster command takes (record, dump, watch): the job, which of
// its nodes, the ltrace-bpf to run there, and the Slurm commands.
struct JobNodes {
  std::string job_id;
  std::vector<std::string> nodes;  // --nodes: a subset of the job's; empty: all
  std::string agent_path;          // the ltrace-bpf to run on the nodes; "": this one
  std::string srun = "srun", scontrol = "scontrol";
  bool verbose = false;
};

struct SlurmJob {
  std::string id;
  std::string state;     // JobState, e.g. RUNNING
  std::string nodelist;  // NodeList, compressed (node[1-4])
  std::vector<std::string> nodes;
  int num_tasks = -1;  // NumTasks; -1 unknown
  long uid = -1;       // UserId=name(uid): whose job it is; -1 unknown
  long gid = -1;       // GroupId=name(gid)
};

// `scontrol show job -o ID` output -> its KEY=VALUE fields (pure).  Values
// run to the next " KEY=" (a value may hold spaces, e.g. Command=).
std::map<std::string, std::string> parse_scontrol_fields(const std::string& line);

// Asks Slurm (`scontrol` on PATH, or `scontrol_path`).  Throws lt::Error:
// slurm (Slurm not installed or not answering), no_such_process (no such
// job, or not running).
SlurmJob query_slurm_job(const std::string& job_id, const std::string& scontrol_path = "scontrol");

// --nodes: the nodes of `job` asked for (all of them when `wanted` is
// empty). Throws lt::Error(usage) for a node that is not the job's.
std::vector<std::string> chosen_nodes(const SlurmJob& job, const std::vector<std::string>& wanted);

// The job-id as Slurm takes it: digits, optionally "_array" or "+het" suffixes.
bool valid_job_id(const std::string& id);

// The srun command that runs `agent_argv` as one task on `node` inside the
// running job, beside its own steps: --overlap shares the job's resources,
// so the agent neither waits for free CPUs nor takes any from the ranks.
std::vector<std::string> agent_srun_argv(const std::string& srun, const std::string& job_id, const std::string& node,
                                         const std::vector<std::string>& agent_argv);

// Who must start a step of `job` when we are root and the job is a user's:
// Slurm starts no one else's step in a user's job, root's included (and
// srun --uid's steps fail with "Invalid job credential"), so srun runs as
// the owner (their gid and groups). Nothing otherwise.
std::optional<RunAs> step_user_for(const SlurmJob& job);

// Runs argv, returns its stdout; throws lt::Error(slurm) naming argv[0]
// when it cannot run, or exits non-zero (with its stderr's first line).
std::string run_capture(const std::vector<std::string>& argv, int timeout_s = 30);

}  // namespace lt::cluster
