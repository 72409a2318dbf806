// The kernel's x86-64 rt_sigreturn frame, built by us on a stopped thread's
// stack so that the thread can put itself back without us.
//
// A remote call (remote_call.h) returns into a trampoline that runs
// rt_sigreturn on this frame: every general register, the flags, the
// FPU/SSE/AVX state and the signal mask come back from it, whether or not
// the tracer is still alive. A thread that was asleep in a system call the
// kernel would have restarted gets the restart done the way the kernel does
// it (rip back over the 2-byte `syscall`, rax = the call's number), so the
// call is made again with its original arguments.
#pragma once
#include <sys/user.h>

#include <cstdint>
#include <vector>

namespace lt::inject {

// x86-64 encoding of glibc's and musl's __restore_rt: mov $15,%rax; syscall.
inline constexpr std::uint8_t kRestoreRtCode[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
inline constexpr long kSysRtSigreturn = 15;

// The trampoline a remote call returns into: `pop %rsp` takes the frame's
// stack pointer from the slot above the return address, `mov %rax,%rdi`
// keeps the call's result where a tracer sees it at the system call stop,
// then rt_sigreturn (mov $15,%eax; syscall).
inline constexpr std::uint8_t kTrampolineCode[] = {0x5c, 0x48, 0x89, 0xc7, 0xb8, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};

struct SignalFrame {
  std::vector<std::uint8_t> bytes;  // to be written at `at`
  std::uint64_t at = 0;             // 64-byte aligned; the frame's pretcode slot
  std::uint64_t sigreturn_sp = 0;   // rsp when rt_sigreturn runs: at + 8
  user_regs_struct resumes{};       // the registers the thread resumes with
};

// A frame that ends below `top` (exclusive). `xstate` is the XSAVE area from
// PTRACE_GETREGSET(NT_X86_XSTATE), or empty (then `fpregs` alone, FXSAVE
// layout). `restart_codes`: rax held one of the kernel's -ERESTART* codes in
// a system call (orig_rax >= 0).
SignalFrame build_signal_frame(const user_regs_struct& regs, bool restart_codes,
                               const std::vector<std::uint8_t>& xstate, const user_fpregs_struct& fpregs,
                               std::uint64_t sigmask, std::uint64_t top);

}  // namespace lt::inject
