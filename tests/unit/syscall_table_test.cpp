// The remote call's system-call table (user/inject/syscall_table.h): the
// classification the thread picker relies on, as it was before the table.
#include "user/inject/syscall_table.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>

#include <set>
#include <string>

namespace {

using lt::inject::SyscallRole;

std::set<long> with_role(SyscallRole r) {
  std::set<long> out;
  for (const auto& s : lt::inject::kSyscalls)
    if (s.role == r) out.insert(s.nr);
  return out;
}

TEST(SyscallTable, NumbersAndNamesAreUnique) {
  std::set<long> nrs;
  std::set<std::string> names;
  for (const auto& s : lt::inject::kSyscalls) {
    EXPECT_TRUE(nrs.insert(s.nr).second) << s.name;
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
    EXPECT_NE(std::string(s.use), "") << s.name;
  }
}

TEST(SyscallTable, SleepsAsThePickerKnewThem) {
  std::set<long> restarted{SYS_read,          SYS_readv,  SYS_recvfrom,        SYS_recvmsg, SYS_poll,
                           SYS_select,        SYS_pause,  SYS_nanosleep,       SYS_accept,  SYS_wait4,
                           SYS_rt_sigsuspend, SYS_futex,  SYS_clock_nanosleep, SYS_waitid,  SYS_pselect6,
                           SYS_ppoll,         SYS_accept4};
#ifdef SYS_futex_waitv
  restarted.insert(SYS_futex_waitv);
#endif
  std::set<long> eintr{SYS_epoll_wait, SYS_epoll_pwait, SYS_rt_sigtimedwait};
#ifdef SYS_epoll_pwait2
  eintr.insert(SYS_epoll_pwait2);
#endif
  EXPECT_EQ(with_role(SyscallRole::sleeps_restarted), restarted);
  EXPECT_EQ(with_role(SyscallRole::sleeps_eintr), eintr);
  std::set<long> fd;
  for (const auto& s : lt::inject::kSyscalls)
    if (s.arg0_fd) fd.insert(s.nr);
  EXPECT_EQ(fd, (std::set<long>{SYS_read, SYS_readv, SYS_recvfrom, SYS_recvmsg}));
  EXPECT_EQ(with_role(SyscallRole::injected), (std::set<long>{SYS_mmap, SYS_munmap, SYS_rt_sigreturn}));
}

TEST(SyscallTable, Describe) {
  EXPECT_EQ(lt::inject::describe_syscall(SYS_futex), "futex");
  EXPECT_EQ(lt::inject::describe_syscall(SYS_clock_nanosleep), "clock_nanosleep");
  EXPECT_EQ(lt::inject::describe_syscall(SYS_rt_sigreturn), "rt_sigreturn");
  EXPECT_EQ(lt::inject::describe_syscall(100000), "syscall 100000");
  EXPECT_EQ(lt::inject::syscall_info(100000), nullptr);
}

}  // namespace
