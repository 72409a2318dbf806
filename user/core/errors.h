// Exit codes and the error type thrown at user-space boundaries.
// main() turns an lt::Error into one line on stderr and its exit code; no
// library code aborts.
#pragma once
#include <stdexcept>
#include <string>

namespace lt {

enum class ExitCode : int {
  ok = 0,
  internal = 1,         // a bug: please report
  usage = 2,            // unknown flag, bad value
  no_such_process = 3,  // pid does not exist (or vanished before attach)
  not_python = 4,       // process is not a CPython we can read
  unsupported = 5,      // CPython version or build we cannot read
  permission = 6,       // missing capability (CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE)
  bpf = 7,              // BPF load or attach failed
  io = 8,               // cannot read or write a file
  bad_trace = 9,        // not a trace file, or one from a newer ltrace-bpf
  launch = 10,          // run: the command could not be started
  partial = 11,         // cluster: some nodes gave no trace (the others' are kept)
  slurm = 12,           // cluster: Slurm is not installed or did not answer
  damaged_trace = 13,   // report: parts of the trace file were damaged and skipped (the rest is reported)
  unsafe_output = 14,   // refused to write through a link, or into a file someone else planted
  // cluster ... dump: a hang was found (ranks wait in a c10d collective; its verdict names who has not entered
  // it).  Not an error of ours: a distinct code so scripts and watchdogs can act on it.
  hang = 15,
  // A target (run's command, an exec'd or forked process met on the way) ended before its probes were in:
  // nothing of it was recorded.
  target_exited = 16,
  // diff --fail-if-slower PCT: B's train step is significantly slower than A's, by PCT % or more.
  regression = 17,
  // watch --capture-now / --dump-now: the watcher refused, the process is not the caller's.
  refused = 18,
  // diff: the two sides cannot be compared (a side's part holds no action, they are recordings of different
  // jobs, or --fail-if-slower with no train steps on a side): a regression gate must not pass on nothing.
  not_comparable = 19,
  // watch: another watcher runs on this DIR, or watches one of these processes (one watcher per process on a
  // machine); the line names it.
  watched = 20,
};

// What each exit code says, for --help (user/cli/options.cpp), one line
// each, in order: every ExitCode once (tests/unit/options_test.cpp).
struct ExitCodeText {
  ExitCode code;
  const char* says;
};
inline constexpr ExitCodeText kExitCodeTexts[] = {
    {ExitCode::ok, "ok"},
    {ExitCode::internal, "internal error"},
    {ExitCode::usage, "usage"},
    {ExitCode::no_such_process, "no such process (--all: none found)"},
    {ExitCode::not_python, "not a CPython process"},
    {ExitCode::unsupported, "unsupported CPython version or build"},
    {ExitCode::permission, "missing privileges (CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE)"},
    {ExitCode::bpf, "BPF load/attach failed"},
    {ExitCode::io, "cannot read or write a file"},
    {ExitCode::bad_trace, "not a trace file (or from a newer version)"},
    {ExitCode::launch, "run: the command could not be started"},
    {ExitCode::partial, "cluster: some nodes gave no trace (the others' are kept)"},
    {ExitCode::slurm, "cluster: Slurm not available"},
    {ExitCode::damaged_trace,
     "report, diff: parts of a trace file were damaged and skipped (the rest is read); diff: also a trace cut "
     "short (report reads one with a warning and exit 0: a killed recorder's)"},
    {ExitCode::unsafe_output, "refused to write through a link, or into a file someone else planted"},
    {ExitCode::hang, "cluster ... dump: a hang was found"},
    {ExitCode::target_exited, "a target exited during attach: nothing of it was recorded"},
    {ExitCode::regression, "diff --fail-if-slower: B's train step is significantly slower, by PCT % or more"},
    {ExitCode::refused, "watch --capture-now/--dump-now: refused, the process is not the caller's"},
    {ExitCode::not_comparable, "diff: the sides cannot be compared (no action in a part, different jobs, no steps)"},
    {ExitCode::watched, "watch: another watcher runs on this DIR or watches one of these processes"},
};

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& what) : std::runtime_error(what), code_(code) {}
  ExitCode code() const noexcept { return code_; }

 private:
  ExitCode code_;
};

}  // namespace lt
