#include "user/collector/target_holder.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>

#include "user/collector/synthesized_records.h"
#include "user/proc/exec_hold.h"
#include "user/proc/exit_hold.h"
#include "user/proc/job_discovery.h"
#include "user/proc/job_stop.h"
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
// The longest a CPython runs seized awaiting its libraries (a backstop;
// the session gives up on its own first, see Session::kLibraryWaitNs).
constexpr auto kLongestLibraryWait = std::chrono::seconds(120);

int ignore(void*, void*, std::size_t) {
  return 0;  // a wake-up: the stops themselves are taken from waitpid
}

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
                           std::vector<std::pair<std::string, std::string>> adopt_env, bool hold_any_python,
                           LibraryLoadFds loads)
    : finalize_ring_fd_(finalize_ring_fd),
      exec_ring_fd_(exec_ring_fd),
      exec_skip_fd_(exec_skip_fd),
      lib_(loads),
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

void TargetHolder::exec_adopted(pid_t pid, bool await_libraries) {
  {
    std::lock_guard lock(mutex_);
    adopted_.emplace_back(pid, await_libraries && lib_.signalled_fd >= 0 ? Next::await_libraries : Next::release);
  }
  signal_fd(release_fd_);
}

std::vector<pid_t> TargetHolder::take_library_loads() {
  std::lock_guard lock(mutex_);
  return std::exchange(loads_, {});
}

