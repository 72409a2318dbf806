// What a watcher watches, as the machine's registry of watchers records it
// (user/watch/watcher_registry.h), and what an entry watches now, read
// from /proc.
#pragma once
#include <sys/types.h>

#include <vector>

#include "user/cli/options.h"
#include "user/watch/watcher_registry.h"

namespace lt {

// This watcher's selection: its pids with their start times, --job-env,
// --children (implied by --job-env: a launcher's ranks), --all, DIR.
WatchSelection watch_selection(const Options& o);

// Every live process an entry's selection (not --all) watches now: its
// pids that are still the processes it began with, the processes whose
// environment has its pairs, and with `children` their descendants.
std::vector<pid_t> processes_watched_now(const WatchSelection& s);

}  // namespace lt
