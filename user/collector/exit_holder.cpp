#include "user/collector/exit_holder.h"

#include <bpf/libbpf.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

#include "user/proc/exit_hold.h"

namespace lt {

namespace {

void signal_fd(int fd) {
  const std::uint64_t one = 1;
  ssize_t w = write(fd, &one, sizeof one);
  (void)w;  // an eventfd at its maximum is readable already
}

int collect(void* ctx, void* data, std::size_t size) {
  std::uint64_t pid_tgid = 0;
  if (size >= sizeof pid_tgid) {
    std::memcpy(&pid_tgid, data, sizeof pid_tgid);
    static_cast<std::vector<std::uint64_t>*>(ctx)->push_back(pid_tgid);
  }
  return 0;
}

}  // namespace

ExitHolder::ExitHolder(int wakeup_map_fd, bool verbose) : wakeup_map_fd_(wakeup_map_fd), verbose_(verbose) {
  drain_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (drain_fd_ >= 0 && stop_fd_ >= 0) thread_ = std::thread([this] { run(); });
}

ExitHolder::~ExitHolder() {
  if (thread_.joinable()) {
    signal_fd(stop_fd_);
    thread_.join();
  }
  if (drain_fd_ >= 0) close(drain_fd_);
  if (stop_fd_ >= 0) close(stop_fd_);
}

void ExitHolder::run() {
  // Not allowed (a container without CAP_SYS_NICE): the drain's nice -10,
  // inherited, is what there is.
  sched_param rt{};
  rt.sched_priority = 1;
  pthread_setschedparam(pthread_self(), SCHED_FIFO, &rt);

  std::vector<std::uint64_t> finalizing;
  ring_buffer* ring = ring_buffer__new(wakeup_map_fd_, &collect, &finalizing, nullptr);
  if (!ring) {
    if (verbose_) std::fprintf(stderr, "ltrace-bpf: no exit holds: the wake-up ring cannot be read\n");
    return;
  }
  proc::ExitHolds holds;
  std::map<pid_t, std::uint64_t> waiting;  // at their exit: pid -> reads begun when it stopped
  for (;;) {
    pollfd fds[2] = {{ring_buffer__epoll_fd(ring), POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    // While a thread is held, every ms: its exit stop, or a signal it
    // stopped for on its way in, waits for us.
    if (poll(fds, 2, holds.any() ? 1 : -1) < 0 && errno != EINTR) break;
    if (fds[1].revents & POLLIN) break;
    ring_buffer__consume(ring);
    for (std::uint64_t pid_tgid : finalizing) {
      const auto pid = static_cast<pid_t>(pid_tgid >> 32), tid = static_cast<pid_t>(pid_tgid & 0xffffffffu);
      const bool held = holds.hold(pid, tid, /*pause=*/true);
      if (verbose_)
        std::fprintf(stderr, "ltrace-bpf: pid %d: finalizing; %s\n", pid,
                     held ? "its exit waits until its last samples are read"
                          : "not held at its exit (gone, or traced by someone else)");
    }
    finalizing.clear();
    if (!holds.any()) continue;
    for (pid_t pid : holds.poll())
      if (waiting.emplace(pid, begun_.load()).second) signal_fd(drain_fd_);
    for (auto it = waiting.begin(); it != waiting.end();) {
      // A read that began after the stop has ended: it had every record.
      if (ended_.load() <= it->second) {
        ++it;
        continue;
      }
      holds.go_on(it->first);
      if (verbose_ && !holds.held(it->first))
        std::fprintf(stderr, "ltrace-bpf: pid %d: read at its exit, released\n", it->first);
      it = waiting.erase(it);
    }
  }
  holds.release_all();
  ring_buffer__free(ring);
}

}  // namespace lt
