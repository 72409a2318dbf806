// The thread that holds targets where the session must act before they go
// on: at an exec of a CPython until its probes are in (proc::ExecHolds),
// and at a finalizing interpreter's exit until the drain has read its last
// records (proc::ExitHolds).
//
// Both windows are short and come unannounced (a small script finalizes in
// a few ms; a new CPython starts running Python in ~15 ms): the drain loop,
// busy with a chore or waiting for a CPU on a loaded machine, came too late
// (CI: "not held", <unknown> frames; issue 32: early actions lost). So a
// thread of its own does it, asleep on the BPF wake-up rings (Py_FinalizeEx
// entries, exec's of followed processes), under SCHED_FIFO where allowed (it
// runs for microseconds at a time, so a real-time priority costs the job
// nothing and no CFS neighbour delays it); ptrace ties each tracee to this
// thread.
//
// Exits: a finalizing thread is paused at once (finalization frees the code
// objects its samples name) and stops again at its exit; each time the
// holder asks the drain for a read (drain_fd() becomes readable) and lets
// the thread go on once a read that began after the stop has ended.
//
// Execs: the holder looks at the new image without stopping it; a CPython
// is held until it can take its probes, then handed to the session as an
// ExecVerdict (so is every other exec: "not held"); the session adopts it
// and says exec_adopted(), and the holder lets it go -- or, when probes
// still wait for a library it has not loaded (libtorch for ops), keeps it
// seized while it runs: each library load stops it (user/sources/libload.h)
// and is handed to the session (take_library_loads()), which puts the
// probes in and says library_load_done().
#pragma once
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace lt {

// LibLoadSource's ring of wake-ups and map of SIGURGs sent, or -1 (no
// holds at library loads).
struct LibraryLoadFds {
  int wakeup_fd = -1, signalled_fd = -1;
};

class TargetHolder {
 public:
  struct ExecVerdict {
    pid_t pid = 0;
    bool held = false;     // paused, ready for its probes: say exec_adopted(pid) once they are in
    bool python = false;   // a CPython (held, or not: gone, traced by someone else)
    bool followed = true;  // false: a process we do not follow; no exec record pairs with it
    bool matched = false;  // ...whose environment has the session's adopt_env
  };

  // `finalize_ring_fd`: the BPF ring of pid_tgids entering Py_FinalizeEx;
  // `exec_ring_fd`: the ring of pids of followed processes that exec'd;
  // `exec_skip_fd`: the map where it notes executables that are no CPython
  // (BPF then wakes nobody for them), or -1.
  // Of the CPythons we do not follow (every exec is watched when asked),
  // those whose environment has `adopt_env` are held, and with
  // `hold_any_python` (--all) every one.
  TargetHolder(int finalize_ring_fd, int exec_ring_fd, int exec_skip_fd, bool verbose,
               std::vector<std::pair<std::string, std::string>> adopt_env = {}, bool hold_any_python = false,
               LibraryLoadFds loads = LibraryLoadFds());
  TargetHolder(const TargetHolder&) = delete;
  TargetHolder& operator=(const TargetHolder&) = delete;
  ~TargetHolder();  // lets every held process go

  // Readable when the drain has work from us: a held exit waits for a
  // read, or exec verdicts wait to be taken.
  int drain_fd() const { return drain_fd_; }
  // The drain brackets each read of the ring with these.
  void read_begins() { begun_.fetch_add(1); }
  void read_ends() { ended_.fetch_add(1); }

  // When `pid`'s interpreter went on past its hold at Py_FinalizeEx (its
  // last records before it were read then), or 0.  What runs after that
  // (threading._shutdown, atexit handlers) is freed before the exit hold's
  // read; the drain asks from its own thread.
  std::uint64_t shutting_down_since(pid_t pid) const;

  // Every exec the holder has decided on since the last call, in order.
  std::vector<ExecVerdict> take_exec_verdicts();
  // The session is done with a held exec (adopted or refused): let it go,
  // or with `await_libraries`, let it run on seized until a library load.
  void exec_adopted(pid_t pid, bool await_libraries = false);
  // Processes paused at a library load since the last call.
  std::vector<pid_t> take_library_loads();
  // The session is done with a library load: run on to the next one
  // (`await_more`) or go, no longer held.
  void library_load_done(pid_t pid, bool await_more);

 private:
  struct Held;  // the holder thread's own state
  void run();
  void on_execs(Held& h, const std::vector<std::uint64_t>& execed);
  void on_finalizing(Held& h, const std::vector<std::uint64_t>& finalizing);
  void release_adopted(Held& h);
  void hand_library_loads(Held& h);
  void expire_exec_holds(Held& h);
  void hand_ready_execs(Held& h);
  void release_read_exits(Held& h);
  void let_go_for_job_stop(Held& h);
  void verdict(pid_t pid, bool held, bool python, bool followed = true, bool matched = false);

  int finalize_ring_fd_, exec_ring_fd_, exec_skip_fd_;
  LibraryLoadFds lib_;
  bool verbose_;
  std::vector<std::pair<std::string, std::string>> adopt_env_;
  bool hold_any_python_;
  int drain_fd_ = -1;    // eventfd: the holder -> the drain
  int stop_fd_ = -1;     // eventfd: the destructor -> the holder
  int release_fd_ = -1;  // eventfd: exec_adopted() -> the holder
  std::atomic<std::uint64_t> begun_{0}, ended_{0};
  mutable std::mutex mutex_;  // guards the queues and shutting_down_
  std::vector<ExecVerdict> verdicts_;
  enum class Next { release, await_libraries, resume };
  std::vector<std::pair<pid_t, Next>> adopted_;
  std::vector<pid_t> loads_;
  std::map<pid_t, std::uint64_t> shutting_down_;  // until released at its exit
  std::thread thread_;
};

}  // namespace lt
