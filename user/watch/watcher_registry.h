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
// is removed.  Pids are those of the registry's pid namespace (/run is a
// container's own as a rule: a watcher in a container and one on the host
// do not see each other's entries).  The per-directory lock (DIR/watch.pid) stays: two watchers
// must not share a ring either.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace lt {

using EnvPairs = std::vector<std::pair<std::string, std::string>>;

// What a watcher watches: every process (--all), or the processes given
// (--pid) and those whose environment has every pair of `env` (--job-env),
// with their descendants when `children` (--children; a --job-env
// watcher's launcher and its ranks).
struct WatchSelection {
  bool all = false;
  bool children = false;
  std::vector<pid_t> pids;
  // Each pid's start time (clock ticks after boot) when the watcher began,
  // where known: a process that reuses the pid later is not the watched one.
  std::map<pid_t, std::uint64_t> started;
  EnvPairs env;
  std::string dir;    // its DIR, to name it
  pid_t watcher = 0;  // its pid
};

// The entry's text and back (a newline or backslash in a value escaped);
// parse_selection returns false on text that is not an entry.
std::string format_selection(const WatchSelection& s);
bool parse_selection(const std::string& text, WatchSelection& out);

// Every live process a selection of pids and --job-env pairs watches now:
// the pids, the processes whose environment has the pairs, and with
// `children` their descendants (cmd_watch reads /proc).  Not called for
// --all.
using WatchedNow = std::function<std::vector<pid_t>(const WatchSelection&)>;

// Why `mine` may not run beside `theirs` (one clause, e.g. "it watches
// every process (--all)" or "it watches pid 42"), or "" when they watch no
// process in common.
std::string selection_overlap(const WatchSelection& mine, const WatchSelection& theirs, const WatchedNow& watched);

class WatcherRegistration {
 public:
  static constexpr const char* kDefaultDir = "/run/ltrace-bpf/watchers";
  // Takes the registry's lock (10 s at most: another watcher registering),
  // reads the live entries, throws lt::Error(watched) naming the first
  // watcher `mine` overlaps (or one whose entry it cannot read), else
  // writes and locks this watcher's entry.  The directory and its files are
  // ours alone (0700, 0600: no other user can read or lock them); one that
  // is a link, someone else's or open to others is refused
  // (lt::Error(unsafe_output)); one we may not make is lt::Error(permission).
  WatcherRegistration(const WatchSelection& mine, const WatchedNow& watched, const std::string& dir = kDefaultDir);
  ~WatcherRegistration();  // removes the entry
  WatcherRegistration(const WatcherRegistration&) = delete;
  WatcherRegistration& operator=(const WatcherRegistration&) = delete;

 private:
  int dir_fd_ = -1;
  std::string name_;  // the entry's, in dir_fd_
  int fd_ = -1;
};

}  // namespace lt
