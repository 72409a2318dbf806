#include "user/proc/exit_hold.h"

#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>

#include "user/proc/ptrace_stop.h"

namespace lt::proc {

namespace {

struct Stop {
  enum Kind { none, ended, exit, interrupt, group, signal } kind = none;
  int sig = 0;
};

// One report of `tid`'s, in the terms of an exit hold.
Stop next_stop(pid_t tid, bool block) {
  const PtraceStop s = next_ptrace_stop(tid, block);
  if (s.kind == PtraceStop::none) return {};
  if (s.kind == PtraceStop::ended) return {Stop::ended};
  if (s.event == PTRACE_EVENT_EXIT) return {Stop::exit};
  if (s.interrupt_stop()) return {Stop::interrupt, s.sig};
  if (s.group_stop()) return {Stop::group, s.sig};
  return {Stop::signal, s.sig};
}

}  // namespace

ExitHolds::~ExitHolds() {
  release_all();
}

bool ExitHolds::hold(pid_t pid, pid_t tid, bool pause) {
  if (std::any_of(held_.begin(), held_.end(), [&](const Held& h) { return h.pid == pid; })) return false;
  if (ptrace(PTRACE_SEIZE, tid, nullptr, reinterpret_cast<void*>(PTRACE_O_TRACEEXIT)) < 0) return false;
  // Gone already if this fails: poll() sees it end.
  const bool pausing = pause && ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) == 0;
  held_.push_back({pid, tid, false, pausing, false});
  return true;
}

std::vector<pid_t> ExitHolds::poll() {
  std::vector<pid_t> waiting;
  for (std::size_t i = 0; i < held_.size();) {
    Held& h = held_[i];
    bool keep = true;
    for (bool more = !h.at_exit && !h.paused; more;) {
      const Stop s = next_stop(h.tid, false);
      switch (s.kind) {
        case Stop::none:
          more = false;
          break;
        case Stop::ended:
          keep = more = false;
          break;
        case Stop::exit:
          h.at_exit = true;
          more = false;
          break;
        case Stop::group:  // stopped by job control: give it back to it
          detach(h, 0);
          keep = more = false;
          break;
        case Stop::interrupt:  // ours: the pause hold() asked for, or release()'s
          if (h.pausing) {
            h.pausing = false;
            h.paused = true;
            more = false;
          } else {
            ptrace(PTRACE_CONT, h.tid, nullptr, nullptr);
          }
          break;
        case Stop::signal:  // on its way in: pass it on
          ptrace(PTRACE_CONT, h.tid, nullptr, reinterpret_cast<void*>(static_cast<long>(s.sig)));
          break;
      }
    }
    if (!keep) {
      held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    if (h.at_exit || h.paused) waiting.push_back(h.pid);
    ++i;
  }
  return waiting;
}

bool ExitHolds::held(pid_t pid) const {
  return std::any_of(held_.begin(), held_.end(), [&](const Held& h) { return h.pid == pid; });
}

void ExitHolds::go_on(pid_t pid) {
  auto it = std::find_if(held_.begin(), held_.end(), [&](const Held& h) { return h.pid == pid; });
  if (it == held_.end()) return;
  if (!it->paused) return release(pid);
  it->paused = false;
  ptrace(PTRACE_CONT, it->tid, nullptr, nullptr);
}

void ExitHolds::release(pid_t pid) {
  auto it = std::find_if(held_.begin(), held_.end(), [&](const Held& h) { return h.pid == pid; });
  if (it == held_.end()) return;
  const Held h = *it;
  held_.erase(it);
  if (h.at_exit || h.paused) return detach(h, 0);
  // The interrupt's stop comes as soon as it runs (later only from an
  // uninterruptible sleep).
  detach_running(h.tid);
}

void ExitHolds::release_all() {
  while (!held_.empty()) release(held_.front().pid);
}

void ExitHolds::detach(const Held& h, int sig) {
  ptrace(PTRACE_DETACH, h.tid, nullptr, reinterpret_cast<void*>(static_cast<long>(sig)));
}

}  // namespace lt::proc
