// The rt_sigreturn frame a remotely called thread restores itself from
// (user/inject/signal_frame.h): layout the kernel reads, restart of an
// interrupted system call, FPU area marked as XSAVE. The integration test
// (tests/integration/test_inject_faults.py) runs it through the real kernel.
#include "user/inject/signal_frame.h"

#include <gtest/gtest.h>

#include <cstring>

using lt::inject::build_signal_frame;

namespace {

user_regs_struct regs_in_syscall(long nr, long rax) {
  user_regs_struct r{};
  r.orig_rax = static_cast<unsigned long long>(nr);
  r.rax = static_cast<unsigned long long>(rax);
  r.rip = 0x7f0000001002;
  r.rsp = 0x7ffc00010000;
  r.rdi = 11, r.r10 = 12, r.rbx = 13;
  r.eflags = 0x246, r.cs = 0x33, r.ss = 0x2b;
  return r;
}

template <typename T>
T at(const std::vector<std::uint8_t>& b, std::size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}

constexpr std::size_t kSc = 8 + 8 + 8 + 24;  // pretcode, uc_flags, uc_link, uc_stack

}  // namespace

TEST(SignalFrame, RestartableSyscallIsMadeAgain) {
  auto r = regs_in_syscall(230 /* clock_nanosleep */, -514 /* -ERESTARTNOHAND */);
  std::vector<std::uint8_t> xsave(576, 0);
  auto f = build_signal_frame(r, true, xsave, user_fpregs_struct{}, 0x4000, 0x7ffc0000f000);
  EXPECT_EQ(f.resumes.rip, r.rip - 2);
  EXPECT_EQ(f.resumes.rax, 230u);
  EXPECT_EQ(f.resumes.orig_rax, ~0ull);
  EXPECT_EQ(f.at % 64, 0u);
  EXPECT_EQ(f.sigreturn_sp, f.at + 8);
  EXPECT_LE(f.at + f.bytes.size(), 0x7ffc0000f000u);
  // sigcontext: rdi at +64, rax at +104, rip at +128, fpstate at +184.
  EXPECT_EQ(at<std::uint64_t>(f.bytes, kSc + 64), 11u);
  EXPECT_EQ(at<std::uint64_t>(f.bytes, kSc + 104), 230u);
  EXPECT_EQ(at<std::uint64_t>(f.bytes, kSc + 128), r.rip - 2);
  EXPECT_EQ(at<std::uint64_t>(f.bytes, kSc + 256), 0x4000u);  // uc_sigmask
  const std::uint64_t fp = at<std::uint64_t>(f.bytes, kSc + 184);
  EXPECT_EQ(fp % 64, 0u);
  const std::size_t fp_off = fp - f.at;
  EXPECT_EQ(at<std::uint32_t>(f.bytes, fp_off + 464), 0x46505853u);  // FP_XSTATE_MAGIC1
  EXPECT_EQ(at<std::uint32_t>(f.bytes, fp_off + 464 + 16), 576u);    // xstate_size
  EXPECT_EQ(at<std::uint32_t>(f.bytes, fp_off + 576), 0x46505845u);  // FP_XSTATE_MAGIC2
  EXPECT_EQ(at<std::int32_t>(f.bytes, 8 + 8 + 8 + 8), 3);            // altstack left alone
}

TEST(SignalFrame, ReturnedOrRunningThreadResumesAsItWas) {
  auto ran = regs_in_syscall(-1, 42);
  auto f = build_signal_frame(ran, false, {}, user_fpregs_struct{}, 0, 0x7ffc0000f000);
  EXPECT_EQ(f.resumes.rip, ran.rip);
  EXPECT_EQ(f.resumes.rax, 42u);
  auto eintr = regs_in_syscall(232 /* epoll_wait */, -4);
  f = build_signal_frame(eintr, false, {}, user_fpregs_struct{}, 0, 0x7ffc0000f000);
  EXPECT_EQ(f.resumes.rip, eintr.rip);
  EXPECT_EQ(static_cast<long>(f.resumes.rax), -4);
}
