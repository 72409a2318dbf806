#include "user/collector/session.h"

#include <bpf/libbpf.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>
#include <map>
#include <set>

#include "user/cluster/clock_exchange.h"
#include "user/collector/action_tracer.h"
#include "user/collector/stats_sampler.h"
#include "user/collector/target_holder.h"
#include "user/collector/tracers.h"
#include "user/proc/census.h"
#include "user/proc/proc_stats.h"
#include "user/proc/procfs.h"
#include "user/proc/withheld_bound.h"
#include "user/python/symbolizer.h"
#include "user/sources/bpf_errors.h"
#include "user/sources/libload.h"
#include "user/sources/loss_records.h"
#include "user/sources/proctrack.h"
#include "user/sources/uprobe_multi.h"

namespace lt {

namespace {
// How often the drain loop does each of its chores.
// The drain's nap and the thread-state refreshes: LoopCadence
// (session_options.h), cadence().
constexpr std::uint64_t kLivenessNs = 200'000'000;       // exits looked for by polling
constexpr std::uint64_t kPendingAttachNs = 250'000'000;  // op / GPU probes retried
// The longest sleep while no record comes: a backstop for what wakes
// nothing (an exit record lost, a stop flag with no wake fd).
constexpr std::uint64_t kQuietMaxNs = 1'000'000'000;

// The retry interval; LTRACE_BPF_PENDING_ATTACH_MS sets another (the tests
// make the poll too slow to win, so that only a hold can count early ops).
std::uint64_t pending_attach_ns() {
  const char* ms = std::getenv("LTRACE_BPF_PENDING_ATTACH_MS");
  const long v = ms ? std::strtol(ms, nullptr, 10) : 0;
  return v > 0 ? static_cast<std::uint64_t>(v) * 1'000'000 : kPendingAttachNs;
}
constexpr std::uint64_t kWatchNs = 500'000'000;              // --all: new eligible processes
constexpr std::uint64_t kBridgeStartNs = 3'000'000'000;      // attach: an injected bridge's first word
constexpr std::uint64_t kBridgeStartMaxNs = 30'000'000'000;  // ... however loaded the machine
// A CPython held at its exec stays seized awaiting its libraries for at
// most this long (import torch comes in a job's first seconds; after it the
// 250 ms poll is what there is).
constexpr std::uint64_t kLibraryWaitNs = 60'000'000'000;
// 8 MiB at ~280 B/event holds ~30,000 records, >100 ms of a 250k events/s
// burst.  A drain that found more than a tenth of that means we are falling
// behind (a fork storm, a CPU-starved tracer): drain again at once.
constexpr int kBehindRecords = 3000;
// While drains meet code objects never seen before, the loop drains every
// millisecond: a code object is named by reading it from the target when
// first met, and an imported module's body (its <module> code) is freed
// as soon as it has run.  New code objects come in bursts (imports, a
// first validation loop), with known ones between, so the chase goes on
// until kChaseQuietNs pass with none new; then the nap again.  At the
// 20 ms nap, ~2,000 frames of a Lightning job's start-up were <unknown>
// (docs/benchmarks.md).
constexpr int kChaseNewCodeMs = 1;
constexpr std::uint64_t kChaseQuietNs = 200'000'000;

void nap(std::uint64_t ns) {
  struct timespec t = {0, static_cast<long>(ns)};
  nanosleep(&t, nullptr);
}

// Sleeps up to `ms`, or until `fd` (an eventfd) says a read is wanted.
void wait_for_drain(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, ms) > 0 && (p.revents & POLLIN)) {
    std::uint64_t v;
    ssize_t r = read(fd, &v, sizeof v);
    (void)r;
  }
}

