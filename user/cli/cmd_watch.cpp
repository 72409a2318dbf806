// `ltrace-bpf watch`: always on (docs/design-watch.md). One session with
// the cheap tier (Lightning actions and steps, c10d collectives, stacks at
// a low rate, /proc and NVML samples, process lifecycle) whose records go
// to the Watcher (user/watch/watcher.h): the flight recorder in DIR/ring,
// the triggers, the captures in DIR/captures, the metrics. A trigger
// escalates its process for the capture's after-window (Session::escalate):
// the op observer records its ops, then it is back to the cheap tier. `watch
// --capture-now` asks a running watcher for a capture (SIGUSR1, with the
// pid as the signal's value).
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "user/cli/builtin.h"
#include "user/cli/cluster_dump_output.h"
#include "user/cli/dump_output.h"
#include "user/cli/stop_signals.h"
#include "user/cli/watch_selection.h"
#include "user/cluster/agent.h"
#include "user/cluster/clock_exchange.h"
#include "user/cluster/hang_verdict.h"
#include "user/cluster/watch_uplink.h"
#include "user/collector/session.h"
#include "user/collector/synthesized_records.h"
#include "user/collector/tracer.h"
#include "user/core/errors.h"
#include "user/core/output_file.h"
#include "user/proc/job_discovery.h"
#include "user/proc/native_symbols.h"
#include "user/proc/proc_stats.h"
#include "user/proc/procfs.h"
#include "user/proc/thread_status.h"
#include "user/python/process_dump.h"
#include "user/sources/other_tracers.h"
#include "user/text/utf8_text.h"
#include "user/watch/exception_line.h"
#include "user/watch/metrics_server.h"
#include "user/watch/request_server.h"
#include "user/watch/stderr_sizes.h"
#include "user/watch/watcher.h"
#include "user/watch/watcher_registry.h"

