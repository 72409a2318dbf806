// The node agent's capture mode (`ltrace-bpf agent --capture-via DIR`, what
// `cluster ... capture` starts on every node): each rank of the job on this
// node (the job's processes found by --job-env, Python, not a launcher) is
// asked of the node's watcher through its socket (DIR/NODE/watch.sock, the
// layout of `cluster ... watch`, else DIR/watch.sock). The watcher decides
// who may ask: the job's owner gets captures of their own processes that
// are theirs (user/watch/request_server.h), without sudo. One status line
// per rank on stdout:
//   @ltrace-agent captured pid= rank= answer=    (the watcher's answer)
//   @ltrace-agent capture-refused pid= rank= error=
// then "done asked= refused=".
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace lt::cluster {

// The watcher's socket for this node under `dir` ("" when there is none).
std::string node_watcher_socket(const std::string& dir, const std::string& node);

// Returns the exit code: 0 when every rank here was asked for (and, with
// `bring_back`, each capture's trace sent back on stdout once its watcher
// wrote it: "capture-file", then "file" ... "end"); 18 (refused) when the
// watcher refused them all; 11 when some were not; throws lt::Error
// (no_such_process: no process of the job here; io: no watcher).
// after_s > 0: each capture holds after_s seconds after its request
// ("capture PID SECS"), escalated for them.
int run_agent_capture(const std::vector<std::pair<std::string, std::string>>& job_env, double wait_s,
                      const std::string& watcher_dir, double after_s, bool bring_back, bool verbose);

// A capture of `pid` asked for by a user (its directory's name ends in
// "-<pid>-r<rank>-request"), in `captures`, that is not in `before`; ""
// while there is none.
std::string new_request_capture(const std::string& captures, pid_t pid, const std::vector<std::string>& before);

}  // namespace lt::cluster
