#include "user/python/process_dump.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>

#include "user/core/errors.h"
#include "user/proc/procfs.h"

namespace lt::python {

namespace {

Error vanished(pid_t pid) {
  return Error(ExitCode::no_such_process, "pid " + std::to_string(pid) + " exited while being dumped");
}

}  // namespace

ProcessDump dump_process(pid_t pid, proc::NativeNamer& namer) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto born = proc::start_time(pid);
  if (!born) throw Error(ExitCode::no_such_process, "no such process: " + std::to_string(pid));
  // Still the process we started reading, and not on its way out (an
  // exiting process releases its memory map before it turns zombie).
  auto same_process = [&] {
    if (proc::start_time(pid) != born) return false;
    std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
    return !maps || maps.peek() != std::ifstream::traits_type::eof();  // unreadable: we cannot tell, so alive
  };
  ProcessDump d;
  d.pid = pid;
  d.comm = proc::read_comm(pid);
  d.cmdline = proc::read_cmdline(pid);
  Interpreter interp;
  try {
    interp = discover(pid);
  } catch (const Error& e) {
    // Whatever discover() met (maps gone, memory unreadable) means this
    // when the process is gone or going.
    if (e.code() == ExitCode::no_such_process || !same_process()) throw vanished(pid);
    throw;
  }
  d.python_version = interp.version_string();
  d.python_binary = interp.binary;
  const PyThreads py = read_thread_stacks(interp);
  d.gil_known = py.gil_known;
  std::map<pid_t, const PyThreadStack*> by_tid;
  for (const auto& s : py.threads)
    if (s.tid) by_tid[s.tid] = &s;
  // Threads the interpreter lists that /proc no longer does are reported
  // as gone; threads /proc lists with no thread state are native ones.
  std::map<pid_t, ThreadDump> threads;
  for (pid_t tid : proc::task_ids(pid)) {
    ThreadDump t;
    if (auto st = proc::thread_status(pid, tid)) {
      t.status = *st;
    } else {
      t.status.tid = tid;
      t.gone = true;
    }
    threads[tid] = std::move(t);
  }
  for (const auto& [tid, s] : by_tid) {
    ThreadDump& t = threads[tid];
    if (!t.status.tid) {
      t.status.tid = tid;
      t.gone = true;
    }
    t.python = true;
    t.frames = s->frames;
    t.truncated = s->truncated;
    t.torn = s->torn;
    if (py.gil_known && py.gil_tstate && s->tstate == py.gil_tstate) {
      t.holds_gil = true;
      d.gil_tid = tid;
    }
  }
  for (auto& [tid, t] : threads) {
    if (!t.gone && t.status.pc) t.leaf = namer.name(pid, t.status.pc);
    d.threads.push_back(std::move(t));
  }
  // Thread states whose tid could not be told (3.8-3.10 on a libc whose
  // struct pthread we do not know): their stacks still count.
  for (const auto& s : py.threads) {
    if (s.tid) continue;
    ThreadDump t;
    t.python = true;
    t.frames = s.frames;
    t.truncated = s.truncated;
    t.torn = s.torn;
    t.holds_gil = py.gil_known && py.gil_tstate && s.tstate == py.gil_tstate;
    d.threads.push_back(std::move(t));
  }
  if (!same_process()) throw vanished(pid);
  d.read_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return d;
}

Descendants dump_descendants(pid_t pid, const std::set<pid_t>& skip, proc::NativeNamer& namer, std::size_t max,
                             const std::function<void(pid_t, const Error&)>& skipped) {
  std::vector<pid_t> kids = proc::descendants(pid);
  std::sort(kids.begin(), kids.end());
  Descendants out;
  for (pid_t c : kids) {
    if (skip.count(c)) continue;
    if (out.dumps.size() == max) {
      ++out.left;
      continue;
    }
    try {
      out.dumps.push_back(dump_process(c, namer));
    } catch (const Error& e) {
      if (skipped) skipped(c, e);
    }
    namer.forget(c);
  }
  return out;
}

namespace {
bool same_frames(const std::vector<PyFrameInfo>& a, const std::vector<PyFrameInfo>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].function != b[i].function || a[i].file != b[i].file || a[i].line != b[i].line ||
        a[i].readable != b[i].readable)
      return false;
  return true;
}
bool blocked(const ThreadDump& t) {
  return !t.gone && !t.torn && t.status.state != 'R' && t.status.syscall >= 0 && t.status.runs >= 0;
}
}  // namespace

void mark_still_blocked(const ProcessDump& earlier, ProcessDump& later, double interval_s) {
  if (earlier.pid != later.pid || interval_s <= 0) return;
  std::map<pid_t, const ThreadDump*> before;
  for (const auto& t : earlier.threads)
    if (t.status.tid) before[t.status.tid] = &t;
  for (auto& t : later.threads) {
    auto it = before.find(t.status.tid);
    if (!t.status.tid || it == before.end()) continue;
    const ThreadDump& b = *it->second;
    if (blocked(t) && blocked(b) && t.status.syscall == b.status.syscall && t.status.runs == b.status.runs &&
        t.status.pc == b.status.pc && same_frames(t.frames, b.frames))
      t.blocked_at_least_s = interval_s;
  }
}

}  // namespace lt::python
