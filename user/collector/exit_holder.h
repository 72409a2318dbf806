// The thread that holds finalizing targets at their exit until the drain
// has read their last records (proc::ExitHolds says how and why).
//
// It must seize a thread within that thread's finalization, a few ms for a
// small script: the drain loop, busy with a chore or waiting for a CPU on
// a loaded machine, came too late (CI: "not held", <unknown> frames). So a
// thread of its own does it, asleep on the wake-up ring that the
// Py_FinalizeEx probe writes, under SCHED_FIFO where allowed (it runs for
// microseconds at a time, so a real-time priority costs the job nothing
// and no CFS neighbour delays it); ptrace ties each tracee to this thread.
// A finalizing thread is paused at once (finalization frees the code
// objects its samples name) and stops again at its exit; each time the
// holder asks the drain for a read (drain_fd() becomes readable) and lets
// the thread go on once a read that began after the stop has ended.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <thread>

namespace lt {

class ExitHolder {
 public:
  // `wakeup_map_fd`: the BPF ring of pid_tgids entering Py_FinalizeEx.
  ExitHolder(int wakeup_map_fd, bool verbose);
  ExitHolder(const ExitHolder&) = delete;
  ExitHolder& operator=(const ExitHolder&) = delete;
  ~ExitHolder();  // lets every held thread go

  // Readable when a held target waits at its exit for a read of the ring.
  int drain_fd() const { return drain_fd_; }
  // The drain brackets each read of the ring with these.
  void read_begins() { begun_.fetch_add(1); }
  void read_ends() { ended_.fetch_add(1); }

 private:
  void run();

  int wakeup_map_fd_;
  bool verbose_;
  int drain_fd_ = -1;  // eventfd: the holder -> the drain
  int stop_fd_ = -1;   // eventfd: the destructor -> the holder
  std::atomic<std::uint64_t> begun_{0}, ended_{0};
  std::thread thread_;
};

}  // namespace lt
