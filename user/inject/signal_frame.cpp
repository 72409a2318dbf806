#include "user/inject/signal_frame.h"

#include <algorithm>
#include <cstring>

namespace lt::inject {

namespace {

// The kernel's struct sigcontext (64-bit), field by field.
struct KernelSigcontext {
  std::uint64_t r8, r9, r10, r11, r12, r13, r14, r15;
  std::uint64_t rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip, eflags;
  std::uint16_t cs, gs, fs, ss;
  std::uint64_t err, trapno, oldmask, cr2;
  std::uint64_t fpstate;
  std::uint64_t reserved1[8];
};
static_assert(sizeof(KernelSigcontext) == 256);

struct KernelStack {
  std::uint64_t sp;
  std::int32_t flags;
  std::int32_t pad;
  std::uint64_t size;
};

struct KernelUcontext {
  std::uint64_t flags;
  std::uint64_t link;
  KernelStack stack;
  KernelSigcontext mcontext;
  std::uint64_t sigmask;  // the kernel's sigset_t: 64 signals
};

struct RtSigframe {
  std::uint64_t pretcode;
  KernelUcontext uc;
  std::uint8_t info[128];  // siginfo: unused by rt_sigreturn
};
static_assert(sizeof(RtSigframe) == 440);

constexpr std::uint64_t kUcFpXstate = 0x1, kUcSigcontextSs = 0x2, kUcStrictRestoreSs = 0x4;
// An ss_flags mode the kernel rejects: rt_sigreturn then leaves the
// thread's sigaltstack as it is (the error is squashed). We cannot read the
// thread's alternate stack from outside, so we must not set one.
constexpr std::int32_t kKeepAltstack = 3;
constexpr std::uint32_t kFpXstateMagic1 = 0x46505853, kFpXstateMagic2 = 0x46505845;
constexpr std::size_t kFxsaveSize = 512, kSwReservedOffset = 464;

std::uint64_t align_up(std::uint64_t v, std::uint64_t a) {
  return (v + a - 1) & ~(a - 1);
}

}  // namespace

SignalFrame build_signal_frame(const user_regs_struct& regs, bool restart_codes,
                               const std::vector<std::uint8_t>& xstate, const user_fpregs_struct& fpregs,
                               std::uint64_t sigmask, std::uint64_t top) {
  SignalFrame f;
  f.resumes = regs;
  if (restart_codes && static_cast<long>(regs.orig_rax) >= 0) {
    // What the kernel does for -ERESTARTSYS/-ERESTARTNOINTR/-ERESTARTNOHAND.
    // For -ERESTART_RESTARTBLOCK (a sleep with a timeout) it would call the
    // saved restart function, which a call we run could replace; making the
    // call again instead only means a relative timeout starts over.
    f.resumes.rax = regs.orig_rax;
    f.resumes.rip = regs.rip - 2;
  }
  f.resumes.orig_rax = ~0ull;

  // The FPU area: the XSAVE image with the software bytes that mark it as
  // one (and its end magic), or the bare FXSAVE image.
  std::vector<std::uint8_t> fp;
  if (xstate.size() > kFxsaveSize) {
    fp = xstate;
    // The components in use (XSTATE_BV) plus x87/SSE; the kernel puts the
    // others in their initial state, as they were.
    std::uint64_t xfeatures = 0;
    std::memcpy(&xfeatures, fp.data() + kFxsaveSize, sizeof xfeatures);
    xfeatures |= 0x3;
    std::uint32_t sw[12] = {};
    sw[0] = kFpXstateMagic1;
    sw[1] = static_cast<std::uint32_t>(fp.size() + sizeof kFpXstateMagic2);  // extended_size
    std::memcpy(&sw[2], &xfeatures, sizeof xfeatures);
    sw[4] = static_cast<std::uint32_t>(fp.size());  // xstate_size
    std::memcpy(fp.data() + kSwReservedOffset, sw, sizeof sw);
    fp.resize(fp.size() + sizeof kFpXstateMagic2);
    std::memcpy(fp.data() + xstate.size(), &kFpXstateMagic2, sizeof kFpXstateMagic2);
  } else {
    fp.assign(kFxsaveSize, 0);
    std::memcpy(fp.data(), &fpregs, std::min(sizeof fpregs, kFxsaveSize));
    std::memset(fp.data() + kSwReservedOffset, 0, kFxsaveSize - kSwReservedOffset);
  }

  const std::uint64_t fp_offset = align_up(sizeof(RtSigframe), 64);
  const std::uint64_t total = fp_offset + fp.size();
  f.at = (top - total) & ~std::uint64_t{63};
  f.sigreturn_sp = f.at + 8;

  RtSigframe sf{};
  sf.uc.flags = kUcSigcontextSs | kUcStrictRestoreSs | (xstate.size() > kFxsaveSize ? kUcFpXstate : 0);
  sf.uc.stack.flags = kKeepAltstack;
  KernelSigcontext& sc = sf.uc.mcontext;
  const user_regs_struct& r = f.resumes;
  sc.r8 = r.r8, sc.r9 = r.r9, sc.r10 = r.r10, sc.r11 = r.r11, sc.r12 = r.r12, sc.r13 = r.r13, sc.r14 = r.r14,
  sc.r15 = r.r15;
  sc.rdi = r.rdi, sc.rsi = r.rsi, sc.rbp = r.rbp, sc.rbx = r.rbx, sc.rdx = r.rdx, sc.rax = r.rax, sc.rcx = r.rcx;
  sc.rsp = r.rsp, sc.rip = r.rip, sc.eflags = r.eflags;
  sc.cs = static_cast<std::uint16_t>(r.cs);
  sc.ss = static_cast<std::uint16_t>(r.ss);
  sc.fpstate = f.at + fp_offset;
  sf.uc.sigmask = sigmask;

  f.bytes.assign(total, 0);
  std::memcpy(f.bytes.data(), &sf, sizeof sf);
  std::memcpy(f.bytes.data() + fp_offset, fp.data(), fp.size());
  return f;
}

}  // namespace lt::inject
