// Which processes a session follows, from what it is told: adoptions and
// the fork / exec / exit records of proctrack.  Pure bookkeeping (no BPF,
// no /proc): the session applies what it answers to the BPF maps.
//  - alive: every process we report on, until its exit (an exit record, or
//    found gone by polling);
//  - live: the targets with probes, each with its interpreter; a child
//    forked by a live target is live too (same image), an exec ends it
//    (a new program: rediscovered by the session);
//  - thread-state keys (sampling) per live target; a forked child inherits
//    its parent's, unproven until re-checked in the child.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <map>
#include <vector>

#include "user/python/discovery.h"
#include "user/python/thread_states.h"

namespace lt {

class TargetTracker {
 public:
  // How often a forked child's thread-state key is re-checked before we
  // stop sampling it rather than read with a wrong key.
  static constexpr int kTsdTries = 25;
  // A CPython adopted at or just after its exec (held there, or found by
  // its exec record when the hold could not be had) has no interpreter
  // yet: its key is looked for at every drain until it has one; one that
  // has an interpreter whose key cannot be proven is given up after this
  // long (by the clock, not by tries).
  static constexpr std::uint64_t kTsdAwaitNs = 30'000'000'000;

  // An adoption starts: the process is reported on from now.
  void met(pid_t pid) {
    alive_[pid] = true;
    forked_from_.erase(pid);  // a reused pid: not a dead worker's lineage
  }
  // ...and has its probes.
  void adopted(pid_t pid, const python::Interpreter& interp) { live_[pid] = interp; }
  // ...or was refused, and leaves no trace (--all).
  void forget(pid_t pid);

  // A followed process forked.  The child is reported on; when the parent
  // is a live target the child is one too, and its interpreter (the
  // parent's, with the child's pid) is returned; else nullptr.
  const python::Interpreter* on_fork(pid_t parent, pid_t child);
  // A process found already running (adopted with --children or --all)
  // that is a fork of live target `parent` without an exec since (a
  // DataLoader worker that existed before the attach): as on_fork says.
  void forked_before(pid_t child, pid_t parent) {
    if (live_.count(parent)) forked_from_[child] = parent;
  }
  // A followed process became a new program: no longer a target until
  // rediscovered; take_execed() hands it to the session.
  void on_exec(pid_t pid);
  void on_exit(pid_t pid);
  std::vector<pid_t> take_execed();
  // Exits seen by polling (an exit record dropped): every process alive by
  // our book that `exists` says is gone, now marked exited.
  std::vector<pid_t> reap(const std::function<bool(pid_t)>& exists);

  bool alive(pid_t pid) const;
  bool any_alive() const;
  // Reported on (alive) and with probes: what pollers keep working for.
  bool live_and_alive(pid_t pid) const { return alive(pid) && live_.count(pid); }
  const python::Interpreter* live(pid_t pid) const;
  std::vector<pid_t> live_pids() const;        // every target with probes
  std::vector<pid_t> live_alive_pids() const;  // ...not exited
  std::size_t live_count() const { return live_.size(); }
  std::size_t processes() const { return alive_.size(); }  // every process reported on
  // Forked-from chain of a process (parent first, at most 8): the images
  // whose code objects it shares.
  std::vector<pid_t> ancestors(pid_t pid) const;

  // Thread-state keys.
  void set_tsd(pid_t pid, const python::TsdLookup& tsd) { tsd_[pid] = tsd; }
  void drop_tsd(pid_t pid) { tsd_.erase(pid); }
  const python::TsdLookup* tsd(pid_t pid) const;
  // Targets whose thread states BPF takes from the lt_tstates map, alive.
  std::vector<pid_t> tstate_map_targets() const;
  // Forked children whose inherited key is not re-checked yet.
  std::vector<pid_t> unproven() const;
  void proven(pid_t pid) { unproven_.erase(pid); }
  // A target without a key yet: unproven until `until_ns` (monotonic).
  void await_tsd(pid_t pid, std::uint64_t until_ns) { unproven_[pid] = {.tries = 0, .until_ns = until_ns}; }
  // One more failed re-check at `now_ns`: false when the tries or the time
  // are spent (the process is then no longer unproven; the caller stops
  // sampling it). An awaited target whose interpreter is `not_yet`
  // initialised is looked for as long as it lives (a start-up held up
  // longer than the time: an LD_PRELOAD constructor sleeping 7 s).
  bool retry_unproven(pid_t pid, std::uint64_t now_ns, bool not_yet = false);

 private:
  std::map<pid_t, bool> alive_;
  std::map<pid_t, python::Interpreter> live_;
  std::map<pid_t, pid_t> forked_from_;  // child -> parent, same image
  std::map<pid_t, python::TsdLookup> tsd_;
  struct Unproven {
    int tries = 0;               // re-checks left (a forked child)...
    std::uint64_t until_ns = 0;  // ...or re-checked until then (an exec'd one)
  };
  std::map<pid_t, Unproven> unproven_;
  std::vector<pid_t> execed_;
};

}  // namespace lt
