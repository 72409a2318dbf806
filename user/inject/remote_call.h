// Calling a function inside another process with ptrace (x86-64 only).
//
// RemoteThread picks one thread of the target at a safe point, stops only that
// thread (PTRACE_SEIZE + PTRACE_INTERRUPT; the other threads keep running),
// and runs functions on it.
//
// The tracer may die at any instant (OOM killer, SIGKILL); the kernel then
// detaches the thread and it runs on with the registers and memory it has.
// So the thread can always restore itself: before its registers change, a
// signal frame with its original state (all registers, FPU/SSE/AVX, signal
// mask; an interrupted system call set to be made again) is written below
// its red zone (signal_frame.h), and from then on whatever it runs ends in
// rt_sigreturn on that frame. A call returns into a trampoline (in a page
// mapped by a system call made in place of libc's __restore_rt) that keeps
// the result in rdi for us and runs rt_sigreturn; we stop it there (a
// PTRACE_SYSCALL stop) and read the result. release() (or the destructor)
// unmaps the trampoline, skips that last rt_sigreturn so the thread stops
// in signal delivery, puts back its registers, FPU state and mask there (so
// the kernel restarts an interrupted timed sleep exactly; after a tracer's
// death the frame makes the call again instead, a relative timeout starting
// over), re-delivers signals that arrived meanwhile, and detaches. No code
// of the target is patched; no SIGSTOP is ever sent. A call past its
// deadline is left to finish and restore the thread by itself (its 4 KiB
// trampoline page stays mapped).
//
// Safe point: a thread asleep in a system call that restarts transparently
// (futex, nanosleep, clock_nanosleep, poll, select, wait4, read on a pipe or
// socket, ...), else one asleep in epoll_wait/sigtimedwait (the caller sees
// EINTR, as with any debugger), else a running thread (the main one first)
// stopped in the program itself or libpython, never in libc, ld.so,
// libstdc++, a driver...: there it could hold the malloc, loader or a driver
// lock that our call would wait for forever. The program's own threads come
// before threads a runtime renamed for itself (cuda-EvtHandlr, ...). The
// stack must be the main stack or a thread stack (rw above a PROT_NONE guard)
// with room to spare; SIGSEGV must not be blocked.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>

namespace lt::inject {

using Clock = std::chrono::steady_clock;

// ptrace ties a tracee to the tracing thread: use a RemoteThread from the
// thread that attached it, and let nothing else in this process wait for the
// target's status meanwhile (waitpid(-1) or a blocking waitpid on a child
// we inject into would take our stop reports).
class RemoteThread {
 public:
  // Picks, seizes and stops a thread of `pid`. Throws lt::Error:
  // no_such_process (gone), permission (EPERM from ptrace), unsupported (no
  // thread reached a safe point before `deadline`, traced, stopped, ...).
  static RemoteThread attach(pid_t pid, Clock::time_point deadline);

  RemoteThread(RemoteThread&&) noexcept;
  RemoteThread& operator=(RemoteThread&&) = delete;
  ~RemoteThread();  // release(), errors swallowed

  pid_t pid() const;
  pid_t tid() const;
  // Where the thread was stopped: "blocked in futex", "running at 0x...".
  const std::string& where() const;

  // Copies `len` bytes into the scratch area below the thread's red zone and
  // returns their address there. Valid until release().
  std::uint64_t push_scratch(const void* data, std::size_t len);
  std::uint64_t push_string(const std::string& s) { return push_scratch(s.c_str(), s.size() + 1); }

  // Calls fn(args...) (at most 6 integer/pointer arguments) on the stopped
  // thread and returns rax. Throws lt::Error if the thread exits, the call
  // faults (state restored, the fault suppressed) or `deadline` passes (the
  // thread is let go to finish the call and restore itself: see the message).
  std::uint64_t call(std::uint64_t fn, std::initializer_list<std::uint64_t> args, Clock::time_point deadline);

  // Writes target memory (e.g. to put back a value a call changed); false
  // if not every byte could be written.
  bool write_memory(std::uint64_t addr, const void* data, std::size_t len);

  // Reads a NUL-terminated string from the target (at most `max` bytes).
  std::optional<std::string> read_cstring(std::uint64_t addr, std::size_t max = 4096) const;

  // Restores everything and detaches. Idempotent. Throws lt::Error only if
  // the thread cannot be restored (it exited).
  void release();

  // Tests only: `hook(n)` runs at the n-th step of this process's remote
  // calls (each stop and each change to the thread), e.g. to SIGKILL the
  // tracer there (tests/integration/test_inject_faults.py). Resets the count.
  static void set_step_hook(void (*hook)(int step));

  struct State;  // opaque

 private:
  explicit RemoteThread(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace lt::inject