namespace lt {
namespace {

// SIGUSR1 from `watch --capture-now`: the pid asked about (0: every one).
std::atomic<bool> g_capture_asked{false};
std::atomic<pid_t> g_capture_pid{0};
void on_capture_signal(int, siginfo_t* info, void*) {
  g_capture_pid.store(info && info->si_code == SI_QUEUE ? info->si_value.sival_int : 0);
  g_capture_asked.store(true);
  wake_loop();
}

void install_capture_signal() {
  struct sigaction sa {};
  sa.sa_sigaction = on_capture_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGUSR1, &sa, nullptr);
}

std::string pid_file(const Options& o) {
  return o.watch_dir + "/watch.pid";
}

std::string socket_path(const Options& o) {
  return o.watch_dir + "/watch.sock";
}

// watch --capture-now / --dump-now through the watcher's socket: any user,
// about their own processes (the watcher checks who asks).
int ask_by_socket(const Options& o) {
  const pid_t pid = o.pids.empty() ? 0 : o.pids.front();
  if (o.dump_now && !pid) throw Error(ExitCode::usage, "--dump-now needs --pid PID");
  // --capture-now --duration SECS: the capture holds SECS after the request.
  char secs[32] = "";
  if (!o.dump_now && o.duration_s > 0) std::snprintf(secs, sizeof secs, " %.3f", o.duration_s);
  const auto a =
      ask_watcher(socket_path(o), std::string(o.dump_now ? "dump " : "capture ") + std::to_string(pid) + secs);
  std::cout << a.body;
  std::cerr << "ltrace-bpf: the watcher: " << a.line << "\n";
  return 0;
}

// watch --capture-now: the watcher on DIR, through its socket; else (a
// watcher without one) told by its pid file, with a signal (root); only an
// ltrace-bpf process is signalled (a stale file names someone else).
int ask_for_capture(const Options& o) {
  struct stat st {};
  if (o.dump_now || lstat(socket_path(o).c_str(), &st) == 0) return ask_by_socket(o);
  if (o.duration_s > 0)
    throw Error(ExitCode::usage,
                "--capture-now --duration asks through the watcher's socket: " + socket_path(o) + " is not there");
  std::ifstream in(pid_file(o));
  long pid = 0;
  if (!(in >> pid) || pid <= 0)
    throw Error(ExitCode::no_such_process, "no watcher on " + o.watch_dir + " (" + pid_file(o) + " missing or empty)");
  const std::string comm = proc::read_comm(static_cast<pid_t>(pid));
  if (comm.rfind("ltrace-bpf", 0) != 0)
    throw Error(ExitCode::no_such_process, "no watcher on " + o.watch_dir + ": process " + std::to_string(pid) +
                                               " of " + pid_file(o) + " is gone or is not ltrace-bpf");
  sigval v{};
  v.sival_int = o.pids.empty() ? 0 : o.pids.front();
  if (sigqueue(static_cast<pid_t>(pid), SIGUSR1, v) != 0)
    throw Error(ExitCode::permission, "cannot signal the watcher " + std::to_string(pid) + ": " + std::strerror(errno));
  std::cerr << "ltrace-bpf: asked the watcher (pid " << pid << ") for a capture"
            << (o.pids.empty() ? std::string() : " of pid " + std::to_string(o.pids.front())) << "; it lands in "
            << o.watch_dir << "/captures\n";
  return 0;
}

// A watcher on DIR already (its pid file held locked): one line naming it,
// before anything of DIR is touched. Read only; a link is not followed.
void refuse_a_second_watcher(const Options& o) {
  const int fd = ::open(pid_file(o).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return;  // none, or not ours to read: the exclusive open says why
  const bool held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  char b[32] = {};
  const ssize_t n = held ? pread(fd, b, sizeof b - 1, 0) : 0;
  ::close(fd);
  if (!held) return;
  const long pid = n > 0 ? std::strtol(b, nullptr, 10) : 0;
  throw Error(ExitCode::watched, "a watcher already runs on " + o.watch_dir +
                                     (pid > 0 ? " (pid " + std::to_string(pid) + ")" : std::string()) +
                                     ": one watcher per directory (--dir another, or stop it)");
}

// The probes' losses so far, by cause (live: the counters the trace gets
// at the end).
std::string lost_metrics(const Session* s) {
  if (!s) return "";
  const lt_drop_counters d = s->drops_now();
  return "# HELP ltrace_bpf_watch_records_lost_total Records the probes lost or sent degraded, by cause.\n"
         "# TYPE ltrace_bpf_watch_records_lost_total counter\n"
         "ltrace_bpf_watch_records_lost_total{cause=\"ring_full\"} " +
         std::to_string(d.ringbuf_full) + "\nltrace_bpf_watch_records_lost_total{cause=\"read_fault\"} " +
         std::to_string(d.read_faults) + "\nltrace_bpf_watch_records_lost_total{cause=\"unreadable\"} " +
         std::to_string(d.unreadable) + "\n";
}

// The watcher's own cost, under the names Prometheus's client libraries
// give every process they export from (the capture reports' child
// processes apart).
std::string own_process_metrics() {
  static const proc::ProcStats stats;
  const auto me = stats.process(getpid());
  if (!me) return "";
  char b[512];
  std::snprintf(b, sizeof b,
                "# HELP process_cpu_seconds_total CPU time of the watcher (user and system, every thread).\n"
                "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %.9g\n"
                "# HELP process_resident_memory_bytes Resident memory of the watcher.\n"
                "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %llu\n",
                me->cpu_ns / 1e9, static_cast<unsigned long long>(me->rss_bytes));
  return b;
}

WatchOptions watch_options(const Options& o) {
  WatchOptions w;
  w.ring.dir = o.watch_dir;
  w.ring.keep_ns = static_cast<std::uint64_t>(o.keep_s * 1e9);
  w.ring.keep_bytes = o.keep_bytes;
  const auto on = [&o](const char* t) {
    return ("," + o.triggers + ",").find(std::string(",") + t + ",") != std::string::npos;
  };
  w.triggers.slow = on("slow-step");
  w.triggers.stall = on("stall");
  w.triggers.exit = on("exit");
  w.triggers.memory = on("memory");
  w.triggers.straggler = on("straggler");
  w.triggers.request = on("request");
  w.triggers.memory_growth = o.memory_growth_pct / 100;
  w.triggers.memory_floor_bytes = o.memory_floor_bytes;
  w.triggers.memory_window_ns = static_cast<std::uint64_t>(o.memory_window_s * 1e9);
  w.triggers.memory_warmup = static_cast<std::uint32_t>(o.memory_warmup);
  w.triggers.slow_factor = o.slow_factor;
  w.triggers.slow_floor_ns = static_cast<std::uint64_t>(o.slow_floor_s * 1e9);
  w.triggers.stall_min_ns = static_cast<std::uint64_t>(o.stall_s * 1e9);
  w.triggers.stall_factor = o.stall_factor;
  w.straggler = straggler_options(o);
  w.triggers.max_per_day = o.max_per_day;
  w.before_ns = static_cast<std::uint64_t>(o.capture_before_s * 1e9);
  w.after_ns = static_cast<std::uint64_t>(o.capture_after_s * 1e9);
  w.max_captures = o.max_captures;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  w.host = host;
  return w;
}

// A capture's reports, next to its trace: the reports it was recorded for
// (findings first) in reports.txt, and the dashboard, made by `ltrace-bpf
// report` in a child process: its memory is not the watcher's (RSS stays
// flat however big a capture), and its notes go to report.log, not to the
// watcher's one line per capture.
std::string render_capture(const Capture& c) {
  // At the lowest priority: this thread, and the report child that inherits
  // its nice value, take a busy job's cores last (the watcher's own drain
  // stays at its nice -10).
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
  const int out = open_output_fd(c.dir + "/reports.txt", OutputMode::truncate);
  const int log = open_output_fd(c.dir + "/report.log", OutputMode::truncate);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out, 1);
  posix_spawn_file_actions_adddup2(&fa, log, 2);
  const std::string html = c.dir + "/dashboard.html";
  std::vector<std::string> args = {"ltrace-bpf", "report", c.trace, "--html", html};
  // A slow step's own step taken apart (after the findings): its cause
  // even where the outliers finding stays under its share.
  if (c.trigger.kind == TriggerKind::slow_step) args.insert(args.end(), {"--why-step", std::to_string(c.trigger.step)});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t child = -1;
  const int err = posix_spawn(&child, "/proc/self/exe", &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out);
  close(log);
  if (err != 0) throw Error(ExitCode::io, std::string("cannot start the report: ") + std::strerror(err));
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  // 13: parts damaged, the rest reported (a window cut at a killed chunk).
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (rc != 0 && rc != static_cast<int>(ExitCode::damaged_trace))
    throw Error(ExitCode::io, "the report exited with " + std::to_string(rc) + " (see " + c.dir + "/report.log)");
  std::ifstream in(c.dir + "/reports.txt");
  std::string head(32768, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  // A memory trigger's cause is the growth, if the capture shows it; a
  // slow step's, its outliers; a straggler's, the straggler finding (its
  // own compute, its input or its host's CPUs), not its peers' wait.
  // A slow step's own step taken apart first: the outliers finding is the
  // window's, and may name another step or process (an audit: a step every
  // 150 told "the longest, step 1049"; another job's outliers).
  if (c.trigger.kind == TriggerKind::slow_step)
    if (std::string why = step_taken_apart(head, c.trigger.pid); !why.empty()) return why;
  // Findings of the trigger's process (and its peers: a rank's stall)
  // only; a request of every process takes any.
  std::set<std::uint32_t> of;
  if (c.trigger.pid) of.insert(c.trigger.pid);
  for (const auto& [pid, rank] : c.trigger.peers) of.insert(pid);
  return first_finding(head, own_finding(c.trigger), of);
}

// At a stall: every thread of the process now (the dump command's text),
// and where its main thread waits (the stall's top cause). A rank's stall:
// every rank watched here read twice, kStallReadS apart, and `cluster ...
// dump`'s hang verdict over them (which ranks wait in a collective, which
// never entered it, and where), the verdict first; its first line is the
// top cause when it finds a hang.
constexpr double kStallReadS = 0.5;
// The Python descendants of `pid` (its DataLoader workers, a
// multiprocessing pool), but those in `skip` (ranks read already), read
// once after it: a stall may be theirs (the loop waits in the loader's
// queue for a worker that hangs), and a watcher of --pid follows none of
// them. At most kMaxChildren; a child not Python or gone is left out.
constexpr std::size_t kMaxChildren = 16;
std::string children_now(pid_t pid, const std::set<pid_t>& skip, proc::NativeNamer& namer,
                         std::vector<python::ProcessDump>* dumps = nullptr) {
  std::string out;
  auto kids = python::dump_descendants(pid, skip, namer, kMaxChildren);
  for (const auto& d : kids.dumps)
    out += "=== process " + std::to_string(d.pid) + " (a descendant of " + std::to_string(pid) + ")\n" + dump_text(d) +
           "\n";
  if (kids.left)
    out += "(" + std::to_string(kids.left) + " more descendant(s) of " + std::to_string(pid) + " not read)\n";
  if (dumps) dumps->insert(dumps->end(), kids.dumps.begin(), kids.dumps.end());
  return out;
}

// An exit's exception (exception_line.h), from the process's stderr where
// that is a file: opened now, while the process lives (its exception
// escaped fit; the traceback is printed as it ends, maybe before this
// trigger), read once its files are closed (it exited), or `wait_s` from
// now (kStderrWaitS at most). Only what was written after `before` (its
// size kTracebackBeforeNs before the exception or exit, or when first
// watched: StderrSizes; -1: unknown, its size now): an older traceback in
// a log that many runs append to is not this one's. A pipe,
// a terminal or a socket is not read: its text is its reader's. Runs on a
// thread of its own.
constexpr double kStderrWaitS = 8;
constexpr std::uint64_t kTracebackBeforeNs = 5'000'000'000;
constexpr off_t kStderrTail = 65536;
AtTrigger exception_of(pid_t pid, int held, off_t before, double wait_s) {
  const std::string stderr_link = "/proc/" + std::to_string(pid) + "/fd/2";
  // The file StderrSizes held (an exited process's too), else its own now.
  const int fd = held >= 0 ? held : open(stderr_link.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return {};  // gone already, or no stderr
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return {};
  const off_t at_trigger = before >= 0 ? before : st.st_size;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(std::min(wait_s, kStderrWaitS));
  while (access(stderr_link.c_str(), F_OK) == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (fstat(fd, &st) != 0) return {};
  const off_t from = std::max<off_t>({0, at_trigger, st.st_size - kStderrTail});
  if (st.st_size <= from) return {};  // nothing new (or cut short meanwhile: a rotated log)
  std::string tail(static_cast<std::size_t>(st.st_size - from), '\0');
  const ssize_t n = pread(fd, tail.data(), tail.size(), from);
  if (n <= 0) return {};
  tail.resize(static_cast<std::size_t>(n));
  const std::string line = last_exception(tail);
  if (line.empty()) return {};
  char path[4096] = {};
  const ssize_t len = readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), path, sizeof path - 1);
  return {"", line + " (the last traceback in its stderr" +
                  (len > 0 ? ", " + utf8_text(std::string(path, static_cast<std::size_t>(len))) : std::string()) + ")"};
}

AtTrigger threads_now(const Trigger& t, const std::string& host) {
  if (t.kind != TriggerKind::stall || !t.pid) return {};
  proc::NativeNamer namer;
  if (t.peers.size() < 2) {
    const auto d = python::dump_process(static_cast<pid_t>(t.pid), namer);
    std::string text = dump_text(d);
    std::vector<python::ProcessDump> kids;
    if (std::string more = children_now(d.pid, {}, namer, &kids); !more.empty()) text += "\n" + more;
    return {text, main_thread_at(d) + loader_wait(d, kids)};
  }
  std::vector<cluster::RankProcess> first;
  std::vector<std::chrono::steady_clock::time_point> read_at;  // each first read's end
  std::string unread;
  for (const auto& [pid, rank] : t.peers) {
    try {
      cluster::RankProcess p;
      p.rank = rank;
      p.node = host;
      p.dump = python::dump_process(static_cast<pid_t>(pid), namer);
      first.push_back(std::move(p));
      read_at.push_back(std::chrono::steady_clock::now());
    } catch (const Error& e) {
      unread += "pid " + std::to_string(pid) + " not read: " + e.what() + "\n";
    }
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(kStallReadS));
  std::vector<cluster::RankProcess> read;
  for (std::size_t i = 0; i < first.size(); ++i) {
    const auto& p = first[i];
    try {
      cluster::RankProcess again = p;
      // The time between this process's two reads: the wait, and the
      // reads of the ranks between them.
      const double gap = std::chrono::duration<double>(std::chrono::steady_clock::now() - read_at[i]).count();
      again.dump = python::dump_process(p.dump.pid, namer);
      python::mark_still_blocked(p.dump, again.dump, gap);
      again.interval_s = gap;
      read.push_back(std::move(again));
    } catch (const Error& e) {
      unread += "pid " + std::to_string(p.dump.pid) + " not read again: " + e.what() + "\n";
    }
  }
  if (read.empty()) throw Error(ExitCode::no_such_process, "no rank could be read: " + unread);
  std::sort(read.begin(), read.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  const cluster::Verdict v = cluster::hang_verdict(read);
  std::string text;
  const auto lines = verdict_lines(v, kStallReadS);
  for (const auto& l : lines) text += l + "\n";
  text += unread + "\n";
  for (const auto& p : read) text += "=== rank " + std::to_string(p.rank) + "\n" + dump_text(p.dump) + "\n";
  std::set<pid_t> ranks;
  for (const auto& [pid, rank] : t.peers) ranks.insert(static_cast<pid_t>(pid));
  for (const auto& p : read) text += children_now(p.dump.pid, ranks, namer);
  const auto me =
      std::find_if(read.begin(), read.end(), [&t](const auto& p) { return p.dump.pid == static_cast<pid_t>(t.pid); });
  return {text, v.hang && !lines.empty() ? lines.front() : me != read.end() ? main_thread_at(me->dump) : ""};
}

}  // namespace

void check_watch(Options& o) {
  if (o.capture_now || o.dump_now) return;
  if (o.all && (!o.pids.empty() || !o.job_env.empty()))
    throw Error(ExitCode::usage, "--all takes every torch/Lightning process: --pid and --job-env do not apply");
  if (o.pids.empty() && o.job_env.empty()) o.all = true;
  if (o.all) o.children = true;
}

StragglerOptions straggler_options(const Options& o) {
  StragglerOptions s;
  s.window = o.straggler_of;
  s.share = static_cast<double>(o.straggler_last) / o.straggler_of;
  s.min_last = o.straggler_last;  // (7/25 as a double times 25 is just over 7)
  s.min_gap_ns = static_cast<std::int64_t>(o.straggler_wait_s * 1e9);
  return s;
}

// "another ltrace-bpf (pid W: its command; BPF map M)"
std::string tracer_of(const OtherTracer& other) {
  return "another ltrace-bpf (" +
         (other.owner ? "pid " + std::to_string(other.owner) + ": " + utf8_text(other.owner_cmdline.substr(0, 120))
                      : "its process not found") +
         "; BPF map " + std::to_string(other.map_id) + ")";
}

// The registry sees the watchers of its /run alone; the kernel's BPF maps
// are every tracer's (user/sources/other_tracers.h): a process another
// watcher traces (in a container with a /run of its own, or on the host)
// is refused as the registry refuses, naming it. An attach or a `run`
// beside a watcher is not refused, as the registry does not know them
// either (a daemon's `watch --all` must not fail to start because someone
// attached to a job).
void refuse_what_another_traces(const Options& opts) {
  const WatchSelection mine = watch_selection(opts);
  bool listed = true;
  const auto other =
      traced_by_another(mine.all ? std::vector<pid_t>{} : processes_watched_now(mine), mine.all, true, &listed);
  if (!listed) {
    std::cerr << "ltrace-bpf: watch: the kernel's BPF maps cannot be listed (no CAP_SYS_ADMIN): other watchers of "
                 "these processes outside this machine's watcher registry not looked for\n";
    return;
  }
  if (!other) return;
  throw Error(ExitCode::watched, "pid " + std::to_string(other->traced) + " is traced by " + tracer_of(*other) +
                                     ", a watcher not in this machine's watcher registry (its /run is another's): "
                                     "one watcher per process on a machine");
}

// --all: a process found running after the start that another watcher
// (in a /run of its own) already traces is left to it, said at once.
std::optional<std::string> watched_elsewhere(pid_t pid) {
  const auto other = traced_by_another({pid}, false, true);
  if (!other) return std::nullopt;
  std::string why = "traced by " + tracer_of(*other) + ", a watcher (one watcher per process on a machine): left to it";
  std::cerr << "ltrace-bpf: watch: pid " << pid << " not adopted: " << why << "\n";
  return why;
}

int cmd_watch(Options& opts) {
  if (opts.capture_now || opts.dump_now) return ask_for_capture(opts);
  install_stop_signals(false);
  install_capture_signal();
  if (!opts.job_env.empty()) {
    std::string why;
    auto found = proc::find_job_processes(opts.job_env, &why);
    if (found.empty()) throw Error(ExitCode::no_such_process, "--job-env: " + why);
    opts.pids.insert(opts.pids.end(), found.begin(), found.end());
  }
  std::string metrics_host;  // checked before anything is written; listened on after the lock
  std::uint16_t metrics_port = 0;
  if (!opts.metrics_addr.empty() && !cluster::parse_host_port(opts.metrics_addr, metrics_host, metrics_port))
    throw Error(ExitCode::usage, "--metrics needs [HOST]:PORT (got '" + opts.metrics_addr + "')");
  // One watcher per directory: the pid file is held locked while it runs
  // (taken before the ring is touched).
  make_output_dirs(opts.watch_dir);
  refuse_a_second_watcher(opts);
  // One watcher per process on the machine: refused, naming the first,
  // when another watcher (on another DIR) watches one of ours; before the
  // directory's pid file is written.
  std::unique_ptr<WatcherRegistration> registration;
  try {
    registration = std::make_unique<WatcherRegistration>(watch_selection(opts), processes_watched_now);
  } catch (const Error& e) {
    if (e.code() != ExitCode::permission) throw;
    std::cerr << "ltrace-bpf: watch: " << e.what() << ": other watchers of these processes not looked for\n";
  }
  refuse_what_another_traces(opts);
  const int pid_fd = open_output_fd(pid_file(opts), OutputMode::exclusive_truncate);
  const std::string me = std::to_string(getpid()) + "\n";
  if (write(pid_fd, me.data(), me.size()) != static_cast<ssize_t>(me.size()))
    throw Error(ExitCode::io, "cannot write " + pid_file(opts));
  // The port after the directory's lock: a second watcher of the same
  // arguments is told of the watcher there, not of a port in use.
  std::unique_ptr<MetricsServer> metrics;
  if (!opts.metrics_addr.empty()) metrics = std::make_unique<MetricsServer>(metrics_host, metrics_port);
  // Requests from the socket (its own thread): captures go to the drain's
  // tick, as a signal's do; dumps are answered there and then.
  std::mutex asked_mutex;
  struct AskedCapture {
    pid_t pid;
    std::optional<uid_t> for_uid;  // for whom
    double after_s;                // its own after-window (0: --capture-after)
    // What the drain made of it, for the asker (not a capture of a pid not
    // watched here, nor one past --max-per-day, said as taken).
    std::shared_ptr<std::promise<Watcher::RequestOutcome>> outcome;
  };
  std::vector<AskedCapture> asked_captures;
  gid_t admin_gid = static_cast<gid_t>(-1);
  if (!opts.admin_group.empty()) {
    const group* g = getgrnam(opts.admin_group.c_str());
    if (!g) throw Error(ExitCode::usage, "--admin-group: no group " + opts.admin_group);
    admin_gid = g->gr_gid;
  }
  RequestServer::Handlers handlers;
  const bool requests_on = watch_options(opts).triggers.request;
  handlers.capture = [&](pid_t pid, std::optional<uid_t> for_uid, double after_s) {
    if (!requests_on)
      return RequestServer::Answer{false, "this watcher takes no requests (its --triggers has no request)", "", true};
    auto outcome = std::make_shared<std::promise<Watcher::RequestOutcome>>();
    auto answered = outcome->get_future();
    {
      std::lock_guard lock(asked_mutex);
      asked_captures.push_back({pid, for_uid, after_s, outcome});
    }
    wake_loop();
    // The drain answers within a turn of its loop (a capture's write is on
    // its own thread); a drain held up longer is said as such.
    std::string lands = "it lands in " + opts.watch_dir + "/captures";
    if (answered.wait_for(std::chrono::seconds(10)) == std::future_status::ready) {
      const Watcher::RequestOutcome o = answered.get();
      if (!o.taken) return RequestServer::Answer{false, "not taken: " + o.why, "", true};
      lands = "it lands in " + o.dir;
    } else {
      lands += " (the watcher did not say yet whether it took it)";
    }
    char next[48] = "";
    if (after_s > 0) std::snprintf(next, sizeof next, " for the next %g s", after_s);
    return RequestServer::Answer{true,
                                 "a capture of " + (pid ? "pid " + std::to_string(pid) : std::string("every process")) +
                                     " is asked" + next + "; " + lands +
                                     (for_uid ? " (your processes only, its files yours)" : ""),
                                 ""};
  };
  handlers.dump = [](pid_t pid) {
    proc::NativeNamer namer;
    return RequestServer::Answer{true, "dump of pid " + std::to_string(pid),
                                 dump_text(python::dump_process(pid, namer))};
  };
  RequestServer server(socket_path(opts), admin_gid, std::move(handlers));

  // Escalation: a trigger asks (from inside the drain: the sink or the
  // tick); the next tick escalates (an injection takes a while). It lasts
  // the capture's after-window from when it took effect (the op observer's
  // handshake over), and the capture is stretched to hold all of it.
  Session* live = nullptr;
  // (pid, how long): a request may ask for its own after-window.
  struct EscalateNext {
    pid_t pid;            // 0: every live target
    std::uint64_t span;   // how long
    AtTriggerRead after;  // a stall's reads, to be over first
  };
  std::vector<EscalateNext> escalate_next;
  struct Escalated {
    std::uint64_t until = 0;  // 0: not in effect yet (settling)
    std::uint64_t span = 0;   // from when it takes effect
  };
  std::map<pid_t, Escalated> escalated_until;
  const std::uint64_t escalate_ns = static_cast<std::uint64_t>(opts.capture_after_s * 1e9);
  WatchOptions wo = watch_options(opts);
  // (wo goes to the Watcher: the host is taken now.)
  StderrSizes stderr_sizes;  // sampled once a second: where an exception's traceback can begin
  auto on_trigger = [&, host = wo.host](const Trigger& t) {
    const std::uint64_t span = t.after_ns ? t.after_ns : escalate_ns;
    // An exit's process is gone, or ending (an exception out of fit is
    // mostly followed by the exit, held by us while its last samples are
    // read): no op observer to load into it (an audit: "op observer not
    // used (process N is stopped; continue it first)" at every such exit).
    if (t.kind == TriggerKind::exit) {
      if (!t.pid) return at_trigger_ready();
      // Its exception, read off the drain (it waits for the exit).
      auto done = std::make_shared<std::promise<AtTrigger>>();
      AtTriggerRead read = done->get_future().share();
      // Read by the capture's end: its after-window, and 3 of the 5 s its
      // write waits for a reading.
      const double wait_s = span / 1e9 + 3;
      // From a little before the exception or the exit: a traceback the
      // process printed as it ended (an exception outside Lightning's loop
      // fires no trigger before the exit) is in.
      const off_t before = stderr_sizes.before(t.pid, t.at_ns > kTracebackBeforeNs ? t.at_ns - kTracebackBeforeNs : 0);
      const int held = stderr_sizes.dup_file(t.pid);
      std::thread([pid = static_cast<pid_t>(t.pid), done, wait_s, before, held] {
        try {
          done->set_value(exception_of(pid, held, before, wait_s));
        } catch (...) {
          done->set_exception(std::current_exception());
        }
      }).detach();
      return read;
    }
    if (t.kind != TriggerKind::stall || !t.pid) {
      escalate_next.push_back({static_cast<pid_t>(t.pid), span, {}});
      return at_trigger_ready();
    }
    // A stall's threads (every rank's, read twice half a second apart) are
    // read on a thread of their own: the drain goes on meanwhile, so the
    // other targets' records do not wait in the ring. Detached: a read
    // stuck on a process in D state holds no one (the capture waits for it
    // a bounded time). Its escalation waits for the reads: the op
    // observer's injection stops a thread of the process, the stalled one
    // first, and would be in them.
    auto done = std::make_shared<std::promise<AtTrigger>>();
    AtTriggerRead read = done->get_future().share();
    std::thread([t, host, done] {
      try {
        done->set_value(threads_now(t, host));
      } catch (...) {
        done->set_exception(std::current_exception());
      }
      wake_loop();
    }).detach();
    escalate_next.push_back({static_cast<pid_t>(t.pid), span, read});
    return read;
  };
  // cluster ... watch: the straggler rule runs at the coordinator, over
  // every node's ranks; the arrivals go there, its requests come back.
  std::unique_ptr<cluster::WatchUplink> uplink;
  if (!opts.upstream.empty()) {
    std::string host;
    std::uint16_t port = 0;
    if (!cluster::parse_host_port(opts.upstream, host, port))
      throw Error(ExitCode::usage, "--upstream needs [HOST]:PORT (got '" + opts.upstream + "')");
    host = cluster::clock_server_host(host);
    if (host.empty())
      std::cerr << "ltrace-bpf: watch: --upstream " << opts.upstream
                << ": no host given and no SLURM_LAUNCH_NODE_IPADDR: clock not measured\n";
    uplink = std::make_unique<cluster::WatchUplink>(host, port, [] { wake_loop(); });
    if (wo.triggers.straggler) wo.arrivals = uplink.get();
  }
  Watcher watcher(std::move(wo), on_trigger, render_capture);
  // A process that ended no action since it was first watched: inside one
  // of Lightning's loops (loops/fit_loop.py, training_epoch_loop.py,
  // evaluation_loop.py, fetchers.py: pytorch_lightning's and
  // lightning.pytorch's), it was stuck when the watcher came.
  watcher.set_in_a_loop([](std::uint32_t pid) {
    proc::NativeNamer namer;
    const auto d = python::dump_process(static_cast<pid_t>(pid), namer);
    for (const auto& t : d.threads)
      for (const auto& f : t.frames)
        if (f.file.find("lightning") != std::string::npos && f.file.find("/loops/") != std::string::npos) return true;
    return false;
  });
  auto escalation_tick = [&](std::uint64_t now) {
    if (!live) return;
    // Each process has its own deadline, the latest its triggers asked for
    // (a request for every process: each live target).
    std::vector<std::pair<pid_t, std::uint64_t>> asked;
    std::vector<EscalateNext> reading;  // a stall's reads not over yet
    for (auto& e : std::exchange(escalate_next, {})) {
      if (e.after.valid() && e.after.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
        reading.push_back(std::move(e));
        continue;
      }
      if (e.pid) {
        asked.emplace_back(e.pid, e.span);
        continue;
      }
      for (pid_t p : live->live_targets()) asked.emplace_back(p, e.span);
    }
    escalate_next = std::move(reading);
    for (const auto& [pid, span] : asked) {
      auto [it, fresh] = escalated_until.try_emplace(pid);
      it->second.span = std::max(it->second.span, span);
      if (!fresh && it->second.until) it->second.until = std::max(it->second.until, now + span);
      for (const auto& line : live->escalate(pid, true)) std::cerr << "ltrace-bpf: watch: escalated: " << line << "\n";
    }
    for (auto it = escalated_until.begin(); it != escalated_until.end();) {
      auto& e = it->second;
      if (!e.until && !live->settling(it->first)) {  // in effect from now (or failed: over as well)
        e.until = now + e.span;
        watcher.extend(it->first, e.until);
      }
      if (!e.until || now < e.until) {
        ++it;
        continue;
      }
      for (const auto& line : live->escalate(it->first, false))
        std::cerr << "ltrace-bpf: watch: back to the cheap tier: " << line << "\n";
      // Taking the op observer out and the stacks back down is the
      // watcher's work in the job (Watcher::own_work).
      watcher.own_work(static_cast<std::uint32_t>(it->first), now, monotonic_ns() + Watcher::kOwnWorkTailNs);
      it = escalated_until.erase(it);
    }
  };

  SessionOptions so{opts.pids, opts.all, opts.children, {}, opts.duration_s, opts.verbose};
  if (!opts.job_env.empty()) so.adopt_env = opts.job_env;
  // The cheap tier: actions (always), stacks at a low rate, collectives,
  // CPython's GC probes (two probe hits per collection, where the build has
  // them), torch's out-of-memory hooks, /proc and NVML samples. No op
  // probes, no GPU bridge.
  so.sample_rate_hz = opts.rate_hz ? opts.rate_hz : 19;
  // Escalated, a profile's rate (its own perf events; every sample says how
  // many full-rate periods it stands for).
  so.escalated_rate_hz = opts.capture_rate_hz;
  // Each action start names its opening frame without walking the whole
  // stack for its depth (measured: ~3 us of BPF per builtin_next hit, over
  // half of the cheap tier's step-time cost); the captures' stacks are cut
  // at the outermost frame running that code instead.
  so.origin_by_code = true;
  so.sources.comm = true;
  so.sources.gc = true;
  // Without --children or --all, the workers' CPU from /proc for the
  // captures' input-bound finding (a /proc scan a second).
  so.sources.untraced_forks = true;
  // The allocator's out-of-memory hooks alone (the memory trigger): torch
  // calls them only as an allocation fails, so they cost nothing until then.
  // Escalated, its allocations too (MemTracer::escalate).
  so.sources.oom = watch_options(opts).triggers.memory;
  so.sources.ops = true;  // on demand: the op observer while escalated
  so.ops_on_demand = true;
  so.inject = opts.inject;
  so.device_stats = true;
  // A drain every 100 ms (~170 records of a 46 steps/s fit), thread states
  // each second, /proc samples every 500 ms (the memory finding wants 8 in
  // the steps it looks at): the cheap tier's wake-ups a fifth of a
  // profile's; escalated, a profile's (docs/design-watch.md, "The pieces").
  so.cadence = LoopCadence{100'000'000, 1'000'000'000, 500'000'000};
  so.gpu = false;
  so.reports = "verdict,simple,advanced,comm,steps,ops,memory";
  so.sink = [&watcher](const lt_event_header& h, const std::byte* p) { watcher.add(h, p); };
  std::uint64_t next_publish = 0, segments_ended = 0, next_progress = 0;
  std::uint64_t lost_said = 0, next_lost_line = 0;       // records lost, said on stderr
  std::uint64_t lost_read = 0;                           // ...as last read while the watch ran
  std::map<std::uint32_t, std::uint64_t> progress_sent;  // pid -> steps said to the coordinator
  if (opts.all) so.adoption_refused = watched_elsewhere;
  so.on_tick = [&](std::uint64_t now) {
    if (g_capture_asked.exchange(false)) watcher.request(g_capture_pid.load(), now);
    {
      std::lock_guard lock(asked_mutex);
      for (const auto& a : std::exchange(asked_captures, {})) {
        const auto o = watcher.request(a.pid, now, a.for_uid, static_cast<std::uint64_t>(a.after_s * 1e9));
        if (a.outcome) a.outcome->set_value(o);
      }
    }
    if (uplink) {
      for (const auto& r : uplink->take_requests()) watcher.name_straggler(r.pid, r.what, now);
      // Each rank's steps as they change (the coordinator names the step a
      // straggler was found at) and its median (its lateness bound), and
      // once a second regardless.
      const bool all = now >= next_progress;
      std::map<std::uint32_t, std::uint64_t> sent;  // the live processes only: bounded
      for (const auto& p : watcher.progress()) {
        const auto it = progress_sent.find(p.pid);
        if (all || it == progress_sent.end() || it->second != p.steps)
          uplink->progress(p.pid, p.rank, p.steps, p.median_ns);
        sent[p.pid] = p.steps;
      }
      progress_sent.swap(sent);
      if (all) next_progress = now + 1'000'000'000;
      uplink->flush(now);
    }
    {
      std::vector<std::uint32_t> live;
      for (const auto& p : watcher.progress()) live.push_back(p.pid);
      stderr_sizes.sample(live, now);
    }
    watcher.tick(now);
    // Records lost (the ring buffer full while the drain was busy: a
    // capture's write) said as they happen, at most every 10 s: a step
    // count, a step or an action may miss them (an audit: 1399 of 1500
    // steps, said nowhere but in one capture's report.log).
    if (live && now >= next_lost_line) {
      const lt_drop_counters d = live->drops_now();
      lost_read = d.ringbuf_full + d.unreadable;
      if (d.ringbuf_full + d.unreadable > lost_said) {
        std::cerr << "ltrace-bpf: watch: " << d.ringbuf_full + d.unreadable - lost_said
                  << " record(s) lost since the last such line (" << d.ringbuf_full
                  << " in all found the ring buffer full, " << d.unreadable
                  << " unreadable): steps and actions in them are missing from the counts and captures\n";
        lost_said = d.ringbuf_full + d.unreadable;
        next_lost_line = now + 10'000'000'000ull;
      } else {
        next_lost_line = now + 1'000'000'000ull;  // the counters read once a second, not at every tick
      }
    }
    // A new ring segment: its samples' lines are written into it again, so
    // that they go with it (docs/design-watch.md, "The pieces": FlightRing).
    if (const auto ended = watcher.ring().segments_ended(); ended != segments_ended && live) {
      segments_ended = ended;
      live->forget_lines();
    }
    escalation_tick(now);
    if (metrics && now >= next_publish) {
      metrics->publish(watcher.metrics_text(now) + lost_metrics(live) + own_process_metrics());
      next_publish = now + 500'000'000;
    }
  };
  // While no record comes, the loop wakes for these only (and once a
  // second, which the stall checks need).
  // An escalation asked for or still settling: the loop's next regular
  // turn (Tracer::kTickSoon), not "now", which would not let it sleep at all.
  so.next_tick = [&](std::uint64_t) -> std::uint64_t {
    if (!escalate_next.empty()) return Tracer::kTickSoon;
    std::uint64_t due = watcher.next_due_ns();
    for (const auto& [pid, e] : escalated_until) {
      if (!e.until) return Tracer::kTickSoon;  // settling
      due = std::min(due, e.until);
    }
    if (metrics) due = std::min(due, next_publish);
    if (uplink) due = std::min(due, next_progress);
    return due;
  };
  so.wake_fd = loop_wakeup_fd();
  if (metrics)
    std::cerr << "ltrace-bpf: watch: metrics at http://" << opts.metrics_addr << "/metrics (port " << metrics->port()
              << ")\n";
  Session session(so);
  live = &session;
  session.prepare();  // a --pid that is no process, or no CPython, ends here: nothing said to be recorded
  char kept[48];      // --keep-bytes 400K said "0 MiB"
  if (opts.keep_bytes >= (1ull << 20))
    std::snprintf(kept, sizeof kept, "%.1f MiB", static_cast<double>(opts.keep_bytes) / 1048576.0);
  else
    std::snprintf(kept, sizeof kept, "%.1f KiB", static_cast<double>(opts.keep_bytes) / 1024.0);
  std::cerr << "ltrace-bpf: watch: recording to " << opts.watch_dir << "/ring (keeping " << opts.keep_s << " s, "
            << kept << " at most); captures in " << opts.watch_dir << "/captures\n";
  session.run(stop_requested());
  live = nullptr;
  watcher.finish(monotonic_ns());
  if (metrics) metrics->publish(watcher.metrics_text(monotonic_ns()) + own_process_metrics());
  for (auto& n : session.notes()) std::cerr << "ltrace-bpf: " << n << "\n";
  for (auto& line : watcher.summary()) std::cerr << "ltrace-bpf: watch: " << line << "\n";
  const lt_drop_counters lost = session.drops_now();
  std::cerr << "ltrace-bpf: watch: " << session.stats().records << " records, " << watcher.captures()
            << " capture(s); the ring holds " << watcher.ring().bytes() << " bytes in " << opts.watch_dir << "/ring"
            << (lost.ringbuf_full + lost.unreadable
                    ? "; " + std::to_string(lost.ringbuf_full + lost.unreadable) + " record(s) lost" +
                          // Those after its last reading: as the watch ended
                          // (its targets still escalated, an audit's 17,244).
                          (lost.ringbuf_full + lost.unreadable > lost_read
                               ? " (" + std::to_string(lost.ringbuf_full + lost.unreadable - lost_read) +
                                     " of them in its last second and as it ended)"
                               : std::string())
                    : std::string())
            << "\n";
  if (uplink && uplink->dropped())
    std::cerr << "ltrace-bpf: watch: " << uplink->dropped()
              << " collective arrival(s) not sent to the coordinator (it did not read them in time)\n";
  unlink(pid_file(opts).c_str());
  close(pid_fd);
  return 0;
}

}  // namespace lt
