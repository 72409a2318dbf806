// Entry uprobes, many per file, as cheaply as the kernel allows.
//
// Preferred: ONE uprobe_multi link per file (BPF_TRACE_UPROBE_MULTI, Linux
// 6.6+), each offset with its own attach cookie.  Why: releasing a
// perf-event uprobe waits for an RCU grace period under a global mutex,
// about 0.2 s each on the 6.18 kernel here (strace of a detach), so the 17
// c10d probes took 3.8 s to detach after the target exited -- past Slurm's
// KillWait at a job's end, which cut cluster agents' traces short.  A
// uprobe_multi link unregisters all its offsets and then waits once.
//
// Fallback (EntryUprobes): one libbpf perf-event uprobe per offset, on
// kernels without uprobe_multi, and on 6.6-6.9, whose uprobe_multi links
// scoped to a pid fire only on the thread whose tid is that pid (fixed in
// 6.10: "bpf: fix multi-uprobe PID filtering logic").
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "user/sources/bpf_owner.h"

struct bpf_program;

namespace lt {

// Whether this kernel creates uprobe_multi links, probed once: a link on
// "/" (a directory) fails with EBADF where the link type is known, EINVAL
// where it is not.  LTRACE_NO_UPROBE_MULTI=1 answers no (the tests run the
// fallback on a new kernel with it).
bool kernel_has_uprobe_multi();
// Whether a uprobe_multi link scoped to one pid fires on all its threads
// (Linux 6.10+; see above).
bool uprobe_multi_scopes_processes();

// Before the skeleton is loaded: `prog` will be attached with
// attach_uprobe_multi (its bpf_get_attach_cookie then reads per offset).
void expect_uprobe_multi(bpf_program* prog);

// One link for every offset of `path` (a path this process can open);
// pid <= 0: every process mapping the file (BPF keeps only targets).
// `what` names the probes in the error.  Throws lt::Error(bpf|permission).
OwnedFd attach_uprobe_multi(bpf_program* prog, const std::string& path, const std::vector<std::uint64_t>& offsets,
                            const std::vector<std::uint64_t>& cookies, pid_t pid, const std::string& what);

// The entry uprobes of one source: uprobe_multi links where the kernel
// scopes them right (above), else one perf-event uprobe per offset.
// Declare it after the skeleton: it must be released first.
class EntryUprobes {
 public:
  // Call before the skeleton is loaded, for each program attached here.
  void prepare(bpf_program* prog) const;
  // pid <= 0: every process mapping `path`.  Throws lt::Error(bpf|permission).
  void attach(bpf_program* prog, const std::string& path, const std::vector<std::uint64_t>& offsets,
              const std::vector<std::uint64_t>& cookies, pid_t pid, const std::string& what);
  std::size_t probes() const { return probes_; }
  bool multi() const { return multi_; }
  ~EntryUprobes();

 private:
  bool multi_ = kernel_has_uprobe_multi() && uprobe_multi_scopes_processes();
  std::vector<OwnedFd> links_;  // uprobe_multi
  std::vector<LinkPtr> perf_;   // the fallback
  std::size_t probes_ = 0;
};

}  // namespace lt