// Sleeps up to `ns`, or until one of `fds` (-1: none) is readable; the
// first `eventfds` of them are read empty, the others (epoll fds of rings)
// are left for their readers.
template <std::size_t N>
void wait_for_any(const int (&fds)[N], std::size_t eventfds, std::uint64_t ns) {
  pollfd p[N];
  for (std::size_t i = 0; i < N; ++i) p[i] = {fds[i], POLLIN, 0};
  const int ms = static_cast<int>(std::min<std::uint64_t>((ns + 999'999) / 1'000'000, kQuietMaxNs / 1'000'000));
  if (poll(p, N, ms) <= 0) return;
  for (std::size_t i = 0; i < eventfds; ++i) {
    if (!(p[i].revents & POLLIN)) continue;
    std::uint64_t v;
    ssize_t r = read(fds[i], &v, sizeof v);
    (void)r;
  }
}

// The drain loop must run when the ring buffer fills, even when the targets
// keep every CPU busy: at nice 0 beside 50 busy forked children it waited so
// long between drains that 290,776 of 400,000 action records were dropped;
// at nice -10, none (issue 20, point 8, measured on 2 loaded cores).  It
// costs the targets only the CPU we need to keep up with what they produce.
// Linux applies it to this thread only; without CAP_SYS_NICE it fails and we
// keep the default.
void raise_drain_priority() {
  constexpr int kDrainNice = -10;
  errno = 0;
  int now = getpriority(PRIO_PROCESS, 0);
  if (errno == 0 && now > kDrainNice) setpriority(PRIO_PROCESS, 0, kDrainNice);
}

std::string to_hex(std::uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "%llx", static_cast<unsigned long long>(v));
  return b;
}

template <typename R>
R read_record(std::span<const std::byte> record) {
  R r;
  std::memcpy(static_cast<void*>(&r), record.data(), sizeof r);
  return r;
}

}  // namespace

Session::Session(SessionOptions opts)
    : opts_(std::move(opts)), pending_(pending_attach_ns(), [this](std::size_t tracer, pid_t pid, bool first) {
        return attach_library(*library_tracers_[tracer], pid, first);
      }) {}
Session::~Session() = default;

void Session::prepare() {
  for (pid_t pid : opts_.pids) {
    if (!proc::exists(pid)) throw Error(ExitCode::no_such_process, "no such process: " + std::to_string(pid));
    try {
      prepared_[pid] = python::discover(pid);
    } catch (const Error& e) {
      // A launcher (shell, torchrun wrapper) is fine when we follow children.
      if (!(opts_.children && e.code() == ExitCode::not_python)) throw;
      if (!opts_.launched)  // run's own command before its exec: nothing to say
        notes_.push_back(std::string("pid ") + std::to_string(pid) + ": " + e.what() + "; following its children");
    }
  }
}

Trace Session::run(const std::atomic<bool>& stop) {
  const auto t0 = monotonic_ns();
  start_sources();
  // A followed process that execs a CPython is held until its probes are
  // in, and a target's interpreter starting to finalize is held at its
  // exit until we have read it; the holder wakes us for each. It inherits
  // our priority where a real-time one is not allowed.
  raise_drain_priority();
  LibraryLoadFds loads;
  if (libload_ && library_holds_) loads = {libload_->wakeup_fd(), libload_->signalled_fd()};
  holder_ =
      std::make_unique<TargetHolder>(actions_->wakeup_fd(), proctrack_->exec_wakeup_fd(), proctrack_->exec_skip_fd(),
                                     opts_.verbose, opts_.adopt_env, opts_.all, loads);
  // A CPython started outside the processes we follow (srun's tasks, a
  // rank --job-env names, anything with --all) is held at its exec too.
  if (opts_.all || !opts_.adopt_env.empty()) proctrack_->watch_every_exec();
  adopt_targets();
  std::unique_ptr<ring_buffer, decltype(&ring_buffer__free)> ring(
      ring_buffer__new(proctrack_->events_fd(), &Session::on_ring_record, this, nullptr), &ring_buffer__free);
  if (!ring) throw bpf_error("open the ring buffer", errno);
  mark_attached(t0);
  const double bridge_ms = await_bridges(ring.get(), stop);
  announce_attached(bridge_ms);

  // --duration counts from when the probes are in: on a busy machine
  // attaching can take seconds, and the user asked for SECS of profile.
  const auto attached = monotonic_ns();
  const auto deadline = opts_.duration_s > 0 ? attached + static_cast<std::uint64_t>(opts_.duration_s * 1e9) : 0;
  start_chores(monotonic_ns());
  bool behind = false, quiet = false;
  std::uint64_t chase_until = 0;  // drains every kChaseNewCodeMs until then
  // Eventfds first (read empty on waking), then epoll fds (read by their owners).
  const int wake_fds[] = {holder_->drain_fd(), opts_.wake_fd, ring_buffer__epoll_fd(ring.get()),
                          libload_ ? libload_->loads_wait_fd() : -1};
  while (!stop.load()) {
    // Sleeping. While records come, the loop naps a turn (20 ms) between
    // drains and no record wakes it: waking per record would put our thread
    // on the target's CPU in the middle of its step. After a drain that
    // found none (the targets wait), it sleeps until a record comes (the
    // ring wakes its reader for the first record after a read: LT_RB_SUBMIT),
    // a target waits at its exit for us, the wake fd (a stop, a capture
    // asked for), or a chore is due: a tracer's, on_tick's, the pending
    // attaches', --all's scan, the /proc samples, the file's flush, and
    // once a second at the latest.
    if (behind) {
    } else if (quiet) {
      const auto now = monotonic_ns();
      const auto due = next_due(now, deadline);
      if (due > now) wait_for_any(wake_fds, 2, due - now);
    } else {
      const bool chase = monotonic_ns() < chase_until;
      wait_for_drain(holder_->drain_fd(), chase ? kChaseNewCodeMs : static_cast<int>(cadence().drain_ns / 1'000'000));
    }
    const std::uint64_t codes_before = symbolizer_ ? symbolizer_->codes_met() : 0;
    const int n = drain(ring.get());
    behind = n > kBehindRecords;
    quiet = n == 0;
    if (symbolizer_ && symbolizer_->codes_met() != codes_before) chase_until = monotonic_ns() + kChaseQuietNs;
    if (callback_error_ || (n < 0 && n != -EINTR)) break;
    const auto now = do_chores();
    if (deadline && now >= deadline) break;
    // Every target gone (--all waits for processes still to come). Quiet,
    // the exit records wake us; the poll is a backstop for lost ones.
    if ((quiet || liveness_.due(now)) && !reap_exited() && !watcher_) break;
  }
  for (auto& t : tracers_) t->last_look(monotonic_ns());
  detach(ring.get());
  ring.reset();
  finish();
  if (callback_error_) std::rethrow_exception(callback_error_);
  return std::move(trace_);
}

// The trace file, the first records, and every source the options need.
void Session::start_sources() {
  check_bpf_privileges();
  libbpf_set_print([](libbpf_print_level level, const char* fmt, va_list args) -> int {
    return level == LIBBPF_WARN && std::getenv("LTRACE_BPF_DEBUG") ? vfprintf(stderr, fmt, args) : 0;
  });
  if (!opts_.output_path.empty()) writer_ = std::make_unique<tracefile::TraceWriter>(opts_.output_path);
  emit(host_info_record());
  emit(recorded_reports_record(opts_.reports, monotonic_ns()));
  emit_clock_sync(0);
  proctrack_ = std::make_unique<ProcTrackSource>();
  start_tracers();
  // A CPython held at its exec can wait, seized, for the libraries those
  // probes go on. Without it they are polled for, as for a running job
  // (LTRACE_BPF_NO_LIBRARY_HOLD=1 asks for that: bench/library_hold.py).
  // The same source tells the loop of a running target's loads, so that
  // the probes waiting for a library are tried then (not polled for).
  bool holds = !std::getenv("LTRACE_BPF_NO_LIBRARY_HOLD");
  bool wanted = false;
  for (const Tracer* t : library_tracers_) wanted |= t->holds_at_load();
  if (!library_tracers_.empty()) {
    try {
      libload_ = std::make_unique<LibLoadSource>();
      library_holds_ = holds && wanted;
    } catch (const Error& e) {
      if (opts_.verbose)
        std::fprintf(stderr, "ltrace-bpf: no holds at library loads, and they are polled for: %s\n", e.what());
    }
  }
}

// The action tracer, then each catalogue entry the options ask for; each
// library tracer gets its slot (tried at each adoption, in this order).
void Session::start_tracers() {
  const auto emit_fn = [this](const void* r, std::size_t n) { emit(r, n); };
  tracer_ctx_ = std::unique_ptr<TracerContext>(new TracerContext{
      .opts = opts_,
      .proctrack = *proctrack_,
      .targets = targets_,
      .op_stacks_fd = -1,
      .emit = emit_fn,
      .note = [this](std::string n) { notes_.push_back(std::move(n)); },
      .retarget = [this](pid_t pid) { retarget(pid); },
      .symbolizer = [this]() -> python::Symbolizer& { return symbolizer(); },
      .shutting_down_since = [this](pid_t pid) { return holder_ ? holder_->shutting_down_since(pid) : 0; },
      .ring_read_at = [this] { return ring_read_at_; },
  });
  auto actions = std::make_unique<ActionTracer>(*tracer_ctx_);
  actions_ = actions.get();
  tracers_.push_back(std::move(actions));
  for (const auto& entry : tracer_catalogue()) {
    if (!entry.wanted(opts_)) continue;
    tracers_.push_back(entry.make(*tracer_ctx_));
    if (const int fd = tracers_.back()->op_stacks_fd(); fd >= 0) tracer_ctx_->op_stacks_fd = fd;
    if (tracers_.back()->library()) {
      library_tracers_.push_back(tracers_.back().get());
      pending_.add_tracer();
    }
  }
}

void Session::forget_lines() {
  if (symbolizer_) symbolizer_->forget_lines();
}

python::Symbolizer& Session::symbolizer() {
  if (!symbolizer_)
    symbolizer_ = std::make_unique<python::Symbolizer>([this](const void* r, std::size_t n) { emit(r, n); });
  return *symbolizer_;
}

std::vector<std::string> Session::escalate(pid_t pid, bool on) {
  std::vector<std::string> out;
  for (pid_t p : pid ? std::vector<pid_t>{pid} : targets_.live_pids()) {
    if (!on) escalated_.erase(p);  // gone meanwhile too
    if (!targets_.live_and_alive(p)) continue;
    for (auto& t : tracers_)
      if (std::string what = t->escalate(p, on); !what.empty()) out.push_back("pid " + std::to_string(p) + ": " + what);
    if (on) escalated_.insert(p);
  }
  if (!pid && !on) escalated_.clear();
  apply_cadence();
  return out;
}

LoopCadence Session::cadence() const {
  // A target gone while escalated keeps it until the escalation's end
  // (watch ends every one it began).
  return escalated_.empty() ? opts_.cadence : LoopCadence{};
}

void Session::apply_cadence() {
  const LoopCadence c = cadence();
  thread_states_.period_ns = c.thread_states_ns;
  if (stats_sampler_)
    stats_sampler_->set_period(std::chrono::milliseconds(std::max<std::uint64_t>(1, c.proc_samples_ns / 1'000'000)));
}

std::vector<pid_t> Session::live_targets() const {
  return targets_.live_pids();
}

bool Session::settling(pid_t pid) const {
  for (pid_t p : pid ? std::vector<pid_t>{pid} : targets_.live_pids())
    for (const auto& t : tracers_)
      if (t->settling(p)) return true;
  return false;
}

void Session::retarget(pid_t pid) {
  if (const auto* interp = targets_.live(pid)) proctrack_->update_target(pid, target_for(*interp));
}

// --pid targets (and their descendants with --children), --all's first
// poll, then device stats for the targets found.
void Session::adopt_targets() {
  for (pid_t pid : opts_.pids) {
    adopt(pid, !opts_.children);
    if (opts_.children)
      for (pid_t c : proc::descendants(pid)) adopt(c, false);
  }
  if (opts_.all) {
    watcher_ = std::make_unique<proc::EligibleWatcher>();
    adopt_eligible();
    if (opts_.verbose && targets_.live_count() == 0)
      std::fprintf(stderr, "ltrace-bpf: --all: no process with torch or Lightning loaded yet; waiting for one\n");
  }
  // --device-stats; or the verdict's /proc samples alone (no NVML, no
  // report of their own).
  if (opts_.device_stats || opts_.sources.proc_samples) {
    StatsSampler::Config config;
    config.gpu = opts_.device_stats;
    config.for_verdict = !opts_.device_stats;
    config.untraced_forks = opts_.sources.untraced_forks && !opts_.children && !opts_.all;
    stats_sampler_ = std::make_unique<StatsSampler>(
        targets_.live_pids(),
        std::chrono::milliseconds(std::max<std::uint64_t>(1, cadence().proc_samples_ns / 1'000'000)),
        [this](const lt_event_header& h, const std::byte* r) { emit(r, h.size); }, std::move(config));
    if (opts_.device_stats && !stats_sampler_->gpu_note().empty())
      notes_.push_back("device stats: " + stats_sampler_->gpu_note());
  }
}

// One read of the ring.  The holder's exec verdicts come first: each one's
// exec record is then in this read (user/collector/exec_pairing.h).
int Session::drain(ring_buffer* rb) {
  for (const auto& v : holder_->take_exec_verdicts()) {
    if (v.followed)
      exec_pairing_.verdict(v.pid, v.held, v.python, monotonic_ns());
    else
      exec_candidates_.push_back({v.pid, v.matched});  // a CPython we do not follow, held
  }
  holder_->read_begins();
  ring_read_at_ = monotonic_ns();  // what BPF committed before this is in this read
  const int n = ring_buffer__consume(rb);
  holder_->read_ends();
  return n;
}

// The window opens: every probe is live.
void Session::mark_attached(std::uint64_t t0) {
  const lt_window_event w = window_record(true, monotonic_ns());
  emit(w);
  stats_.attach_latency_ms = (w.hdr.ts_ns - t0) / 1e6;
}

// A bridge injected at the attach subscribes to CUPTI from its own thread
// (~50-100 ms later).  Until it says so (or says why not), "attached"
// would be a promise the GPU side does not keep: a job started on that
// word ran its first steps without kernels in the report.  The records
// read meanwhile are in the window.  Returns the wait in ms (0: none).
// The wait is kBridgeStartNs more the CPU the machine withheld from the
// settling jobs meanwhile (their threads' run-queue time), at most
// kBridgeStartMaxNs: on a busy machine the op observer's handshake took
// longer than 3 s, and a short job released at "attached" ended before it
// (CI: its ops then came from no observer).
double Session::await_bridges(ring_buffer* rb, const std::atomic<bool>& stop) {
  const auto start = monotonic_ns();
  auto settling = [this] {
    std::vector<pid_t> out;
    for (pid_t pid : targets_.live_pids())
      for (const auto& t : tracers_)
        if (t->settling(pid)) {
          out.push_back(pid);
          break;
        }
    return out;
  };
  auto waiting = [&settling] { return !settling().empty(); };
  if (!waiting()) return 0;
  proc::WithheldBound bound(start, kBridgeStartNs, kBridgeStartMaxNs);
  for (pid_t pid : settling()) bound.watch(pid);
  while (waiting() && !bound.over(monotonic_ns(), settling()) && !stop.load()) {
    nap(LoopCadence{}.drain_ns / 4);
    const int n = drain(rb);
    if (callback_error_ || (n < 0 && n != -EINTR)) break;
    adopt_execed(monotonic_ns());  // a CPython held at its exec meanwhile waits for no bridge
    serve_library_loads(monotonic_ns());
    for (auto& t : tracers_) t->tick(monotonic_ns());  // the op observers' handshakes move on here
  }
  if (waiting() && !stop.load())
    notes_.push_back("an injected bridge (GPU, op observer) had not reported within " +
                     std::to_string((monotonic_ns() - start) / 1'000'000) +
                     " ms of the attach; its first GPU records or op calls may be missing");
  return (monotonic_ns() - start) / 1e6;
}

// Tells the user (-v) and the caller (on_attached: `run` releases its
// command, a test starts its job) that everything is in.
void Session::announce_attached(double bridge_ms) {
  if (opts_.on_attached) opts_.on_attached();
  stats_.probes = 0;
  for (const auto& t : tracers_) stats_.probes += t->probes();
  if (!opts_.verbose) return;
  std::string extra;
  for (const auto& t : tracers_) extra += t->summary();
  if (bridge_ms > 0)
    extra += "; injected bridges (GPU, op observer) reported after " + std::to_string(static_cast<int>(bridge_ms)) +
             " ms more";
  std::fprintf(stderr, "ltrace-bpf: attached: %zu process(es), %zu uprobe(s) as %s, %.1f ms%s\n", targets_.live_count(),
               stats_.probes,
               kernel_has_uprobe_multi() && uprobe_multi_scopes_processes()
                   ? "uprobe_multi links"
                   : "perf-event uprobes (no uprobe_multi, or one that scopes a pid to a thread: Linux < 6.10)",
               stats_.attach_latency_ms, extra.c_str());
}

void Session::start_chores(std::uint64_t now) {
  thread_states_ = {cadence().thread_states_ns, now};
  watch_ = {kWatchNs, now};
  liveness_ = {kLivenessNs, now};
  pending_.start_clock(now);
}

// The drain loop's chores, in the order do_chores() runs them between two
// drains. Each says when it is next due while no record comes (see
// "Sleeping" in run()): kTickSoon for the next turn, kNever for "only
// after records" (forked children's keys and exec pairings wait for their
// records; thread-state refreshes follow the records too; library loads
// wake the loop through their own fds). One table, so that what runs and
// what the loop wakes for cannot drift apart.
std::span<const Session::Chore> Session::chores() {
  using T = Tracer;
  static const Chore kChores[] = {
      {"forked children's thread-state keys",
       [](const Session& s, std::uint64_t) { return s.targets_.unproven().empty() ? kNever : T::kTickSoon; },
       [](Session& s, std::uint64_t) { s.check_forked_tsd(); }},
      {"exec'd targets",
       [](const Session& s, std::uint64_t) {
         return s.exec_pairing_.empty() && s.exec_candidates_.empty() ? kNever : T::kTickSoon;
       },
       [](Session& s, std::uint64_t now) { s.adopt_execed(now); }},
      {"library loads", [](const Session&, std::uint64_t) { return kNever; },
       [](Session& s, std::uint64_t now) {
         s.serve_library_loads(now);
         s.tell_library_loads();
       }},
      {"thread states", [](const Session&, std::uint64_t) { return kNever; },
       [](Session& s, std::uint64_t now) {
         if (s.thread_states_.due(now)) s.refresh_thread_states();
       }},
      {"--all's scan",
       [](const Session& s, std::uint64_t) { return s.watcher_ ? s.watch_.last_ns + s.watch_.period_ns + 1 : kNever; },
       [](Session& s, std::uint64_t now) {
         if (s.watcher_ && s.watch_.due(now)) s.adopt_eligible();
       }},
      {"pending attaches", [](const Session& s, std::uint64_t) { return s.pending_.next_due_ns(); },
       [](Session& s, std::uint64_t now) {
         std::set<pid_t> said;  // once per pid, not per tracer that waited
         s.pending_.poll(now, [&s, &said](pid_t p) {
           const bool ours = s.targets_.live_and_alive(p);
           if (!ours && s.opts_.verbose && proc::exists(p) && said.insert(p).second)
             std::fprintf(stderr,
                          "ltrace-bpf: pid %d: no longer a live target: its probes awaiting a library wait no more\n",
                          p);
           return ours;
         });
       }},
      {"tracers",
       [](const Session& s, std::uint64_t now) {
         std::uint64_t due = kNever;
         for (const auto& t : s.tracers_) due = std::min(due, t->next_tick_ns(now));
         return due;
       },
       [](Session& s, std::uint64_t now) {
         for (auto& t : s.tracers_) t->tick(now);
       }},
      {"/proc samples",
       [](const Session& s, std::uint64_t) { return s.stats_sampler_ ? s.stats_sampler_->next_due_ns(true) : kNever; },
       [](Session& s, std::uint64_t) {
         if (!s.stats_sampler_) return;
         s.stats_sampler_->set_pids(s.targets_.live_alive_pids());
         s.stats_sampler_->poll();
       }},
      // A killed recorder loses at most ~1 s.
      {"the trace file's flush",
       [](const Session& s, std::uint64_t) { return s.writer_ ? s.writer_->next_flush_ns() : kNever; },
       [](Session& s, std::uint64_t now) { s.write_file([&](tracefile::TraceWriter& w) { w.maybe_flush(now); }); }},
      {"on_tick",
       [](const Session& s, std::uint64_t now) {
         if (!s.opts_.on_tick) return kNever;
         return s.opts_.next_tick ? s.opts_.next_tick(now) : T::kTickSoon;
       },
       [](Session& s, std::uint64_t now) {
         if (s.opts_.on_tick) s.opts_.on_tick(now);
       }},
  };
  return kChores;
}

// When the loop must run next while no record comes: the earliest chore
// due, a second from now at the latest. The liveness poll waits for the
// second.
std::uint64_t Session::next_due(std::uint64_t now, std::uint64_t deadline) const {
  std::uint64_t due = now + kQuietMaxNs;
  if (deadline) due = std::min(due, deadline);
  for (const Chore& c : chores()) {
    const std::uint64_t t = c.due(*this, now);
    due = std::min(due, t == Tracer::kTickSoon ? now + cadence().drain_ns : t);
  }
  return due;
}

// What the loop does between two drains: every chore, in the table's
// order, each at the time it starts. Returns the time the last began.
std::uint64_t Session::do_chores() {
  std::uint64_t now = 0;
  for (const Chore& c : chores()) c.run(*this, now = monotonic_ns());
  return now;
}

// A followed process became a new program: rediscover it, once its exec
// record and the holder's verdict are in; a CPython the holder holds goes
// on once its probes are in (or it was refused).
void Session::adopt_execed(std::uint64_t now) {
  for (pid_t p : targets_.take_execed()) exec_pairing_.record(p, now);
  for (const auto& r : exec_pairing_.ready(now)) {
    stop_awaiting(r.pid);                     // a new program: awaiting the old one's libraries no more
    if (libload_) libload_->unnotify(r.pid);  // ...and its loader (the new one may be another file)
    pending_.told(r.pid, false);
    untold_.erase(r.pid);
    if (proc::exists(r.pid)) {
      if (provisional_.count(r.pid)) {
        adopt_provisional(r.pid, r.held);  // --all: not known to be a torch or Lightning job yet
      } else {
        adopt(r.pid, false, {.held_at_exec = r.held});
      }
    } else if (!r.not_python) {
      failed_adoptions_.push_back(r.pid);  // its new program ended before we could look at it
    }
    if (r.held) holder_->exec_adopted(r.pid, await_libraries(r.pid));
  }
  for (const auto& [pid, matched] : std::exchange(exec_candidates_, {})) {
    if (!targets_.alive(pid) && proc::exists(pid)) {
      if (matched) {
        adopt(pid, false, {.held_at_exec = true});  // ours by its environment: a target at once
      } else {
        provisional_[pid].since_ns = now;
        adopt_provisional(pid, true);
      }
    }
    holder_->exec_adopted(pid, await_libraries(pid));
  }
}

bool Session::waits_for_library(pid_t pid) const {
  for (std::size_t i = 0; i < library_tracers_.size(); ++i)
    if (library_tracers_[i]->holds_at_load() && pending_.waiting(i, pid)) return true;
  return false;
}

bool Session::await_libraries(pid_t pid) {
  if (!libload_ || !library_holds_ || !targets_.live_and_alive(pid) || !waits_for_library(pid)) return false;
  if (!libload_->watch(pid)) {
    if (opts_.verbose)
      std::fprintf(stderr, "ltrace-bpf: pid %d: its loader cannot be probed; its libraries are polled for\n", pid);
    return false;
  }
  awaiting_libs_[pid] = monotonic_ns();
  return true;
}

void Session::stop_awaiting(pid_t pid) {
  if (awaiting_libs_.erase(pid) && libload_) libload_->unwatch(pid);
}

// The holder paused these at a library load (before the library's code
// ran): each waiting tracer tries now; the target runs on to its next load
// while some still wait, else it is let go.
void Session::serve_library_loads(std::uint64_t now) {
  for (pid_t pid : holder_->take_library_loads()) {
    if (awaiting_libs_.count(pid))
      for (std::size_t i = 0; i < library_tracers_.size(); ++i)
        if (library_tracers_[i]->holds_at_load()) pending_.retry(i, pid);
    const bool more = awaiting_libs_.count(pid) && waits_for_library(pid) && targets_.live_and_alive(pid) &&
                      now < awaiting_libs_[pid] + kLibraryWaitNs;
    if (!more) stop_awaiting(pid);
    holder_->library_load_done(pid, more);
  }
  // Attached by the poll (a load on a thread we do not trace), gone, or
  // waited too long: let go.
  for (auto it = awaiting_libs_.begin(); it != awaiting_libs_.end();) {
    const pid_t pid = it->first;
    if (waits_for_library(pid) && targets_.live_and_alive(pid) && now < it->second + kLibraryWaitNs) {
      ++it;
      continue;
    }
    ++it;
    stop_awaiting(pid);
    holder_->library_load_done(pid, false);
  }
}

// Targets not held whose probes wait for a library: each load they make is
// told (a probe on their loader), and the waiting attaches are tried then;
// the poll only backs that up. A target whose loader cannot be probed is
// polled for as before.
void Session::tell_library_loads() {
  if (!libload_) return;
  for (pid_t pid : libload_->take_loads()) pending_.loaded(pid);
  if (pending_.empty()) return;  // the usual turn: no target waits for a library
  const auto waiting = pending_.waiting_pids();
  for (pid_t pid : waiting) {
    if (pending_.told(pid) || awaiting_libs_.count(pid) || untold_.count(pid)) continue;
    if (libload_->notify(pid)) {
      pending_.told(pid, true);
      // A load between the last try and the probe's arming was told to no
      // one: one more try now that every later one is.
      pending_.loaded(pid);
    } else {
      untold_.insert(pid);
      if (opts_.verbose)
        std::fprintf(stderr, "ltrace-bpf: pid %d: its loader cannot be probed; its libraries are polled for\n", pid);
    }
  }
  for (auto it = untold_.begin(); it != untold_.end();)
    it = std::find(waiting.begin(), waiting.end(), *it) == waiting.end() ? untold_.erase(it) : std::next(it);
  const std::set<pid_t> told = pending_.told_pids();  // a copy: changed below
  for (pid_t pid : told)
    if (std::find(waiting.begin(), waiting.end(), pid) == waiting.end()) {
      libload_->unnotify(pid);
      pending_.told(pid, false);
    }
}

// --all: a CPython held at its exec is adopted before anyone can know
// whether it will be a torch or Lightning job. Its probes go in now, so
// its first action is counted; its records wait (emit() keeps them) until
// it shows it is one: an action, or the watcher finding torch or Lightning
// loaded (promote()). One that ends first leaves no trace. It is not
// sampled until then.
void Session::adopt_provisional(pid_t pid, bool held) {
  const auto refused = try_adopt(pid, {.held_at_exec = held, .provisional = true});
  if (refused) {
    provisional_.erase(pid);
    targets_.forget(pid);
  }
}

void Session::promote(pid_t pid) {
  auto it = provisional_.find(pid);
  if (it == provisional_.end()) return;
  const Provisional p = std::move(it->second);
  provisional_.erase(it);
  ++stats_.traced;
  ++stats_.found;
  // What it did so far, in order: its process records first.
  for (std::size_t off = 0; off + sizeof(lt_event_header) <= p.records.size();) {
    lt_event_header h;
    std::memcpy(&h, p.records.data() + off, sizeof h);
    if (h.size < sizeof h || off + h.size > p.records.size()) break;
    emit(p.records.data() + off, h.size);
    off += h.size;
  }
  if (p.overflowed)
    notes_.push_back("pid " + std::to_string(pid) +
                     ": its first records before it loaded torch or Lightning were more than " +
                     std::to_string(kProvisionalBytes >> 20) + " MiB; the rest of them were dropped");
  if (const auto* interp = targets_.live(pid)) proctrack_->update_target(pid, target_for(*interp));  // sampled from now
}

// Drains everything already produced, then stops producing: the bridges
// first (they flush), then the other probes, and drains what they sent.
void Session::detach(ring_buffer* rb) {
  if (holder_) holder_->read_begins();
  if (!callback_error_) ring_buffer__consume(rb);
  if (holder_) holder_->read_ends();
  // No more SIGURGs at library loads: the holder lets its processes go.
  while (!awaiting_libs_.empty()) stop_awaiting(awaiting_libs_.begin()->first);
  holder_.reset();  // every held target goes on
  // What is in flight comes in while every probe is still in; then out.
  if (!callback_error_)
    for (auto& t : tracers_) t->flush([this, rb] { return drain_rest(rb); });
  // Drained after each: a detach may take a while (the op observer out of
  // an escalated target through ptrace), and the probes still in go on
  // producing meanwhile (an audit: a watch stopped with its targets
  // escalated lost 17,244 records here, none while it ran).
  for (auto t = tracers_.rbegin(); t != tracers_.rend(); ++t) {
    (*t)->detach();
    if (!callback_error_) ring_buffer__consume(rb);
  }
}

lt_drop_counters Session::drops_now() const {
  return proctrack_ ? proctrack_->drops() : final_drops_;
}

bool Session::drain_rest(ring_buffer* rb) {
  return !callback_error_ && ring_buffer__consume(rb) >= 0 && !callback_error_;
}

// The window closes: drops and losses, the last clock exchange, the file.
void Session::finish() {
  const auto drops = proctrack_->drops();
  final_drops_ = drops;  // drops_now() after the session: its counters go with it below
  emit(window_record(false, monotonic_ns()));
  const lt_drops_event d = drops_record(drops, monotonic_ns());
  emit(d);
  for (auto& r : loss_records(proctrack_->losses(), drops, d.hdr.ts_ns)) emit(r);
  emit_clock_sync(1);
  // What stderr says about the recording, into it too (report FILE says it).
  for (const auto& n : notes_) {
    lt_note_event e{};
    e.hdr = user_header(LT_EV_NOTE, sizeof e, 0, monotonic_ns());
    std::memcpy(e.text, n.data(), std::min(n.size(), sizeof e.text - 1));
    emit(e);
  }
  proctrack_.reset();
  stats_.processes = targets_.processes();
  for (pid_t pid : failed_adoptions_)
    if (!proc::exists(pid)) stats_.exited_during_attach.push_back(pid);
  write_file([&](tracefile::TraceWriter& w) {
    w.close();
    stats_.file_bytes = w.bytes_written();
  });
}

// Starts tracing one process: interpreter config into BPF, uprobe on its
// binary, and its identity into the trace.
void Session::adopt(pid_t pid, bool must_be_python, Adoption how) {
  const auto refused = try_adopt(pid, how);
  if (!refused) return;
  // An explicit --pid must work; a process met on the way (a child, an
  // exec) that cannot be traced is noted, and the session goes on.
  if (must_be_python) throw Error(refused->code, refused->why);
  // A launcher in between (shell, torchrun wrapper, `ltrace-bpf run`'s
  // child before its exec): its descendants and its own exec are ours.
  if (opts_.children && proc::exists(pid)) {
    proctrack_->follow(pid, LT_TARGET_FOLLOW_CHILDREN);
    if (!proc::running(pid)) proctrack_->forget(pid);  // it ended meanwhile: no entry to outlive it
  }
  emit_process_records(
      pid, nullptr,
      (refused->code == ExitCode::unsupported ? LT_PROC_UNSUPPORTED : LT_PROC_NOT_PYTHON) | children_flag(), 0);
  if (refused->code != ExitCode::not_python) notes_.push_back("pid " + std::to_string(pid) + ": " + refused->why);
  if (refused->code != ExitCode::not_python && refused->code != ExitCode::unsupported) failed_adoptions_.push_back(pid);
}

// --all: adopts each process that became eligible since the last poll and
// is not ours already (a child of a followed process comes with its fork
// event).  One that cannot be profiled is a note, and leaves no trace.
void Session::adopt_eligible() {
  for (pid_t pid : watcher_->poll()) {
    if (provisional_.count(pid)) {
      promote(pid);
      continue;
    }
    if (targets_.alive(pid)) continue;
    ++stats_.found;
    std::optional<Refusal> refused;
    if (proc::root_deleted(pid)) {
      refused = Refusal{ExitCode::io, "its root directory was deleted, its files cannot be read"};
    } else if (auto why = opts_.adoption_refused ? opts_.adoption_refused(pid) : std::nullopt) {
      refused = Refusal{ExitCode::watched, *why};
    } else {
      refused = try_adopt(pid);
      if (!refused) continue;
      targets_.forget(pid);
      if (refused->code == ExitCode::no_such_process || !proc::exists(pid)) {
        --stats_.found;  // gone before we got to it
        continue;
      }
    }
    if (!stats_.first_refusal) stats_.first_refusal = static_cast<int>(refused->code);
    notes_.push_back("pid " + std::to_string(pid) + " (" + proc::printable(proc::read_comm(pid)) +
                     "): not profiled: " + proc::printable(refused->why));
  }
}

// The one place where the errors of discovery and attaching become a value:
// whether a refusal ends the session is the caller's decision.  A usage
// error (a wrong --ops pattern) always does.
std::optional<Session::Refusal> Session::try_adopt(pid_t pid, Adoption how) {
  try {
    adopt_checked(pid, how);
    return std::nullopt;
  } catch (const Error& e) {
    if (e.code() == ExitCode::usage) throw;
    return Refusal{e.code(), e.what()};
  }
}

void Session::adopt_checked(pid_t pid, Adoption how) {
  targets_.met(pid);
  // A fork of a target, found already running (a DataLoader worker older
  // than the attach, adopted with --children or --all after its parent):
  // its lineage, as a fork seen live has (its frames named from the
  // parent's code objects; its blocking recorded for the verdict).
  if (const pid_t parent = proc::read_ppid(pid); parent > 0 && targets_.live(parent) && proc::same_image(pid, parent))
    targets_.forked_before(pid, parent);
  auto pre = prepared_.find(pid);
  python::Interpreter interp = pre != prepared_.end() ? pre->second : python::discover(pid);
  // Without --children the probes are scoped to the target process, so
  // other processes using the same interpreter pay nothing.
  for (auto& t : tracers_) t->adopt(interp, opts_.children ? -1 : pid);
  if (opts_.verbose) {
    std::string sites;
    for (auto& s : interp.sites)
      if (!s.modules_only || opts_.module_names)
        sites += " " + s.function + "@file+0x" + to_hex(s.file_offset) +
                 (s.cheap_entry ? "" : " (single-stepped entry: ~10 us per hit)");
    std::fprintf(stderr, "ltrace-bpf: pid %d: CPython %s (%s), probes:%s\n", pid, interp.version_string().c_str(),
                 interp.binary.c_str(), sites.c_str());
  }
  bool has_fetch = false;
  for (auto& s : interp.sites) has_fetch |= s.function == "builtin_next";
  if (!has_fetch)
    notes_.push_back("pid " + std::to_string(pid) + ": builtins.next not found in " + interp.binary +
                     "; *_next dataloader actions will be missing");
  if (sampling()) {
    std::string why;
    // Not found yet: looked for again a while. A process adopted at its
    // exec has no interpreter yet, held there or not (a hold not had on a
    // busy machine: the exec record's adoption came first, and its stacks
    // were missing for the whole run); one attached later may be between
    // its interpreter's finalisation and a new one.
    if (auto key = thread_state_key(interp, why))
      targets_.set_tsd(pid, *key);
    else
      targets_.await_tsd(pid, monotonic_ns() + TargetTracker::kTsdAwaitNs);
  }
  proctrack_->set_target(pid, target_for(interp));
  refresh_thread_states(pid);
  // Follow only once the target is in place: a child forked from now on
  // inherits it in BPF.
  if (opts_.children) proctrack_->follow(pid, LT_TARGET_FOLLOW_CHILDREN);
  // Ended before its entries were in (a process found, not held): BPF saw
  // no exit of ours, so nothing would remove them before its pid is reused.
  if (!proc::running(pid)) proctrack_->forget(pid);
  targets_.adopted(pid, interp);
  // Its forks adopted before it (--all polls in pid order, and pids wrap):
  // their lineage now, as if adopted after it. Only --all, or several
  // --pid in any order, adopt so (--children adopts a parent before its
  // descendants): elsewhere no look at every target's ppid per adoption.
  if (opts_.all || opts_.pids.size() > 1)
    for (pid_t c : targets_.live_pids())
      if (c != pid && targets_.ancestors(c).empty() && proc::read_ppid(c) == pid && proc::same_image(c, pid)) {
        targets_.forked_before(c, pid);
        retarget(c);
      }
  if (!how.provisional) ++stats_.traced;  // a provisional target counts once promoted
  emit_process_records(pid, &interp, LT_PROC_PYTHON | children_flag(), 0);
  pending_.start(pid);
}

// How BPF finds this interpreter's thread states, or why it cannot (then
// its stacks are not sampled).
std::optional<python::TsdLookup> Session::thread_state_key(const python::Interpreter& interp, std::string& why,
                                                           bool* not_yet) const {
  try {
    return python::find_tsd_lookup(interp);
  } catch (const python::NotInitialisedYet& e) {
    why = e.what();
    if (not_yet) *not_yet = true;
    return std::nullopt;
  } catch (const Error& e) {
    why = e.what();
    return std::nullopt;
  }
}

bool Session::explicit_target(pid_t pid) const {
  return std::find(opts_.pids.begin(), opts_.pids.end(), pid) != opts_.pids.end();
}

// One tracer's probes for one target. A process that has not loaded the
// library yet is polled until it does (its calls cannot exist before). An
// error is the session's end only for an explicit --pid at its adoption
// (or a wrong --ops); otherwise that process's data is missing, and said so.
PendingAttach::Attempt Session::attach_library(Tracer& tracer, pid_t pid, bool first) {
  // A tracer that needs ptrace itself (the GPU bridge's injection) waits
  // while we hold the process seized for other libraries.
  if (!tracer.holds_at_load() && awaiting_libs_.count(pid)) return PendingAttach::Attempt::later;
  try {
    if (!tracer.attach(pid, opts_.children ? -1 : pid)) return PendingAttach::Attempt::later;
    if (opts_.verbose) std::fprintf(stderr, "ltrace-bpf: pid %d: %s\n", pid, tracer.describe(pid).c_str());
    for (const auto& n : tracer.take_notes()) notes_.push_back("pid " + std::to_string(pid) + ": " + n);
  } catch (const Error& e) {
    if ((first && explicit_target(pid)) || e.code() == ExitCode::usage) throw;
    notes_.push_back("pid " + std::to_string(pid) + ": " + e.what() + "; " + tracer.lost());
    if (opts_.verbose)  // at the moment too (std::cerr: its text may carry the target's bytes)
      std::cerr << "ltrace-bpf: pid " << pid << ": " << e.what() << "; " << tracer.lost() << "\n";
  }
  return PendingAttach::Attempt::done;
}

lt_target Session::target_for(const python::Interpreter& interp) {
  lt_target t{};
  t.off = interp.layout.bpf;
  t.flags = (opts_.children ? LT_TARGET_FOLLOW_CHILDREN : 0) | (interp.gen_via_eval() ? LT_TARGET_GEN_VIA_EVAL : 0);
  t.gen_type = interp.gen_type_addr;
  t.generation = generation_++;
  if (const auto* tsd = targets_.tsd(interp.pid)) {
    if (tsd->by_map) {
      t.flags |= LT_TARGET_TSTATE_MAP;
    } else {
      t.tss_key = tsd->key;
      t.tsd_block = tsd->block;
      t.tsd_levels = tsd->levels;
    }
  }
  // Each tracer's bits (after the thread-state lookup, which some need).
  for (const auto& tracer : tracers_) tracer->fill_target(interp.pid, t);
  // A provisional target (--all) is not sampled until it is promoted.
  if (provisional_.count(interp.pid))
    t.flags &= ~(LT_TARGET_SAMPLE | LT_TARGET_OFF_CPU | LT_TARGET_FORKS_OFF_CPU | LT_TARGET_MEM_STACKS |
                 LT_TARGET_LAUNCH_STACKS);
  return t;
}

// Targets whose thread states BPF takes from lt_tstates: the interpreter's
// thread list, read again (a thread started since is sampled from the next
// refresh on; until then its samples count as having no thread state).
void Session::refresh_thread_states(pid_t only) {
  for (pid_t pid : targets_.tstate_map_targets())
    if (!only || pid == only) proctrack_->set_thread_states(pid, python::thread_states_by_tid(*targets_.live(pid)));
}

// Forked children's inherited thread-state keys, proven in the child (it
// may still be re-initialising its interpreter: a few more tries, then stop
// sampling it rather than read with a wrong key), and the keys of targets
// adopted before their interpreter had one (looked for a while).
void Session::check_forked_tsd() {
  for (pid_t pid : targets_.unproven()) {
    const auto* interp = targets_.live(pid);
    if (!interp) {
      targets_.proven(pid);  // exec'd: nothing to prove any more
      continue;
    }
    std::string why;
    bool not_yet = false;
    if (auto key = thread_state_key(*interp, why, &not_yet)) {
      // A target held at its exec had no key yet: any key is a change.
      const python::TsdLookup* had = targets_.tsd(pid);
      const bool changed = !had || key->key != had->key || key->by_map != had->by_map;
      targets_.set_tsd(pid, *key);
      if (changed) proctrack_->update_target(pid, target_for(*interp));
      targets_.proven(pid);
    } else if (!targets_.retry_unproven(pid, monotonic_ns(), not_yet)) {
      targets_.drop_tsd(pid);
      // Only where its entry still is: BPF removed it if it exited.
      proctrack_->update_target(pid, target_for(*interp));
      notes_.push_back(why +
                       " (looked for again after its fork, exec or adoption, then given up); its stacks are "
                       "missing from the report");
    }
  }
}

// Exits found by polling (their exit record was lost), each written as the
// record it should have been.  Whether any process we report on is left.
// A target found gone is reaped at the next look, not this one: its exit
// record (with its status) was in the ring before it was gone, and the
// drain between the two looks reads it first. The chores before a look can
// take seconds (watch writes a capture there); a target that exited and
// was waited for meanwhile was reaped here with no status, and its failed
// exit was no trigger. Only a lost exit record leaves the poll to say it.
bool Session::reap_exited() {
  std::set<pid_t> gone_now;
  const auto still_here = [&](pid_t p) {
    if (proc::exists(p)) return true;
    if (gone_at_last_look_.count(p)) return false;
    gone_now.insert(p);
    return true;  // until the next look
  };
  for (pid_t pid : targets_.reap(still_here)) emit(polled_exit_record(pid, monotonic_ns()));
  gone_at_last_look_ = std::move(gone_now);
  return targets_.any_alive() || !gone_at_last_look_.empty();
}

// The ring buffer's callback.  No exception may unwind through libbpf's C
// frames: keep it, stop consuming, and raise it once the session is closed
// cleanly.
int Session::on_ring_record(void* ctx, void* data, std::size_t size) {
  auto* self = static_cast<Session*>(ctx);
  try {
    self->on_record(data, size);
  } catch (...) {
    if (!self->callback_error_) self->callback_error_ = std::current_exception();
    return -1;
  }
  return 0;
}

// One record from BPF: normalized, then what it tells us (process
// lifecycle, the bridge's state), the names it needs ahead of it (ops,
// code objects), and the record itself.
void Session::on_record(const void* data, std::size_t size) {
  const auto record = normalizer_.normalize(data, size);
  if (record.empty()) return;  // never trust a record whose size disagrees
  const auto h = read_record<lt_event_header>(record);
  // A Lightning action: a provisional target (--all) is a Lightning job.
  if (h.kind == LT_EV_ACTION_BEGIN && !provisional_.empty()) promote(static_cast<pid_t>(h.pid));
  switch (h.kind) {
    case LT_EV_PROC_FORK:
    case LT_EV_PROC_EXEC:
    case LT_EV_PROC_EXIT:
      emit(record);
      on_process_record(h, read_record<lt_proc_event>(record));
      for (auto& t : tracers_) t->observe(h, record);  // after the session adopted a fork
      return;
    default:
      // Names and lines go in ahead of the record (ops, code objects read
      // while they are still alive, modules); the bridges' states.
      for (auto& t : tracers_) t->observe(h, record);
      emit(record);
  }
}

void Session::on_process_record(const lt_event_header& h, const lt_proc_event& p) {
  const auto pid = static_cast<pid_t>(p.child_pid);
  switch (h.kind) {
    case LT_EV_PROC_FORK:
      // BPF copied the parent's target entry to the child (same image);
      // setting it again covers a fork that raced with the parent's own
      // adoption.
      if (provisional_.count(static_cast<pid_t>(p.parent_pid))) provisional_[pid].since_ns = h.ts_ns;  // as its parent
      if (const auto* interp = targets_.on_fork(static_cast<pid_t>(p.parent_pid), pid)) {
        if (!provisional_.count(pid)) ++stats_.traced;
        // Written only where BPF made it, or for a child still running
        // its parent's image (the fork raced with the parent's adoption):
        // one that exec'd or exited since must not get an entry back
        // (ProcTrackSource::update_target).
        const lt_target t = target_for(*interp);
        if (!proctrack_->update_target(pid, t) && proc::same_executable(static_cast<pid_t>(p.parent_pid), pid)) {
          proctrack_->set_target(pid, t);
          if (!proc::running(pid) || !proc::same_executable(static_cast<pid_t>(p.parent_pid), pid))
            proctrack_->drop_target(pid);  // it exec'd or ended meanwhile
        }
        emit_process_records(pid, interp, LT_PROC_PYTHON | children_flag(), h.ts_ns);
      }
      return;
    case LT_EV_PROC_EXEC:
      targets_.on_exec(pid);
      // An image the holder already knows is no CPython: BPF woke nobody,
      // the record is its verdict.
      if (p.flags & LT_PROC_EXEC_NOT_PYTHON) exec_pairing_.verdict(pid, false, false, monotonic_ns());
      break;
    case LT_EV_PROC_EXIT:
      targets_.on_exit(pid);
      // BPF removed its entries at the exit; any written since (a drain
      // behind the process) would outlive it: the pid is given again.
      proctrack_->forget(pid);
      // Never shown to be a torch or Lightning job: no trace of it.
      if (provisional_.erase(pid)) targets_.forget(pid);
      break;
  }
  // A new image, or every sample of it came before its exit: its symbol
  // caches can go.
  if (symbolizer_) symbolizer_->forget(pid);
  for (auto& t : tracers_) t->forget(pid);
}

void Session::emit_process_records(pid_t pid, const python::Interpreter* interp, std::uint32_t flags,
                                   std::uint64_t ts) {
  lt::emit_process_records(pid, interp, flags, ts ? ts : monotonic_ns(),
                           [this](const void* r, std::size_t n) { emit(r, n); });
}

template <typename F>
void Session::write_file(F&& f) {
  if (!writer_) return;
  try {
    f(*writer_);
  } catch (const Error& e) {
    if (!opts_.sink) throw;  // record: the file is all there is
    // The live report is still whole: keep it, drop the file.
    stats_.file_error = e.what();
    stats_.file_error_code = static_cast<int>(e.code());
    stats_.file_bytes = writer_->bytes_written();
    std::fprintf(stderr,
                 "ltrace-bpf: %s; stopped writing it after %llu bytes (the whole chunks in it are readable); "
                 "the live report goes on\n",
                 e.what(), static_cast<unsigned long long>(writer_->bytes_written()));
    writer_->abandon();
    writer_.reset();
  }
}

void Session::emit(const void* record, std::size_t size) {
  if (!provisional_.empty() && size >= sizeof(lt_event_header)) {
    lt_event_header h;
    std::memcpy(&h, record, sizeof h);
    if (auto it = provisional_.find(static_cast<pid_t>(h.pid)); it != provisional_.end()) {
      auto& kept = it->second.records;
      if (kept.size() + size > kProvisionalBytes) {
        it->second.overflowed = true;
        return;
      }
      const auto* b = static_cast<const std::byte*>(record);
      kept.insert(kept.end(), b, b + size);
      return;
    }
  }
  ++stats_.records;
  if (opts_.keep_in_memory) trace_.append(record, size);
  write_file([&](tracefile::TraceWriter& w) { w.append(record, size); });
  if (opts_.sink) {
    lt_event_header h;
    std::memcpy(&h, record, sizeof h);
    opts_.sink(h, static_cast<const std::byte*>(record));
  }
}

void Session::emit_clock_sync(std::uint32_t phase) {
  if (opts_.clock_host.empty()) return;
  const auto m = cluster::measure_clock(opts_.clock_host, opts_.clock_port);
  if (!m.ok) {
    // The trace stays usable: the merge falls back to the collectives.
    stats_.clock_errors.push_back(m.error);
    notes_.push_back("clock exchange " + std::string(phase ? "at detach" : "at attach") + ": " + m.error);
    return;
  }
  const lt_clock_sync_event e = clock_sync_record(m, phase, monotonic_ns());
  emit(e);
  stats_.clock_syncs.push_back(e);
}

}  // namespace lt
