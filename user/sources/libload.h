// Library-load source (bpf/libload.bpf.c): an entry uprobe on a held
// CPython's dynamic loader (_dl_debug_state), scoped to that process, that
// stops its thread with a SIGURG once a dlopen's objects are mapped, so the
// holder can put the probes on those libraries in before any of their code
// runs (docs/design-exec-hold.md).  The same probe, on a target that is
// not held, tells the drain loop of each load (notify()), so that probes
// waiting for a library are tried then, not on a timer.
//
// One probe per held process, not one per loader file for all: a probe on
// every process mapping the loader costs each of them a breakpoint page
// copied and a trap at each exec (bench/library_hold.py: +70 us per exec
// of /bin/true, 10%).  A scoped probe is installed in its process only.  It
// is a uprobe_multi link where the kernel has them: a perf-event uprobe's
// release waits for an RCU grace period (~0.2 s) under the mutex that the
// next registration needs, which put the next job's exec hold behind the
// last one's release (+182 ms per job).  Releases run on a thread of their
// own either way.
#pragma once
#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "user/sources/bpf_owner.h"

struct lt_libload;
struct ring_buffer;

namespace lt {

// Its skeleton's destroy, defined where the skeleton is (user/sources/libload.cpp).
template <>
void SkeletonDestroy<lt_libload>::operator()(lt_libload* s) const;

// Where a process's dynamic loader is and what to probe in it.
struct LoaderSite {
  std::string open_path;           // a path that opens the loader the process runs
  std::uint64_t offset = 0;        // file offset of _dl_debug_state's entry
  std::int64_t r_debug_delta = 0;  // &_r_debug - &_dl_debug_state (0: unknown)
};

// From /proc/PID/auxv (AT_BASE) and the loader's symbols; an empty
// open_path: none (a static executable) or unreadable.
LoaderSite find_loader_site(pid_t pid);

class LibLoadSource {
 public:
  // Throws lt::Error(bpf|permission).
  LibLoadSource();
  ~LibLoadSource();
  LibLoadSource(const LibLoadSource&) = delete;
  LibLoadSource& operator=(const LibLoadSource&) = delete;

  // pid's library loads stop it from now on (while it is traced).  False
  // when its loader cannot be probed: it is then not held for them.
  bool watch(pid_t pid) { return arm(pid, true); }
  // No more: the gate closes at once; the probe is released off this thread.
  void unwatch(pid_t pid) { disarm(pid, true); }
  bool watching(pid_t pid) const {
    auto it = probes_.find(pid);
    return it != probes_.end() && it->second.hold;
  }
  // pid's library loads are told through loads_fd() (a ring of tgids) from
  // now on, held or not.  False when its loader cannot be probed.
  bool notify(pid_t pid) { return arm(pid, false); }
  void unnotify(pid_t pid) { disarm(pid, false); }
  bool notifying(pid_t pid) const {
    auto it = probes_.find(pid);
    return it != probes_.end() && it->second.notify;
  }
  // Readable (an epoll fd) when loads were told; take_loads() reads them.
  int loads_wait_fd() const;
  std::vector<pid_t> take_loads();  // each pid once, in the order told

  // For the holder: the ring of wake-ups (one per SIGURG sent) and the map
  // of threads signalled (tid -> 1; take an entry to know a SIGURG is ours).
  int wakeup_fd() const;
  int signalled_fd() const;

 private:
  struct Probe {
    OwnedFd multi;  // a uprobe_multi link
    LinkPtr perf;   // or a perf-event uprobe (kernels without them)
    std::int64_t r_debug_delta = 0;
    bool hold = false, notify = false;  // what it is there for (lt_lib_waits, lt_lib_notify)
  };
  bool arm(pid_t pid, bool hold);
  void disarm(pid_t pid, bool hold);
  void release(std::map<pid_t, Probe>::iterator it);
  void reap();  // the releasing thread

  SkeletonPtr<lt_libload> skel_;
  ring_buffer* loads_ = nullptr;  // lt_lib_loads
  std::vector<pid_t> told_;       // take_loads()' scratch
  bool multi_;
  std::map<pid_t, Probe> probes_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Probe> to_release_;
  bool stopping_ = false;
  std::thread releaser_;
};

}  // namespace lt
