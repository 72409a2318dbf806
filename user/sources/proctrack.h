// Process lifecycle source (bpf/proctrack.bpf.c): fork/exec/exit of the
// processes we follow.  It owns the maps every source shares (targets,
// follow set, ring buffer, drop counters, thread states); other sources
// reuse its fds.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "bpf/events.h"
#include "user/sources/bpf_owner.h"
#include "user/sources/loss_records.h"

struct lt_proctrack;
struct bpf_map;
struct bpf_object;

namespace lt {

// Its skeleton's destroy, defined where the skeleton is (user/sources/proctrack.cpp).
template <>
void SkeletonDestroy<lt_proctrack>::operator()(lt_proctrack* s) const;

class ProcTrackSource {
 public:
  ProcTrackSource();  // opens, loads and attaches; throws lt::Error(bpf|permission)
  ~ProcTrackSource();
  ProcTrackSource(const ProcTrackSource&) = delete;
  ProcTrackSource& operator=(const ProcTrackSource&) = delete;

  int targets_fd() const;
  int follow_fd() const;
  int events_fd() const;
  int drops_fd() const;
  // The ring of pids (u64) of followed processes that exec'd.
  int exec_wakeup_fd() const;
  // Executables known to be no CPython: {u64 dev (kernel encoding), u64 ino} -> u8.
  int exec_skip_fd() const;
  // --all: every exec on the machine wakes the holder, tagged
  // kExecUnfollowed when the process is not one we follow.
  void watch_every_exec();
  static constexpr std::uint64_t kExecUnfollowed = 1ull << 32;

  // Points another source's copies of the shared maps (common.bpf.h) at
  // ours, by name, before it loads: one target table, one ring buffer, one
  // set of loss counters.  0 or a negative errno.
  int share_with(bpf_object* other) const;
  // Thread states of a LT_TARGET_TSTATE_MAP target: (tid, PyThreadState*)
  // for every thread it has now; entries of its threads that are gone are
  // removed.
  void set_thread_states(pid_t pid, const std::vector<std::pair<std::uint32_t, std::uint64_t>>& threads);

  void follow(pid_t pid, std::uint32_t flags);
  // Creates or replaces pid's entry: its adoption (held, or alive).
  void set_target(pid_t pid, const lt_target& t);
  // Replaces pid's entry only where BPF still has it. An exec or exit
  // removed it; written again, it would outlive the process, and the next
  // process given that pid (pid_max is 32768 on this machine) would be
  // taken for our target: its exec held by us, not by its own tracer.
  // False: there was none.
  bool update_target(pid_t pid, const lt_target& t);
  void drop_target(pid_t pid);     // its target entry only (its follow entry stays)
  void forget(pid_t pid);          // every entry of pid
  lt_drop_counters drops() const;  // summed over CPUs
  // Records lost or degraded per (process, kind, cause), as far as the
  // bounded table held them (drops() has the totals).
  std::vector<LossCount> losses() const;

 private:
  SkeletonPtr<lt_proctrack> skel_;
  std::map<pid_t, std::set<std::uint32_t>> tstate_tids_;  // what set_thread_states put in
};

}  // namespace lt
