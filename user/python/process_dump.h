// `dump`: what every thread of one process is doing right now, without
// stopping it: /proc for each thread's state, blocking system call and
// native leaf; the interpreter's memory for its Python stack and the GIL
// holder (thread_stacks.h).  The one function the cluster-wide dump can
// call per rank (docs/design-dump.md).
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "user/core/errors.h"
#include "user/proc/native_symbols.h"
#include "user/proc/thread_status.h"
#include "user/python/thread_stacks.h"

namespace lt::python {

struct ThreadDump {
  proc::ThreadStatus status;
  bool gone = false;    // listed by the interpreter, but exited before /proc was read
  bool python = false;  // has a Python thread state
  bool holds_gil = false;
  std::vector<PyFrameInfo> frames;  // innermost first
  bool truncated = false, torn = false;
  std::optional<proc::NativeName> leaf;  // where it is blocked (the instruction after its system call)
  // > 0: seen blocked in the same system call, at the same Python stack, in
  // two reads this many seconds apart, and never put on a CPU in between: a
  // lower bound on how long it has been blocked (mark_still_blocked).
  double blocked_at_least_s = 0;
};

struct ProcessDump {
  pid_t pid = 0;
  std::string comm;
  std::vector<std::string> cmdline;
  std::string python_version, python_binary;
  bool gil_known = false;
  pid_t gil_tid = 0;                // 0: nobody holds it (or not known)
  std::vector<ThreadDump> threads;  // by tid
  double read_ms = 0;               // how long reading took (measured, monotonic clock)
};

// Throws lt::Error: no_such_process when `pid` does not exist or exits (or
// is replaced by another process with its pid) while it is read;
// not_python / unsupported / permission as discover() does.
ProcessDump dump_process(pid_t pid, proc::NativeNamer& namer);

// The Python processes among `pid`'s descendants (children, grandchildren:
// forkserver's DataLoader workers), lowest pid first, each read now with
// dump_process; those in `skip` are not read, nor more than `max` (`left`
// counts the rest). A descendant that is not Python (a shell, a compiler)
// or that exits meanwhile goes to `skipped` when given.
struct Descendants {
  std::vector<ProcessDump> dumps;
  std::size_t left = 0;
};
Descendants dump_descendants(pid_t pid, const std::set<pid_t>& skip, proc::NativeNamer& namer, std::size_t max,
                             const std::function<void(pid_t, const Error&)>& skipped = {});

// Two dumps of one process, the second begun `interval_s` after the first
// ended: every thread of `later` that is blocked in a system call in both,
// in the same call at the same Python stack, and whose scheduler run count
// did not change (it was never on a CPU in between, so it never left that
// call), gets blocked_at_least_s = interval_s.  Threads whose run count is
// not known get nothing: the same stack twice could be two visits.
void mark_still_blocked(const ProcessDump& earlier, ProcessDump& later, double interval_s);

}  // namespace lt::python
