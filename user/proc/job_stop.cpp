#include "user/proc/job_stop.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>

namespace lt::proc {

namespace {

// One eventfd for the process, never closed (a handler may be writing to
// it as the holder goes), and whether a holder reads it.
std::atomic<int> g_fd{-1};
std::atomic<bool> g_holder{false};
// The deferrals alive, and kStopPending once a stop waits for them: one
// word, so that a stop asked as the last one ends is neither lost nor
// done twice.
constexpr unsigned kStopPending = 1u << 31;
std::atomic<unsigned> g_deferrals{0};
std::atomic<JobStopAction> g_action{nullptr};

// The kernel discards a terminal stop sent to an orphaned process group
// (no member's parent in another group of the session: nothing would ever
// continue it), and so do we.  Judged by our parent, as a shell's job is
// (async-signal-safe: system calls only); a parent in our own group (make,
// a script) stands for the group's link to its shell.
bool orphaned_group() {
  const pid_t parent = getppid();
  if (parent <= 1) return true;  // reparented to init (or a subreaper): no shell waits on us
  if (getsid(parent) != getsid(0)) return true;
  return false;
}

void stop_this_process() {
  if (const JobStopAction a = g_action.load()) return a();
  if (orphaned_group()) return;
  kill(getpid(), SIGSTOP);
}

// A stop for the holder to do (it lets go first), or done here.
void ask_holder_or_stop() {
  const int fd = g_fd.load();
  if (fd >= 0 && g_holder.load()) {
    const std::uint64_t one = 1;
    ssize_t r = write(fd, &one, sizeof one);  // full: already readable
    (void)r;
  } else {
    job_stop_now();
  }
}

void on_job_stop(int) {
  const int saved = errno;  // a signal handler leaves errno as it found it
  ask_holder_or_stop();
  errno = saved;
}

int process_fd() {
  int fd = g_fd.load();
  if (fd >= 0) return fd;
  const int made = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (made < 0) return -1;
  if (g_fd.compare_exchange_strong(fd, made)) return made;
  close(made);  // another thread made it first
  return fd;
}

}  // namespace

void install_job_stop_handler() {
  if (process_fd() < 0) return;  // no way to reach a holder: the default stop
  // SIGTSTP only: SIGTTOU (a background write with `stty tostop`) would
  // come back at every retry of a write the holder itself makes, and
  // SIGTTIN is for readers of the terminal, which we are not.
  struct sigaction old {};
  // Ignored when we started (nohup-like launchers, a shell without job
  // control): left ignored.
  if (sigaction(SIGTSTP, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) return;
  struct sigaction sa {};
  sa.sa_handler = on_job_stop;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTSTP, &sa, nullptr);
}

int register_job_stop() {
  const int fd = process_fd();
  bool none = false;
  if (fd < 0 || !g_holder.compare_exchange_strong(none, true)) return -1;
  // A stop asked as the last holder went is still readable: this one does it.
  return fd;
}

void unregister_job_stop(int fd) {
  if (fd < 0) return;
  g_holder.store(false);
  // Asked as the holder went: nobody else will stop us.
  if (job_stop_asked(fd)) job_stop_now();
}

bool job_stop_asked(int fd) {
  std::uint64_t n = 0;
  return fd >= 0 && read(fd, &n, sizeof n) == static_cast<ssize_t>(sizeof n) && n > 0;
}

void job_stop_now() {
  for (unsigned s = g_deferrals.load();;) {
    if ((s & ~kStopPending) != 0) {
      if (g_deferrals.compare_exchange_weak(s, s | kStopPending)) return;  // the last deferral asks again
      continue;
    }
    if (s != 0 && !g_deferrals.compare_exchange_weak(s, 0)) continue;  // a pending stop: this call is it
    return stop_this_process();
  }
}

JobStopDeferral::JobStopDeferral() {
  g_deferrals.fetch_add(1);
}

JobStopDeferral::~JobStopDeferral() {
  unsigned left = g_deferrals.fetch_sub(1) - 1;
  // The stop waited for this one: asked again, of the holder first, which
  // lets go of what it took meanwhile.
  if (left == kStopPending && g_deferrals.compare_exchange_strong(left, 0)) ask_holder_or_stop();
}

JobStopAction set_job_stop_action_for_tests(JobStopAction a) {
  return g_action.exchange(a);
}

}  // namespace lt::proc
