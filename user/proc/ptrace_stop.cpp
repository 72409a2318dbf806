#include "user/proc/ptrace_stop.h"

#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "user/proc/procfs.h"

namespace lt::proc {

bool PtraceStop::interrupt_stop() const {
  return kind == stopped && event == PTRACE_EVENT_STOP && sig == SIGTRAP;
}

bool PtraceStop::group_stop() const {
  return kind == stopped && event == PTRACE_EVENT_STOP && sig != SIGTRAP;
}

PtraceStop next_ptrace_stop(pid_t tid, bool block) {
  for (;;) {
    // Exits are peeked first (WNOWAIT): a child of ours is not reaped here.
    siginfo_t si{};
    if (waitid(P_PID, static_cast<id_t>(tid), &si, WEXITED | WSTOPPED | __WALL | WNOWAIT | (block ? 0 : WNOHANG)) < 0) {
      if (errno == EINTR) continue;
      return {PtraceStop::ended};  // ECHILD: ended, and not ours to report any more
    }
    if (si.si_pid == 0) return {};
    if (si.si_code == CLD_EXITED || si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED) {
      // Our report as its tracer; its parent gets its own.
      if (read_ppid(tid) != getpid()) waitpid(tid, nullptr, __WALL | WNOHANG);
      return {PtraceStop::ended};
    }
    int st = 0;
    const pid_t r = waitpid(tid, &st, __WALL | WNOHANG);
    if (r < 0 && errno == EINTR) continue;
    if (r != tid || !WIFSTOPPED(st)) return {PtraceStop::ended};
    return {PtraceStop::stopped, WSTOPSIG(st), st >> 16};
  }
}

void detach_running(pid_t tid, const std::function<void()>& step) {
  if (ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) < 0) return;  // gone
  for (;;) {
    const PtraceStop s = next_ptrace_stop(tid, true);
    if (s.kind == PtraceStop::ended) return;
    if (s.kind == PtraceStop::none) continue;
    if (step) step();
    ptrace(PTRACE_DETACH, tid, nullptr, reinterpret_cast<void*>(static_cast<long>(s.signal_stop() ? s.sig : 0)));
    if (step) step();
    return;
  }
}

}  // namespace lt::proc
