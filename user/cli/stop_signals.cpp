#include "user/cli/stop_signals.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "user/proc/job_stop.h"

namespace lt {
namespace {
std::atomic<bool> g_stop{false};
std::atomic<int> g_wakeup_fd{-1};
void on_signal(int) {
  g_stop.store(true);
  wake_loop();
}
}  // namespace

int loop_wakeup_fd() {
  return g_wakeup_fd.load();
}

void wake_loop() {
  const int saved = errno;  // a signal handler must leave errno as it found it
  const int fd = g_wakeup_fd.load();
  if (fd >= 0) {
    const std::uint64_t one = 1;
    ssize_t r = write(fd, &one, sizeof one);  // full (2^64-2 pending): already readable
    (void)r;
  }
  errno = saved;
}

std::atomic<bool>& stop_requested() {
  return g_stop;
}

void install_stop_signals(bool restart) {
  if (g_wakeup_fd.load() < 0) g_wakeup_fd.store(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = restart ? SA_RESTART : 0;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGUSR2, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  // Ctrl-Z lets go of ptrace holds before the tracer stops.
  proc::install_job_stop_handler();
}

}  // namespace lt
