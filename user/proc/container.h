// The container a process runs in, as far as the host can tell: which of
// our namespaces it does not share, its pid inside its own pid namespace,
// the hostname of its UTS namespace, and the container id that runtimes
// put in its cgroup path.  Nothing here enters the container.
#pragma once
#include <sys/types.h>

#include <optional>
#include <string>

#include "bpf/events.h"

namespace lt::proc {

// nullopt for a process that shares our pid, mount and UTS namespaces and
// our root (or that is gone).
std::optional<lt_proc_container_event> container_of(pid_t pid);

// "HOST (id 0123456789ab, pid 7 inside)": how reports name it.
std::string describe_container(const std::string& hostname, const std::string& container_id, unsigned ns_pid);

}  // namespace lt::proc
