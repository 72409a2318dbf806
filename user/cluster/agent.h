// The node agent (`ltrace-bpf agent`): `record` of the local ranks of one
// job, started on every node by `cluster` through srun (or by a DaemonSet),
// reporting to the coordinator through agent_protocol.h on stdout.
#pragma once
#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace lt::cluster {

// One status line on stdout, flushed (srun forwards it at once).
void agent_say(const std::string& kind, const std::vector<std::pair<std::string, std::string>>& fields = {});
// A line made by agent_line() (or dump_lines()), written the same way.
void agent_say_line(const std::string& line);

struct AgentOutput {
  std::string trace_path;  // where the session writes
  bool stream = false;     // then send it on stdout and delete it
};
// -o PATH when it is on a directory the coordinator shares with this node
// (the coordinator's marker file is visible here), else a local temporary
// file streamed back; `force_stream` always streams.
AgentOutput agent_output(const std::string& output, const std::string& shared_marker, bool force_stream);

// find_job_processes, retried every 100 ms for up to wait_s seconds (the
// ranks may still be starting).
std::vector<pid_t> wait_for_job_processes(const std::vector<std::pair<std::string, std::string>>& match, double wait_s,
                                          std::string* why);

// The file as "file" + base64 lines + "end" on stdout.  False (with *err)
// when it cannot be read or stdout is gone; the file is then kept.
bool stream_trace_file(const std::string& path, std::string* err);

// The address to reach the coordinator's clock server at: `host` if given,
// else the node srun was started from (SLURM_LAUNCH_NODE_IPADDR), else "".
std::string clock_server_host(const std::string& host);

}  // namespace lt::cluster
