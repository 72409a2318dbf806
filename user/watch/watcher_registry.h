// One watcher per process on a machine (issue 33, "a second watcher on the
// same machine is refused with one line"): every running watcher holds an
// entry in /run/ltrace-bpf/watchers/PID, locked (flock) while it lives,
// saying what it watches.  A new watcher reads the live entries under the
// registry's lock and is refused, naming the first, when it would watch a
// process one of them watches: two tracers on one process double its probes
// and fight over its op observer.  Watchers of disjoint processes (one per
// Slurm node's ranks on a shared host, a test's jobs) run side by side.
//
// An entry whose lock is free was left by a watcher killed with SIGKILL: it
// is removed.  The per-directory lock (DIR/watch.pid) stays: two watchers
// must not share a ring either.
#pragma once
#include <sys/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace lt {

using EnvPairs = std::vector<std::pair<std::string, std::string>>;

// What a watcher watches: every process (--all), or the processes given
// (--pid) and those whose environment has every pair of `env` (--job-env).
struct WatchSelection {
  bool all = false;
  std::vector<pid_t> pids;
  EnvPairs env;
  std::string dir;    // its DIR, to name it
  pid_t watcher = 0;  // its pid
};

// The entry's text and back; parse_selection returns false on text that
// is not an entry (it is then ignored, not trusted).
std::string format_selection(const WatchSelection& s);
bool parse_selection(const std::string& text, WatchSelection& out);

// The processes a --job-env selection has now (proc::find_job_processes).
using JobProcesses = std::function<std::vector<pid_t>(const EnvPairs&)>;

// Why `mine` may not run beside `theirs` (one clause, e.g. "it watches
// every process (--all)" or "it watches pid 42"), or "" when they watch no
// process in common.
std::string selection_overlap(const WatchSelection& mine, const WatchSelection& theirs, const JobProcesses& find);

class WatcherRegistration {
 public:
  static constexpr const char* kDefaultDir = "/run/ltrace-bpf/watchers";
  // Takes the registry's lock, reads the live entries, throws
  // lt::Error(watched) naming the first watcher `mine` overlaps, else
  // writes and locks this watcher's entry.  A registry directory that is a
  // link or not root's is refused (lt::Error(unsafe_output)).
  WatcherRegistration(const WatchSelection& mine, const JobProcesses& find, const std::string& dir = kDefaultDir);
  ~WatcherRegistration();  // removes the entry
  WatcherRegistration(const WatcherRegistration&) = delete;
  WatcherRegistration& operator=(const WatcherRegistration&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace lt
