// Processes another ltrace-bpf traces, as the kernel holds them: every
// ltrace-bpf keeps its targets in a BPF hash map named `lt_targets` (key:
// the process's pid as BPF sees it), and BPF objects are the kernel's, not
// a mount or pid namespace's. The watchers' registry (user/watch/
// watcher_registry.h) lives under /run, which a container has its own of:
// a watcher there and one on the host (or a plain attach anywhere) do not
// see each other's entries; they see each other's maps. Reading them needs
// CAP_SYS_ADMIN (BPF_MAP_GET_NEXT_ID), which a tracer has.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lt {

struct OtherTracer {
  pid_t traced = 0;           // the process it traces
  std::uint32_t map_id = 0;   // its lt_targets map
  pid_t owner = 0;            // the process holding that map (0: not found in /proc)
  std::string owner_cmdline;  // its command line, arguments joined by spaces
  bool watcher = false;       // the owner runs `ltrace-bpf watch`
};

// The first of `pids` that another process's lt_targets map holds, or
// nullopt (none; or the maps cannot be listed: `listed` false). `all`:
// any live process such a map holds (a --all watcher would take it).
// `watchers_only`: held by an `ltrace-bpf watch` (its command line has the
// word), not an attach or a `run`. Maps this process holds are not
// another's.
std::optional<OtherTracer> traced_by_another(const std::vector<pid_t>& pids, bool all, bool watchers_only,
                                             bool* listed = nullptr);

}  // namespace lt
