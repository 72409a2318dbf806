// The node agent's dump mode (`ltrace-bpf agent --dump-threads`, what
// `cluster ... dump` starts on every node): every process of the job on
// this node (the roots find_job_processes names and their descendants)
// dumped twice, `interval_s` apart, without stopping them; the second
// read, with each thread's "blocked at least" mark from the pair
// (python::mark_still_blocked), goes to stdout as dump-* lines
// (dump_lines.h), then "done".
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace lt::cluster {

// Returns the exit code: 0 when at least one process was dumped; throws
// lt::Error(no_such_process) when the job has no process here after
// waiting `wait_s` (the agent's "failed" line says so first).
int run_agent_dump(const std::vector<std::pair<std::string, std::string>>& job_env, double wait_s, double interval_s,
                   bool verbose);

}  // namespace lt::cluster
