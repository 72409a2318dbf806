#include "user/collector/target_holder.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>

#include "user/proc/exec_hold.h"
#include "user/proc/exit_hold.h"
#include "user/proc/job_discovery.h"
#include "user/sources/proctrack.h"

namespace lt {

namespace {

void signal_fd(int fd) {
  const std::uint64_t one = 1;
  ssize_t w = write(fd, &one, sizeof one);
  (void)w;  // an eventfd at its maximum is readable already
}

void clear_fd(int fd) {
  std::uint64_t n;
  ssize_t r = read(fd, &n, sizeof n);
  (void)r;
}

// The longest a CPython waits at its exec for the session (a backstop:
// adoption takes ~5 ms, ~50 ms on a loaded machine).
constexpr auto kLongestExecHold = std::chrono::seconds(10);

int collect(void* ctx, void* data, std::size_t size) {
  std::uint64_t value = 0;
  if (size >= sizeof value) {
    std::memcpy(&value, data, sizeof value);
    static_cast<std::vector<std::uint64_t>*>(ctx)->push_back(value);
  }
  return 0;
}

}  // namespace

TargetHolder::TargetHolder(int finalize_ring_fd, int exec_ring_fd, int exec_skip_fd, bool verbose,
                           std::vector<std::pair<std::string, std::string>> adopt_env, bool hold_any_python)
    : finalize_ring_fd_(finalize_ring_fd),
      exec_ring_fd_(exec_ring_fd),
      exec_skip_fd_(exec_skip_fd),
      verbose_(verbose),
      adopt_env_(std::move(adopt_env)),
      hold_any_python_(hold_any_python) {
  drain_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  release_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (drain_fd_ >= 0 && stop_fd_ >= 0 && release_fd_ >= 0) thread_ = std::thread([this] { run(); });
}

TargetHolder::~TargetHolder() {
  if (thread_.joinable()) {
    signal_fd(stop_fd_);
    thread_.join();
  }
  for (int fd : {drain_fd_, stop_fd_, release_fd_})
    if (fd >= 0) close(fd);
}

std::vector<TargetHolder::ExecVerdict> TargetHolder::take_exec_verdicts() {
  std::lock_guard lock(mutex_);
  return std::exchange(verdicts_, {});
}

void TargetHolder::exec_adopted(pid_t pid) {
  {
    std::lock_guard lock(mutex_);
    adopted_.push_back(pid);
  }
  signal_fd(release_fd_);
}

void TargetHolder::verdict(pid_t pid, bool held, bool python, bool followed, bool matched) {
  {
    std::lock_guard lock(mutex_);
    verdicts_.push_back({pid, held, python, followed, matched});
  }
  // Only a held process waits for the drain; the others are taken at its
  // next read (a storm of execs must not wake it each time).
  if (held) signal_fd(drain_fd_);
}

void TargetHolder::run() {
  // Not allowed (a container without CAP_SYS_NICE): the drain's nice -10,
  // inherited, is what there is.
  sched_param rt{};
  rt.sched_priority = 1;
  pthread_setschedparam(pthread_self(), SCHED_FIFO, &rt);

  std::vector<std::uint64_t> finalizing, execed;
  ring_buffer* ring = ring_buffer__new(finalize_ring_fd_, &collect, &finalizing, nullptr);
  if (!ring || (exec_ring_fd_ >= 0 && ring_buffer__add(ring, exec_ring_fd_, &collect, &execed) != 0)) {
    if (verbose_) std::fprintf(stderr, "ltrace-bpf: no holds at exec or exit: the wake-up rings cannot be read\n");
    if (ring) ring_buffer__free(ring);
    return;
  }
  proc::ExitHolds exits;
  proc::ExecHolds execs;
  proc::ExecClassifier images;
  std::map<pid_t, std::uint64_t> waiting;                         // at their exit: pid -> reads begun when it stopped
  std::map<pid_t, std::chrono::steady_clock::time_point> handed;  // held at exec, given to the session: since
  for (;;) {
    pollfd fds[3] = {{ring_buffer__epoll_fd(ring), POLLIN, 0}, {stop_fd_, POLLIN, 0}, {release_fd_, POLLIN, 0}};
    // While a process is held, every ms: its stops (an exit, a signal on
    // its way in) wait for us; while one steps to its library, every
    // 20 us: the loader's ~60 system calls are microseconds apart, and a
    // sleep (never a spin: we are real-time) between them costs the
    // target nothing.
    const timespec step_wait{0, 20'000}, hold_wait{0, 1'000'000};
    const timespec* wait = execs.stepping() ? &step_wait : exits.any() || execs.any() ? &hold_wait : nullptr;
    if (::ppoll(fds, 3, wait, nullptr) < 0 && errno != EINTR) break;
    if (fds[1].revents & POLLIN) break;
    ring_buffer__consume(ring);
    for (std::uint64_t p : execed) {
      // Looked at before it is touched: a process that is not a CPython
      // is never stopped.
      const auto pid = static_cast<pid_t>(p & 0xffffffffu);
      const bool followed = !(p & ProcTrackSource::kExecUnfollowed);
      const proc::ExecImage image = images.classify(pid);
      // A CPython we do not follow: ours if its environment says so (or
      // any, with --all); another's is never stopped.
      const bool matched =
          !followed && image.kind != proc::ExecImage::Kind::not_python && proc::environ_has(pid, adopt_env_);
      if (!followed && image.kind != proc::ExecImage::Kind::not_python && !matched && !hold_any_python_) continue;
      if (image.kind == proc::ExecImage::Kind::not_python) {
        execs.release(pid);  // held for an exec before this one
        unfollowed_.erase(pid);
        if (followed) verdict(pid, false, false);  // an unfollowed one: nobody waits for a word
        if (exec_skip_fd_ >= 0 && image.ino) {
          const std::uint64_t key[2] = {image.dev, image.ino};
          const std::uint8_t one = 1;
          bpf_map_update_elem(exec_skip_fd_, key, &one, BPF_ANY);
        }
      } else if (!execs.hold(pid, image.library)) {
        if (verbose_)
          std::fprintf(stderr, "ltrace-bpf: pid %d: exec'd a CPython; not held (gone, or traced by someone else)\n",
                       pid);
        if (followed) verdict(pid, false, true);
      } else if (!followed) {
        unfollowed_[pid] = matched;
      } else {
        unfollowed_.erase(pid);
      }
    }
    execed.clear();
    for (std::uint64_t pid_tgid : finalizing) {
      const auto pid = static_cast<pid_t>(pid_tgid >> 32), tid = static_cast<pid_t>(pid_tgid & 0xffffffffu);
      const bool held = exits.hold(pid, tid, /*pause=*/true);
      if (verbose_)
        std::fprintf(stderr, "ltrace-bpf: pid %d: finalizing; %s\n", pid,
                     held ? "its exit waits until its last samples are read"
                          : "not held at its exit (gone, or traced by someone else)");
    }
    finalizing.clear();
    if (fds[2].revents & POLLIN) {
      clear_fd(release_fd_);
      std::vector<pid_t> adopted;
      {
        std::lock_guard lock(mutex_);
        adopted.swap(adopted_);
      }
      for (pid_t pid : adopted) {
        if (verbose_ && execs.held(pid))
          std::fprintf(stderr, "ltrace-bpf: pid %d: probes in; released after %.1f ms held\n", pid, execs.held_ms(pid));
        execs.release(pid);
        handed.erase(pid);
      }
    }
    // A job never waits on us for long: a hold the session has not ended
    // (a record lost, a slow attach) ends by itself.
    for (auto it = handed.begin(); it != handed.end();) {
      if (std::chrono::steady_clock::now() - it->second < kLongestExecHold) {
        ++it;
        continue;
      }
      std::fprintf(stderr, "ltrace-bpf: pid %d: released after %.0f ms held at its exec, its probes not confirmed\n",
                   it->first, execs.held_ms(it->first));
      execs.release(it->first);
      it = handed.erase(it);
    }
    for (pid_t pid : execs.poll()) {
      if (verbose_)
        std::fprintf(stderr,
                     "ltrace-bpf: pid %d: exec'd a CPython; held until its probes are in (ready after %d system calls, "
                     "%.1f ms)\n",
                     pid, execs.steps(pid), execs.held_ms(pid));
      const auto u = unfollowed_.find(pid);
      verdict(pid, true, true, u == unfollowed_.end(), u != unfollowed_.end() && u->second);
      if (u != unfollowed_.end()) unfollowed_.erase(u);
      handed[pid] = std::chrono::steady_clock::now();
    }
    if (!exits.any()) continue;
    for (pid_t pid : exits.poll())
      if (waiting.emplace(pid, begun_.load()).second) signal_fd(drain_fd_);
    for (auto it = waiting.begin(); it != waiting.end();) {
      // A read that began after the stop has ended: it had every record.
      if (ended_.load() <= it->second) {
        ++it;
        continue;
      }
      exits.go_on(it->first);
      if (verbose_ && !exits.held(it->first))
        std::fprintf(stderr, "ltrace-bpf: pid %d: read at its exit, released\n", it->first);
      it = waiting.erase(it);
    }
  }
  exits.release_all();
  execs.release_all();
  ring_buffer__free(ring);
}

}  // namespace lt
