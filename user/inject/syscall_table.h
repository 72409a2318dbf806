// Every system call the remote call knows (user/inject/remote_call.cpp), in
// one table: its number, name and arguments, and what it is to us.  A thread
// asleep in one of the "sleeps" calls is a candidate to borrow (the kernel
// restarts the call or returns EINTR when we interrupt it); the "injected"
// ones are made in the target's thread in place of its rt_sigreturn; the
// "tracer" ones ltrace-bpf makes itself.
#pragma once
#include <sys/syscall.h>

#include <array>
#include <string>

#include "user/inject/signal_frame.h"

namespace lt::inject {

enum class SyscallRole {
  sleeps_restarted,  // blocks; interrupted without a handler it returns -ERESTART* and runs again
  sleeps_eintr,      // blocks; interrupted it returns EINTR to the caller (who normally retries)
  injected,          // we run it in the target's thread
  tracer,            // we run it ourselves
};

struct SyscallInfo {
  long nr;
  const char* name;
  const char* args;
  SyscallRole role;
  bool arg0_fd;  // sleeps_restarted on an fd: restarted only on a stream (pipe, socket, tty)
  const char* use;
};

// clang-format off
inline constexpr std::array kSyscalls{
  // Sleeps the kernel restarts transparently: the best threads to borrow.
  SyscallInfo{SYS_read,            "read",            "fd, buf, count",                     SyscallRole::sleeps_restarted, true,  "a thread waiting for input"},
  SyscallInfo{SYS_readv,           "readv",           "fd, iov, iovcnt",                    SyscallRole::sleeps_restarted, true,  "a thread waiting for input"},
  SyscallInfo{SYS_recvfrom,        "recvfrom",        "fd, buf, len, flags, addr, addrlen", SyscallRole::sleeps_restarted, true,  "a thread waiting on a socket"},
  SyscallInfo{SYS_recvmsg,         "recvmsg",         "fd, msg, flags",                     SyscallRole::sleeps_restarted, true,  "a thread waiting on a socket (checked: pipe/socket/tty)"},
  SyscallInfo{SYS_poll,            "poll",            "fds, nfds, timeout",                 SyscallRole::sleeps_restarted, false, "a thread waiting on descriptors"},
  SyscallInfo{SYS_select,          "select",          "nfds, r, w, e, timeout",             SyscallRole::sleeps_restarted, false, "a thread waiting on descriptors"},
  SyscallInfo{SYS_pause,           "pause",           "",                                   SyscallRole::sleeps_restarted, false, "a thread waiting for a signal"},
  SyscallInfo{SYS_nanosleep,       "nanosleep",       "req, rem",                           SyscallRole::sleeps_restarted, false, "a sleeping thread"},
  SyscallInfo{SYS_accept,          "accept",          "fd, addr, addrlen",                  SyscallRole::sleeps_restarted, false, "a thread waiting for a connection"},
  SyscallInfo{SYS_accept4,         "accept4",         "fd, addr, addrlen, flags",           SyscallRole::sleeps_restarted, false, "a thread waiting for a connection"},
  SyscallInfo{SYS_wait4,           "wait4",           "pid, status, options, rusage",       SyscallRole::sleeps_restarted, false, "a thread waiting for a child"},
  SyscallInfo{SYS_waitid,          "waitid",          "idtype, id, info, options, rusage",  SyscallRole::sleeps_restarted, false, "a thread waiting for a child"},
  SyscallInfo{SYS_rt_sigsuspend,   "rt_sigsuspend",   "mask, sigsetsize",                   SyscallRole::sleeps_restarted, false, "a thread waiting for a signal"},
  SyscallInfo{SYS_futex,           "futex",           "uaddr, op, val, timeout, uaddr2, val3", SyscallRole::sleeps_restarted, false, "a thread waiting on a lock or condition"},
  SyscallInfo{SYS_clock_nanosleep, "clock_nanosleep", "clock, flags, req, rem",             SyscallRole::sleeps_restarted, false, "a sleeping thread"},
  SyscallInfo{SYS_pselect6,        "pselect6",        "nfds, r, w, e, timeout, sigmask",    SyscallRole::sleeps_restarted, false, "a thread waiting on descriptors"},
  SyscallInfo{SYS_ppoll,           "ppoll",           "fds, nfds, timeout, sigmask, size",  SyscallRole::sleeps_restarted, false, "a thread waiting on descriptors"},
#ifdef SYS_futex_waitv
  SyscallInfo{SYS_futex_waitv,     "futex_waitv",     "waiters, nr, flags, timeout, clock", SyscallRole::sleeps_restarted, false, "a thread waiting on locks"},
#endif
  // Sleeps that return EINTR when interrupted: second choice.
  SyscallInfo{SYS_epoll_wait,      "epoll_wait",      "epfd, events, max, timeout",         SyscallRole::sleeps_eintr,     false, "an event loop"},
  SyscallInfo{SYS_epoll_pwait,     "epoll_pwait",     "epfd, events, max, timeout, sigmask", SyscallRole::sleeps_eintr,    false, "an event loop"},
  SyscallInfo{SYS_rt_sigtimedwait, "rt_sigtimedwait", "set, info, timeout, sigsetsize",     SyscallRole::sleeps_eintr,     false, "a thread waiting for a signal"},
#ifdef SYS_epoll_pwait2
  SyscallInfo{SYS_epoll_pwait2,    "epoll_pwait2",    "epfd, events, max, timeout, sigmask", SyscallRole::sleeps_eintr,    false, "an event loop"},
#endif
  // Made in the borrowed thread, in place of its rt_sigreturn.
  SyscallInfo{SYS_mmap,            "mmap",            "0, 4096, PROT_READ|PROT_EXEC, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0", SyscallRole::injected, false, "maps the page of our call trampoline"},
  SyscallInfo{SYS_munmap,          "munmap",          "page, 4096",                         SyscallRole::injected,         false, "unmaps the trampoline before the thread goes home"},
  SyscallInfo{SYS_rt_sigreturn,    "rt_sigreturn",    "(the signal frame at rsp)",          SyscallRole::injected,         false, "the thread restores its own state from the frame we wrote"},
  // Ours: signals that arrived while we held the thread go back to it.
  SyscallInfo{SYS_rt_tgsigqueueinfo, "rt_tgsigqueueinfo", "tgid, tid, sig, siginfo",        SyscallRole::tracer,           false, "re-queues a signal with its siginfo (sender, value)"},
  SyscallInfo{SYS_tgkill,          "tgkill",          "tgid, tid, sig",                     SyscallRole::tracer,           false, "re-sends a signal whose siginfo cannot be queued"},
};
// clang-format on

static_assert(SYS_rt_sigreturn == kSysRtSigreturn, "the trampoline's and __restore_rt's mov $15, %eax");

inline const SyscallInfo* syscall_info(long nr) {
  for (const auto& s : kSyscalls)
    if (s.nr == nr) return &s;
  return nullptr;
}

// "futex", or "syscall 123" for one the table does not name.
inline std::string describe_syscall(long nr) {
  const SyscallInfo* s = syscall_info(nr);
  return s ? s->name : "syscall " + std::to_string(nr);
}

}  // namespace lt::inject
