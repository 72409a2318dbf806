// Many entry uprobes in one file as ONE kernel link (BPF_TRACE_UPROBE_MULTI,
// Linux 6.6+), each offset with its own attach cookie.
//
// Why one link and not one libbpf uprobe per site: releasing a perf-event
// uprobe waits for an RCU grace period under a global mutex, about 0.2 s
// each on the 6.18 kernel here (strace of a detach), so the 17 c10d probes
// took 3.8 s to detach after the target exited -- past Slurm's KillWait at a
// job's end, which cut cluster agents' traces short.  A uprobe_multi link
// unregisters all its offsets and then waits once.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "user/sources/bpf_owner.h"

struct bpf_program;

namespace lt {

// Before the skeleton is loaded: `prog` will be attached with
// attach_uprobe_multi (its bpf_get_attach_cookie then reads per offset).
void expect_uprobe_multi(bpf_program* prog);

// One link for every offset of `path` (a path this process can open);
// pid <= 0: every process mapping the file (BPF keeps only targets).
// `what` names the probes in the error.  Throws lt::Error(bpf|permission).
OwnedFd attach_uprobe_multi(bpf_program* prog, const std::string& path, const std::vector<std::uint64_t>& offsets,
                            const std::vector<std::uint64_t>& cookies, pid_t pid, const std::string& what);

}  // namespace lt