void TargetHolder::library_load_done(pid_t pid, bool await_more) {
  {
    std::lock_guard lock(mutex_);
    adopted_.emplace_back(pid, await_more ? Next::resume : Next::release);
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

// The holder thread's own state (no lock: only that thread touches it).
struct TargetHolder::Held {
  proc::ExitHolds exits;
  proc::ExecHolds execs;
  proc::ExecClassifier images;
  std::map<pid_t, std::uint64_t> waiting;                           // at their exit: pid -> reads begun when it stopped
  std::map<pid_t, std::chrono::steady_clock::time_point> handed;    // held at exec, given to the session: since
  std::map<pid_t, bool> unfollowed;                                 // held, met by the watch of every exec: -> matched
  std::map<pid_t, std::chrono::steady_clock::time_point> awaiting;  // seized until a library load: since
  std::map<pid_t, std::chrono::steady_clock::time_point> at_load;   // paused at one, handed to the session: since
  struct Paused {
    int loads = 0;
    double ms = 0;
  };
  std::map<pid_t, Paused> paused;  // what the library loads cost each awaiting target (for -v)
  void unpause(pid_t pid) {
    if (auto it = at_load.find(pid); it != at_load.end()) {
      paused[pid].ms +=
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - it->second).count();
      at_load.erase(it);
    }
  }
};

void TargetHolder::run() {
  // Not allowed (a container without CAP_SYS_NICE): the drain's nice -10,
  // inherited, is what there is.
  sched_param rt{};
  rt.sched_priority = 1;
  pthread_setschedparam(pthread_self(), SCHED_FIFO, &rt);
  // A line this thread writes to a terminal from the background under
  // `stty tostop` must not stop the tracer (SIGTTOU) while it holds a
  // process: with the signal blocked here, the kernel lets the write through.
  sigset_t ttou;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  pthread_sigmask(SIG_BLOCK, &ttou, nullptr);

  std::vector<std::uint64_t> finalizing, execed;
  ring_buffer* ring = ring_buffer__new(finalize_ring_fd_, &collect, &finalizing, nullptr);
  if (!ring || (exec_ring_fd_ >= 0 && ring_buffer__add(ring, exec_ring_fd_, &collect, &execed) != 0) ||
      (lib_.wakeup_fd >= 0 && ring_buffer__add(ring, lib_.wakeup_fd, &ignore, nullptr) != 0)) {
    if (verbose_) std::fprintf(stderr, "ltrace-bpf: no holds at exec or exit: the wake-up rings cannot be read\n");
    if (ring) ring_buffer__free(ring);
    return;
  }
  Held h;
  // Ctrl-Z: what we hold is let go before we stop (user/proc/job_stop.h).
  const int job_stop_fd = proc::register_job_stop();
  for (;;) {
    pollfd fds[4] = {{ring_buffer__epoll_fd(ring), POLLIN, 0},
                     {stop_fd_, POLLIN, 0},
                     {release_fd_, POLLIN, 0},
                     {job_stop_fd, POLLIN, 0}};
    // While a process is held, every ms: its stops (an exit, a signal on
    // its way in) wait for us; while one steps to its library, every
    // 20 us: the loader's ~60 system calls are microseconds apart, and a
    // sleep (never a spin: we are real-time) between them costs the
    // target nothing.
    const timespec step_wait{0, 20'000}, hold_wait{0, 1'000'000};
    const timespec* wait = h.execs.stepping() ? &step_wait : h.exits.any() || h.execs.any() ? &hold_wait : nullptr;
    if (::ppoll(fds, 4, wait, nullptr) < 0 && errno != EINTR) break;
    if (fds[1].revents & POLLIN) break;
    if ((fds[3].revents & POLLIN) && proc::job_stop_asked(job_stop_fd)) let_go_for_job_stop(h);
    ring_buffer__consume(ring);
    on_execs(h, std::exchange(execed, {}));
    on_finalizing(h, std::exchange(finalizing, {}));
    if (fds[2].revents & POLLIN) release_adopted(h);
    expire_exec_holds(h);
    hand_ready_execs(h);
    hand_library_loads(h);
    release_read_exits(h);
  }
  h.exits.release_all();
  h.execs.release_all();
  proc::unregister_job_stop(job_stop_fd);
  ring_buffer__free(ring);
}

// A job-control stop (Ctrl-Z): every process held under ptrace goes on
// unheld, then the tracer stops.  A held exit then goes unread (its last
// samples may be lost: said), a held exec runs before its probes are in
// (the session adopts it late, as it would an exec it never held).
void TargetHolder::let_go_for_job_stop(Held& h) {
  const std::size_t exits = h.exits.count(), execs = h.execs.count();
  h.exits.release_all();
  h.execs.release_all();
  h.waiting.clear();
  h.handed.clear();
  h.awaiting.clear();
  h.at_load.clear();
  h.paused.clear();
  h.unfollowed.clear();
  if (exits + execs > 0)
    std::fprintf(stderr,
                 "ltrace-bpf: stopped by job control; first let go of %zu process(es) held at their exit and %zu at "
                 "their exec: a stopped tracer would keep them stopped (their last records may be missing)\n",
                 exits, execs);
  proc::job_stop_now();  // or, while a call into a target is in flight, asked of us again as it ends
}

// Execs from the ring: each image looked at before it is touched, so a
// process that is not a CPython is never stopped.
void TargetHolder::on_execs(Held& h, const std::vector<std::uint64_t>& execed) {
  for (std::uint64_t p : execed) {
    const auto pid = static_cast<pid_t>(p & 0xffffffffu);
    const bool followed = !(p & ProcTrackSource::kExecUnfollowed);
    const proc::ExecImage image = h.images.classify(pid);
    const bool python = image.kind != proc::ExecImage::Kind::not_python;
    // A CPython we do not follow: ours if its environment says so (or
    // any, with --all); another's is never stopped.
    const bool matched = !followed && python && proc::environ_has(pid, adopt_env_);
    if (!followed && python && !matched && !hold_any_python_) continue;
    if (!python) {
      h.execs.release(pid);  // held for an exec before this one
      h.unfollowed.erase(pid);
      if (followed) verdict(pid, false, false);  // an unfollowed one: nobody waits for a word
      if (exec_skip_fd_ >= 0 && image.ino) {
        const std::uint64_t key[2] = {image.dev, image.ino};
        const std::uint8_t one = 1;
        bpf_map_update_elem(exec_skip_fd_, key, &one, BPF_ANY);
      }
    } else if (!h.execs.hold(pid, image.library)) {
      if (verbose_)
        std::fprintf(stderr, "ltrace-bpf: pid %d: exec'd a CPython; not held (gone, or traced by someone else: %s)\n",
                     pid, std::strerror(h.execs.last_error()));
      if (followed) verdict(pid, false, true);
    } else if (!followed) {
      h.unfollowed[pid] = matched;
    } else {
      h.unfollowed.erase(pid);
    }
  }
}

// Interpreters entering Py_FinalizeEx: each held at its exit until a read
// of the ring has taken its last records.
void TargetHolder::on_finalizing(Held& h, const std::vector<std::uint64_t>& finalizing) {
  for (std::uint64_t pid_tgid : finalizing) {
    const auto pid = static_cast<pid_t>(pid_tgid >> 32), tid = static_cast<pid_t>(pid_tgid & 0xffffffffu);
    // Still seized awaiting its libraries (a CPython that never loaded
    // them): that ends here, so that its exit can be held.
    if (h.execs.awaiting(pid)) {
      h.execs.release(pid);
      h.awaiting.erase(pid);
      h.at_load.erase(pid);
      h.paused.erase(pid);
    }
    const bool held = h.exits.hold(pid, tid, /*pause=*/true);
    if (verbose_)
      std::fprintf(stderr, "ltrace-bpf: pid %d: finalizing; %s\n", pid,
                   held ? "its exit waits until its last samples are read"
                        : "not held at its exit (gone, or traced by someone else)");
  }
}

std::uint64_t TargetHolder::shutting_down_since(pid_t pid) const {
  std::lock_guard lock(mutex_);
  const auto it = shutting_down_.find(pid);
  return it == shutting_down_.end() ? 0 : it->second;
}

// The session is done with these held execs: they go on.
void TargetHolder::release_adopted(Held& h) {
  clear_fd(release_fd_);
  std::vector<std::pair<pid_t, Next>> adopted;
  {
    std::lock_guard lock(mutex_);
    adopted.swap(adopted_);
  }
  for (auto [pid, next] : adopted) {
    h.handed.erase(pid);
    if (next == Next::resume) {
      h.unpause(pid);
      h.execs.resume(pid);
      continue;
    }
    if (next == Next::await_libraries && h.execs.held(pid) && !h.execs.awaiting(pid)) {
      if (verbose_)
        std::fprintf(stderr, "ltrace-bpf: pid %d: probes in after %.1f ms held; runs on until its libraries load\n",
                     pid, h.execs.held_ms(pid));
      const int signalled = lib_.signalled_fd;
      h.execs.await_libraries(pid, [signalled](pid_t tid) {
        const std::uint32_t key = static_cast<std::uint32_t>(tid);
        return bpf_map_delete_elem(signalled, &key) == 0;  // there: we sent it
      });
      h.awaiting[pid] = std::chrono::steady_clock::now();
      continue;
    }
    h.unpause(pid);
    if (verbose_ && h.execs.held(pid) && h.awaiting.count(pid))
      std::fprintf(stderr,
                   "ltrace-bpf: pid %d: done awaiting its libraries after %.1f ms: stopped at %d library loads, "
                   "%.1f ms in all\n",
                   pid, h.execs.held_ms(pid), h.paused[pid].loads, h.paused[pid].ms);
    else if (verbose_ && h.execs.held(pid))
      std::fprintf(stderr, "ltrace-bpf: pid %d: probes in; released after %.1f ms held\n", pid, h.execs.held_ms(pid));
    h.execs.release(pid);
    h.awaiting.erase(pid);
    h.paused.erase(pid);
  }
}

// Processes paused at a library load: the session puts probes in.  And a
// backstop: a process is never seized for ever, nor paused for long.
void TargetHolder::hand_library_loads(Held& h) {
  const auto now = std::chrono::steady_clock::now();
  std::vector<pid_t> loads = h.execs.take_loaded();
  if (!loads.empty()) {
    for (pid_t pid : loads) {
      h.at_load[pid] = now;
      ++h.paused[pid].loads;
    }
    {
      std::lock_guard lock(mutex_);
      loads_.insert(loads_.end(), loads.begin(), loads.end());
    }
    signal_fd(drain_fd_);
  }
  for (auto it = h.awaiting.begin(); it != h.awaiting.end();) {
    const pid_t pid = it->first;
    const auto paused = h.at_load.find(pid);
    const bool over = !h.execs.held(pid) || (paused == h.at_load.end() && now - it->second > kLongestLibraryWait) ||
                      (paused != h.at_load.end() && now - paused->second > kLongestExecHold);
    if (!over) {
      ++it;
      continue;
    }
    if (h.execs.held(pid) && verbose_)
      std::fprintf(stderr, "ltrace-bpf: pid %d: released after %.0f ms awaiting its libraries\n", pid,
                   h.execs.held_ms(pid));
    h.execs.release(pid);
    h.at_load.erase(pid);
    h.paused.erase(pid);
    it = h.awaiting.erase(it);
  }
}

// A job never waits on us for long: a hold the session has not ended (a
// record lost, a slow attach) ends by itself.
void TargetHolder::expire_exec_holds(Held& h) {
  for (auto it = h.handed.begin(); it != h.handed.end();) {
    if (std::chrono::steady_clock::now() - it->second < kLongestExecHold) {
      ++it;
      continue;
    }
    std::fprintf(stderr, "ltrace-bpf: pid %d: released after %.0f ms held at its exec, its probes not confirmed\n",
                 it->first, h.execs.held_ms(it->first));
    h.execs.release(it->first);
    it = h.handed.erase(it);
  }
}

// CPythons held at their exec whose libpython is now mapped: the session
// may put their probes in.
void TargetHolder::hand_ready_execs(Held& h) {
  for (pid_t pid : h.execs.poll()) {
    if (verbose_)
      std::fprintf(stderr,
                   "ltrace-bpf: pid %d: exec'd a CPython; held until its probes are in (ready after %d system calls, "
                   "%.1f ms)\n",
                   pid, h.execs.steps(pid), h.execs.held_ms(pid));
    const auto u = h.unfollowed.find(pid);
    verdict(pid, true, true, u == h.unfollowed.end(), u != h.unfollowed.end() && u->second);
    if (u != h.unfollowed.end()) h.unfollowed.erase(u);
    h.handed[pid] = std::chrono::steady_clock::now();
  }
}

// Exits held until a read that began after the stop has ended: it had
// every record of the process.
void TargetHolder::release_read_exits(Held& h) {
  if (!h.exits.any()) return;
  for (pid_t pid : h.exits.poll())
    if (h.waiting.emplace(pid, begun_.load()).second) signal_fd(drain_fd_);
  for (auto it = h.waiting.begin(); it != h.waiting.end();) {
    if (ended_.load() <= it->second) {
      ++it;
      continue;
    }
    h.exits.go_on(it->first);
    {
      std::lock_guard lock(mutex_);
      if (h.exits.held(it->first))
        shutting_down_[it->first] = monotonic_ns();  // paused at Py_FinalizeEx: it goes on to its exit
      else
        shutting_down_.erase(it->first);  // read at its exit: no record of it is still to come
    }
    if (verbose_ && !h.exits.held(it->first))
      std::fprintf(stderr, "ltrace-bpf: pid %d: read at its exit, released\n", it->first);
    it = h.waiting.erase(it);
  }
}

}  // namespace lt
