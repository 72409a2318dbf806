#include "user/inject/remote_call.h"

#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "user/core/errors.h"
#include "user/inject/signal_frame.h"
#include "user/inject/syscall_table.h"
#include "user/proc/job_stop.h"
#include "user/proc/procfs.h"

namespace lt::inject {

namespace {

using namespace std::chrono_literals;

// Kernel-internal "restart me" codes a blocked system call returns when a
// signal (or PTRACE_INTERRUPT) wakes it; the kernel turns them into a restart
// on the way back to user space unless a handler says otherwise.
constexpr long kERestartSys = 512, kERestartNoIntr = 513, kERestartNoHand = 514, kERestartBlock = 516;

constexpr std::uint64_t kRedZone = 128;
constexpr std::uint64_t kScratchMax = 32 * 1024;        // the signal frame (up to ~12 KiB) and strings
constexpr std::uint64_t kThreadStackNeed = 128 * 1024;  // free stack a thread must have for the call
constexpr std::uint64_t kFlagsDF = 0x400, kFlagsTF = 0x100;

void (*g_step_hook)(int) = nullptr;
int g_steps = 0;

// Every point where the tracer could die with the thread in a new state.
void step() {
  if (g_step_hook) g_step_hook(++g_steps);
}

constexpr int kSyscallStop = SIGTRAP | 0x80;  // PTRACE_O_TRACESYSGOOD

std::string hex(std::uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string basename_of(const std::string& p) {
  auto s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

bool is_restart_code(long rax) {
  return rax == -kERestartSys || rax == -kERestartNoIntr || rax == -kERestartNoHand || rax == -kERestartBlock;
}

// What a thread asleep in system call `nr` does when we interrupt it
// (syscall_table.h).
bool restarts_transparently(long nr) {
  const SyscallInfo* s = syscall_info(nr);
  return s && s->role == SyscallRole::sleeps_restarted;
}
bool returns_eintr(long nr) {
  const SyscallInfo* s = syscall_info(nr);
  return s && s->role == SyscallRole::sleeps_eintr;
}
bool reads_fd(long nr) {
  const SyscallInfo* s = syscall_info(nr);
  return s && s->arg0_fd;
}

// A read on these can only block waiting for a writer, and returns
// -ERESTARTSYS (restarted) if interrupted before any byte arrived.
bool fd_is_stream(pid_t pid, std::uint64_t fd) {
  char buf[256];
  std::string link = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  ssize_t n = readlink(link.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return false;
  std::string t(buf, static_cast<std::size_t>(n));
  return t.rfind("pipe:", 0) == 0 || t.rfind("socket:", 0) == 0 || t.rfind("anon_inode:", 0) == 0 ||
         t.rfind("/dev/pts/", 0) == 0 || t.rfind("/dev/tty", 0) == 0;
}

struct Candidate {
  pid_t tid = 0;
  int rank = 0;     // 0 transparent syscall, 1 EINTR syscall, 2 running
  long nr = -1;     // the blocking syscall for ranks 0 and 1
  bool own = true;  // not renamed by a runtime (cuda-EvtHandlr, ...)
};

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Threads worth trying, best first. The program's own threads (named like
// the main thread or the executable; threads inherit the name) before those
// a runtime named for itself (CUDA's event handler, NCCL, ...: running our
// call there could wait on the thread's own job); within each, asleep in a
// syscall that restarts transparently, then in an EINTR one, then running;
// the main thread first.
std::vector<Candidate> candidates(pid_t pid) {
  std::vector<Candidate> out;
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  std::vector<pid_t> tids;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    long t = std::strtol(e->d_name, &end, 10);
    if (*end == '\0' && t > 0) tids.push_back(static_cast<pid_t>(t));
  }
  closedir(d);
  std::vector<std::string> own_names{trim(slurp(dir + "/" + std::to_string(pid) + "/comm")), "pt_main_thread"};
  char exe[4096];
  ssize_t n = readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), exe, sizeof exe - 1);
  if (n > 0) own_names.push_back(basename_of(std::string(exe, static_cast<std::size_t>(n))).substr(0, 15));
  for (pid_t tid : tids) {
    std::string base = dir + "/" + std::to_string(tid) + "/";
    std::string stat = slurp(base + "stat");
    auto lp = stat.find('('), rp = stat.rfind(')');
    if (lp == std::string::npos || rp == std::string::npos || rp + 2 >= stat.size()) continue;
    char state = stat[rp + 2];
    Candidate c;
    c.tid = tid;
    c.own = std::find(own_names.begin(), own_names.end(), stat.substr(lp + 1, rp - lp - 1)) != own_names.end();
    if (state == 'R') {
      c.rank = 2;
    } else if (state == 'S') {
      std::istringstream sc(slurp(base + "syscall"));
      std::string first;
      sc >> first;
      if (first.empty() || first == "running") {
        c.rank = 2;  // woke up meanwhile
      } else {
        c.nr = std::strtol(first.c_str(), nullptr, 10);
        std::string a0;
        sc >> a0;
        if (restarts_transparently(c.nr) &&
            (!reads_fd(c.nr) || fd_is_stream(pid, std::strtoull(a0.c_str(), nullptr, 16))))
          c.rank = 0;
        else if (returns_eintr(c.nr))
          c.rank = 1;
        else
          continue;
      }
    } else {
      continue;  // D (uninterruptible), stopped, zombie
    }
    out.push_back(c);
  }
  std::stable_sort(out.begin(), out.end(), [pid](const Candidate& a, const Candidate& b) {
    if (a.own != b.own) return a.own;
    if (a.rank != b.rank) return a.rank < b.rank;
    return (a.tid == pid) > (b.tid == pid);
  });
  return out;
}

// A running thread is stopped only in the program itself or in libpython:
// elsewhere (libc, ld.so, libstdc++, libcuda, ...) it may hold the malloc,
// stdio, loader or a driver lock, which our call could then wait for forever.
// The executable's name as /proc/PID/maps spells it.
std::string program_path(pid_t pid, const std::vector<proc::Mapping>& maps) {
  char buf[4096];
  ssize_t n = readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), buf, sizeof buf - 1);
  std::string exe = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
  for (auto& m : maps)
    if (m.path == exe) return exe;
  for (auto& m : maps)  // unreadable link: the lowest file mapping is the program's
    if (!m.path.empty() && m.path[0] == '/') return m.path;
  return exe;
}

bool is_program_code(const std::string& path, const std::string& exe) {
  if (path.empty()) return false;  // anonymous: JIT code
  return path == exe || basename_of(path).rfind("libpython", 0) == 0;
}

const proc::Mapping* mapping_of(const std::vector<proc::Mapping>& maps, std::uint64_t addr) {
  for (auto& m : maps)
    if (addr >= m.start && addr < m.end) return &m;
  return nullptr;
}

bool wait_until(pid_t tid, int& st, Clock::time_point deadline) {
  auto pause = 10us;
  // A stop we caused comes within microseconds once the thread runs:
  // yielding (to it, on a busy machine) for the first 2 ms beats sleeping,
  // as an injection goes through a few dozen stops.
  const auto yield_until = Clock::now() + 2ms;
  for (;;) {
    pid_t r = waitpid(tid, &st, __WALL | WNOHANG);
    if (r == tid) return true;
    if (r < 0) {
      if (errno == EINTR) continue;
      // ECHILD: the thread is gone and someone reaped it.
      st = 0;
      return true;
    }
    const auto now = Clock::now();
    if (now >= deadline) return false;
    if (now < yield_until) {
      sched_yield();
      continue;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, 200us);
  }
}

// Waits for a stop we asked for (PTRACE_INTERRUPT): it comes at once unless
// the thread sits in uninterruptible sleep; a tracee cannot be detached
// before it stops, so after `deadline` we keep waiting, blocking.
void wait_requested_stop(pid_t tid, int& st, Clock::time_point deadline) {
  if (wait_until(tid, st, deadline)) return;
  while (waitpid(tid, &st, __WALL) < 0) {
    if (errno != EINTR) {
      st = 0;
      return;
    }
  }
}

bool gone(int st) {
  return WIFEXITED(st) || WIFSIGNALED(st) || st == 0;
}

bool is_job_control_stop(int sig) {
  return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

bool is_fault(const siginfo_t& si) {
  switch (si.si_signo) {
    case SIGSEGV:
    case SIGBUS:
    case SIGILL:
    case SIGFPE:
    case SIGTRAP:
    case SIGSYS:
      return si.si_code > 0;  // raised by the CPU or the kernel, not sent
    default:
      return false;
  }
}

// Whether `tid` is gone or a zombie within 100 ms: an exit in progress ends
// within microseconds; a thread we may not trace stays as it is.
bool thread_exiting(pid_t pid, pid_t tid) {
  const std::string stat = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/stat";
  for (int i = 0; i < 10; ++i) {
    std::ifstream f(stat);
    std::string text((std::istreambuf_iterator<char>(f)), {});
    const auto rp = text.rfind(')');
    if (!f || rp == std::string::npos || rp + 2 >= text.size()) return true;  // gone
    const char state = text[rp + 2];
    if (state == 'Z' || state == 'X') return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

[[noreturn]] void throw_ptrace_perm(pid_t pid, pid_t tid) {
  throw Error(ExitCode::permission, "cannot ptrace pid " + std::to_string(pid) + " (thread " + std::to_string(tid) +
                                        "): permission denied; need CAP_SYS_PTRACE (run as root), or the same uid with "
                                        "kernel.yama.ptrace_scope=0, and no other debugger/profiler attached");
}

// glibc's and musl's __restore_rt (a local symbol) by its code bytes, in
// the executable mappings of the target's libc.
std::uint64_t find_restore_rt(pid_t pid) {
  for (const auto& m : proc::read_maps(pid)) {
    if (m.perms.find('x') == std::string::npos) continue;
    std::string b = basename_of(m.path);
    if (b.rfind("libc.so", 0) != 0 && b.rfind("libc-", 0) != 0 && b.rfind("libc.musl", 0) != 0 &&
        b.rfind("ld-musl", 0) != 0)
      continue;
    std::vector<std::uint8_t> buf(m.end - m.start);
    if (!proc::read_memory(pid, m.start, buf.data(), buf.size())) continue;
    auto it = std::search(buf.begin(), buf.end(), std::begin(kRestoreRtCode), std::end(kRestoreRtCode));
    if (it != buf.end()) return m.start + static_cast<std::uint64_t>(it - buf.begin());
  }
  return 0;
}

}  // namespace

struct RemoteThread::State {
  // Ctrl-Z waits until this thread is given back (user/proc/job_stop.h).
  proc::JobStopDeferral job_stop_waits;
  pid_t pid = 0, tid = 0;
  bool attached = false;     // seized and stopped
  bool dirty = false;        // registers changed: restore before detaching
  bool signal_stop = false;  // the current stop is a signal-delivery-stop
  user_regs_struct saved{};
  user_fpregs_struct fpregs{};
  std::vector<std::uint8_t> xstate;  // empty: no XSAVE; fpregs then
  std::uint64_t scratch_lo = 0, scratch_floor = 0;
  std::string where;
  std::vector<siginfo_t> pending;  // signals that arrived while we held the thread
  std::uint64_t sigmask = 0;
  bool restart = false;  // stopped in a system call the kernel would restart

  // Once armed, the thread can always restore itself: its stack holds a
  // signal frame with its original state, and whatever it runs ends in
  // rt_sigreturn on that frame (libc's __restore_rt, or our trampoline
  // after a call). The kernel detaches a tracee whose tracer dies and lets
  // it run on, so nothing we leave in flight may need us to finish.
  bool armed = false;
  std::uint64_t restore_rt = 0;  // mov $15,%rax; syscall in its libc
  std::uint64_t page = 0;        // our trampoline's page (0: none)
  std::uint64_t frame_sp = 0;    // rsp at which rt_sigreturn finds the frame
  user_regs_struct resumes{};    // what rt_sigreturn gives back
  user_regs_struct now{};        // registers at the current stop

  bool write_memory(std::uint64_t addr, const void* data, std::size_t len) const {
    iovec local{const_cast<void*>(data), len};
    iovec remote{reinterpret_cast<void*>(addr), len};
    if (process_vm_writev(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(len)) return true;
    int fd = open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t n = pwrite(fd, data, len, static_cast<off_t>(addr));
    close(fd);
    return n == static_cast<ssize_t>(len);
  }

  void save_fpu() {
    ptrace(PTRACE_GETFPREGS, tid, nullptr, &fpregs);
    xstate.assign(64 * 1024, 0);
    iovec iov{xstate.data(), xstate.size()};
    if (ptrace(PTRACE_GETREGSET, tid, reinterpret_cast<void*>(NT_X86_XSTATE), &iov) == 0)
      xstate.resize(iov.iov_len);
    else
      xstate.clear();
  }

  // The call runs on the thread's own SSE/AVX registers (the ABI lets the
  // callee clobber them); only an x87 stack left non-empty by the
  // interrupted code would break it, so that one is emptied.
  void prepare_fpu() const {
    if (fpregs.ftw == 0) return;
    user_fpregs_struct f = fpregs;
    f.swd = 0;
    f.ftw = 0;
    ptrace(PTRACE_SETFPREGS, tid, nullptr, &f);
  }

  bool restore_registers() {
    if (ptrace(PTRACE_SETREGS, tid, nullptr, &saved) != 0) return false;
    bool fp_ok = false;
    if (!xstate.empty()) {
      iovec iov{xstate.data(), xstate.size()};
      fp_ok = ptrace(PTRACE_SETREGSET, tid, reinterpret_cast<void*>(NT_X86_XSTATE), &iov) == 0;
    }
    if (!fp_ok) ptrace(PTRACE_SETFPREGS, tid, nullptr, &fpregs);
    dirty = false;
    return true;
  }

  // Puts everything back and lets the thread go; the first signal that
  // arrived meanwhile is re-delivered through the detach (with its siginfo),
  // any others are sent again.
  void detach() {
    if (!attached) return;
    if (armed) {
      try {
        return_home(Clock::now() + 2s);
      } catch (const Error&) {
        if (!attached) throw;  // it exited
        armed = false;         // put it back ourselves, from the stop it is in
        dirty = true;
      }
    }
    if (dirty && !restore_registers() && errno == ESRCH) {
      attached = false;
      thread_gone("before it could be restored");
    }
    int sig = 0;
    std::size_t first_resend = 0;
    if (!pending.empty() && signal_stop && ptrace(PTRACE_SETSIGINFO, tid, nullptr, &pending[0]) == 0) {
      sig = pending[0].si_signo;
      first_resend = 1;
    }
    ptrace(PTRACE_DETACH, tid, nullptr, reinterpret_cast<void*>(static_cast<long>(sig)));
    attached = false;
    for (std::size_t i = first_resend; i < pending.size(); ++i) {
      siginfo_t si = pending[i];
      if (si.si_code < 0 && si.si_code != SI_TKILL && syscall(SYS_rt_tgsigqueueinfo, pid, tid, si.si_signo, &si) == 0)
        continue;
      syscall(SYS_tgkill, pid, tid, si.si_signo);
    }
    pending.clear();
  }

  void step_write(std::uint64_t addr, const void* data, std::size_t len) {
    step();
    if (!write_memory(addr, data, len))
      throw Error(ExitCode::internal, "cannot write the stack of thread " + std::to_string(tid) + " at " + hex(addr));
  }

  bool set_regs(const user_regs_struct& r) {
    step();
    if (ptrace(PTRACE_SETREGS, tid, nullptr, &r) != 0) {
      if (errno == ESRCH) thread_gone("while we held it");
      return false;
    }
    now = r;
    return true;
  }

  // Resumes to the next system call stop (entry or exit) and reads the
  // registers there. Signals meanwhile are kept for the detach; a fault
  // (our own doing: a bad frame) throws, the thread restored by us.
  void to_syscall_stop(Clock::time_point deadline) {
    step();
    ptrace(PTRACE_SYSCALL, tid, nullptr, nullptr);
    signal_stop = false;
    for (;;) {
      int st = 0;
      if (!wait_until(tid, st, deadline)) {
        ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr);
        continue;  // a stop comes; the injected system calls do not block
      }
      if (gone(st)) thread_gone("while it restored itself");
      if (!WIFSTOPPED(st)) continue;
      step();
      int event = st >> 16, sig = WSTOPSIG(st);
      if (event == 0 && sig == kSyscallStop) {
        ptrace(PTRACE_GETREGS, tid, nullptr, &now);
        return;
      }
      if (event == 0) {
        siginfo_t si{};
        ptrace(PTRACE_GETSIGINFO, tid, nullptr, &si);
        if (is_fault(si)) {
          signal_stop = true;  // the fault is not delivered
          throw Error(ExitCode::internal, "thread " + std::to_string(tid) + " faulted (signal " + std::to_string(sig) +
                                              ") while restoring itself; restored by the tracer");
        }
        pending.push_back(si);
      }
      ptrace(PTRACE_SYSCALL, tid, nullptr, nullptr);
    }
  }

  bool at_our_sigreturn() const {
    return static_cast<long>(now.orig_rax) == kSysRtSigreturn && now.rsp == frame_sp &&
           (now.rip == restore_rt + sizeof kRestoreRtCode || (page && now.rip == page + sizeof kTrampolineCode));
  }

  // Runs system call `nr` in place of the rt_sigreturn the thread stands at
  // (entry stop), returning to __restore_rt: a tracer dying at any point
  // leaves it on its way to rt_sigreturn. Returns rax.
  std::uint64_t inject_syscall(long nr, std::initializer_list<std::uint64_t> args, Clock::time_point deadline) {
    user_regs_struct r = now;
    r.orig_rax = static_cast<std::uint64_t>(nr);
    unsigned long long* regs[] = {&r.rdi, &r.rsi, &r.rdx, &r.r10, &r.r8, &r.r9};
    std::size_t i = 0;
    for (auto a : args) *regs[i++] = a;
    r.rip = restore_rt;
    r.rsp = frame_sp;
    set_regs(r);
    to_syscall_stop(deadline);  // its exit
    return now.rax;
  }

  // Walks the thread (from any stop of ours) to the rt_sigreturn entry.
  void to_sigreturn_entry(Clock::time_point deadline) {
    if (at_our_sigreturn()) return;
    user_regs_struct r = now;
    r.rip = restore_rt;
    r.rsp = frame_sp;
    r.orig_rax = ~0ull;  // a syscall entry stop: skip it; a signal stop: no restart
    set_regs(r);
    for (int i = 0; i < 4 && !at_our_sigreturn(); ++i) to_syscall_stop(deadline);
    if (!at_our_sigreturn())
      throw Error(ExitCode::internal, "thread " + std::to_string(tid) + " did not reach rt_sigreturn");
  }

  // Arms the thread (see `armed`): finds __restore_rt, writes the frame,
  // and maps the trampoline with a system call made in place of the
  // rt_sigreturn. Before the first register change, nothing the program
  // can see has changed (the frame lies below its red zone).
  void arm(Clock::time_point deadline) {
    now = saved;
    if (!restore_rt) restore_rt = find_restore_rt(pid);
    if (!restore_rt)
      throw Error(ExitCode::unsupported, "pid " + std::to_string(pid) +
                                             ": no rt_sigreturn stub (__restore_rt) found in its libc; cannot call "
                                             "into it safely");
    SignalFrame f = build_signal_frame(saved, restart, xstate, fpregs, sigmask, scratch_lo);
    if (f.at < scratch_floor) throw Error(ExitCode::internal, "remote scratch area full (signal frame)");
    step();
    if (!write_memory(f.at, f.bytes.data(), f.bytes.size()))
      throw Error(ExitCode::internal, "cannot write the stack of thread " + std::to_string(tid) + " at " + hex(f.at));
    scratch_lo = f.at;
    frame_sp = f.sigreturn_sp;
    resumes = f.resumes;
    armed = true;
    dirty = false;  // from here the thread restores itself
    to_sigreturn_entry(deadline);
    std::uint64_t at =
        inject_syscall(SYS_mmap, {0, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, ~0ull, 0}, deadline);
    if (static_cast<std::int64_t>(at) < 0 && static_cast<std::int64_t>(at) > -4096)
      throw Error(ExitCode::internal, "mmap in pid " + std::to_string(pid) + " failed: " +
                                          std::strerror(static_cast<int>(-static_cast<std::int64_t>(at))));
    page = at;
    step();
    std::uint8_t check[sizeof kTrampolineCode] = {};
    if (!write_memory(page, kTrampolineCode, sizeof kTrampolineCode) ||
        !proc::read_memory(pid, page, check, sizeof check) || std::memcmp(check, kTrampolineCode, sizeof check) != 0)
      throw Error(ExitCode::internal, "cannot write the call trampoline into pid " + std::to_string(pid));
  }

  // Brings the thread home: unmaps the trampoline, then, instead of its
  // rt_sigreturn (which would make an interrupted sleep start over: the
  // kernel's restart of a timed sleep needs the original registers at a
  // stop in signal delivery), skips that system call with a PTRACE_INTERRUPT
  // queued, so the thread stops in signal delivery again; there its own
  // registers, FPU state and mask go back as the old code put them back,
  // and the kernel restarts the interrupted call exactly. A tracer dying at
  // any point leaves the thread with rip at __restore_rt and its frame.
  void return_home(Clock::time_point deadline) {
    to_sigreturn_entry(deadline);
    if (page) {
      inject_syscall(SYS_munmap, {page, 4096}, deadline);
      page = 0;
      to_sigreturn_entry(deadline);
    }
    user_regs_struct r = now;
    r.rip = restore_rt;  // if we die now, it runs rt_sigreturn
    r.orig_rax = ~0ull;  // skip it
    set_regs(r);
    step();
    ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr);
    ptrace(PTRACE_CONT, tid, nullptr, nullptr);
    for (;;) {
      int st = 0;
      wait_requested_stop(tid, st, deadline);
      if (gone(st)) thread_gone("while it was restored");
      if (!WIFSTOPPED(st)) continue;
      step();
      int event = st >> 16, sig = WSTOPSIG(st);
      if (event == 0 && sig == kSyscallStop) {  // not expected after PTRACE_CONT
        ptrace(PTRACE_CONT, tid, nullptr, nullptr);
        continue;
      }
      if (event == 0) {  // a signal on its way: in signal delivery too; keep it
        siginfo_t si{};
        ptrace(PTRACE_GETSIGINFO, tid, nullptr, &si);
        if (!is_fault(si)) pending.push_back(si);
      }
      break;
    }
    armed = false;
    signal_stop = false;
    dirty = true;  // detach() puts back registers and FPU state
    ptrace(PTRACE_SETSIGMASK, tid, reinterpret_cast<void*>(sizeof sigmask), &sigmask);
  }

  // The thread died under us: nothing to restore or detach.
  [[noreturn]] void thread_gone(const std::string& during) {
    attached = false;
    dirty = false;
    armed = false;
    int st;
    waitpid(tid, &st, __WALL | WNOHANG);  // collect its exit: no zombie left with us
    if (!proc::exists(pid))
      throw Error(ExitCode::no_such_process, "process " + std::to_string(pid) + " exited " + during);
    throw Error(ExitCode::internal,
                "thread " + std::to_string(tid) + " of pid " + std::to_string(pid) + " exited " + during);
  }
};

namespace {

// Tries one thread: seize, interrupt, check the stop is a safe point.
// Returns the stopped thread or null (detached again, nothing changed);
// `why` says why not.
std::unique_ptr<RemoteThread::State> try_thread(pid_t pid, const Candidate& c, const std::vector<proc::Mapping>& maps,
                                                const std::string& exe, Clock::time_point deadline, std::string& why) {
  pid_t tid = c.tid;
  // Made first: its JobStopDeferral holds a Ctrl-Z off while the thread
  // may be in a ptrace stop of ours, from the seize on.
  auto s = std::make_unique<RemoteThread::State>();
  step();
  if (ptrace(PTRACE_SEIZE, tid, nullptr, reinterpret_cast<void*>(static_cast<long>(PTRACE_O_TRACESYSGOOD))) != 0) {
    // A thread already exiting also answers EPERM (PF_EXITING): that is an
    // exit, not a refusal (a test injecting until its target exits saw it).
    if (errno == EPERM && !thread_exiting(pid, tid)) throw_ptrace_perm(pid, tid);
    if (errno == ESRCH || errno == EPERM) {
      why = "thread " + std::to_string(tid) + " exited";
      return nullptr;
    }
    throw Error(ExitCode::internal, "PTRACE_SEIZE " + std::to_string(tid) + ": " + std::strerror(errno));
  }
  int st = 0;
  if (ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0) {
    // Only if it is exiting: collect the exit so it leaves no zombie.
    wait_until(tid, st, Clock::now() + 100ms);
    why = "thread " + std::to_string(tid) + " exited";
    return nullptr;
  }
  wait_requested_stop(tid, st, std::max(deadline, Clock::now() + 2s));
  if (gone(st)) {
    why = "thread " + std::to_string(tid) + " exited";
    return nullptr;
  }

  s->pid = pid;
  s->tid = tid;
  s->attached = true;
  int event = st >> 16, sig = WSTOPSIG(st);
  int resend = 0;  // a signal caught by our stop, to hand back if we let go
  if (event == PTRACE_EVENT_STOP && is_job_control_stop(sig)) {
    s->detach();
    throw Error(ExitCode::unsupported,
                "process " + std::to_string(pid) + " is stopped (job control); continue it first");
  }
  if (event == 0) {
    // A signal was on its way to the thread: we are in its delivery stop.
    siginfo_t si{};
    ptrace(PTRACE_GETSIGINFO, tid, nullptr, &si);
    s->signal_stop = true;
    resend = sig;
    if (is_fault(si)) {
      ptrace(PTRACE_DETACH, tid, nullptr, reinterpret_cast<void*>(static_cast<long>(sig)));
      s->attached = false;
      why = "thread " + std::to_string(tid) + " is taking a fault";
      return nullptr;
    }
    s->pending.push_back(si);
  }
  auto let_go = [&](std::string reason) {
    s->pending.clear();
    ptrace(PTRACE_DETACH, tid, nullptr, reinterpret_cast<void*>(static_cast<long>(resend)));
    s->attached = false;
    why = "thread " + std::to_string(tid) + " " + reason;
    return nullptr;
  };

  user_regs_struct& r = s->saved;
  if (ptrace(PTRACE_GETREGS, tid, nullptr, &r) != 0) return let_go("has no readable registers");
  auto orig = static_cast<long>(r.orig_rax);
  auto rax = static_cast<long>(r.rax);

  if (c.rank <= 1 && orig == c.nr) {
    s->where = "blocked in " + describe_syscall(c.nr);
    s->restart = is_restart_code(rax);
    if (!is_restart_code(rax) && rax != -EINTR) s->where += " (just returned)";
  } else if (orig == -1) {
    const proc::Mapping* m = mapping_of(maps, r.rip);
    if (!m || (!m->perms.empty() && m->perms.find('x') == std::string::npos))
      return let_go("stopped outside code (" + hex(r.rip) + ")");
    if (!is_program_code(m->path, exe))
      return let_go("was running in " + (m->path.empty() ? hex(r.rip) : basename_of(m->path)));
    s->where = "running at " + hex(r.rip) + (m->path.empty() ? "" : " in " + basename_of(m->path));
  } else {
    return let_go("was in " + describe_syscall(orig));
  }

  // Stack: the main stack, or a thread stack (rw right above a PROT_NONE
  // guard) with room to spare; never an alternate signal stack or the heap.
  const proc::Mapping* stk = mapping_of(maps, r.rsp);
  if (!stk || stk->perms.rfind("rw", 0) != 0) return let_go("has its stack pointer outside a writable mapping");
  std::uint64_t top = r.rsp - kRedZone;
  if (stk->path == "[stack]") {
    if (top < stk->start + kScratchMax) return let_go("has too little mapped stack");
  } else {
    const proc::Mapping* below = mapping_of(maps, stk->start - 1);
    bool guarded = stk->path.empty() && below && below->end == stk->start && below->perms.rfind("---", 0) == 0;
    if (!guarded) return let_go("is not on a thread stack (signal handler?)");
    if (top < stk->start + kScratchMax + kThreadStackNeed) return let_go("has too little stack left");
  }
  s->scratch_lo = top;
  s->scratch_floor = top - kScratchMax;

  // Our call ends in a SIGSEGV; were it blocked, the kernel would reset the
  // process's SIGSEGV handler to the default when forcing it through.
  // The mask also goes into the signal frame the thread restores itself from.
  std::uint64_t mask = 0;
  if (ptrace(PTRACE_GETSIGMASK, tid, reinterpret_cast<void*>(sizeof mask), &mask) != 0)
    return let_go("has no readable signal mask");
  if (mask & (1ull << (SIGSEGV - 1))) return let_go("blocks SIGSEGV");
  s->sigmask = mask;

  s->save_fpu();
  return s;
}

}  // namespace

RemoteThread::RemoteThread(std::unique_ptr<State> s) : s_(std::move(s)) {}
RemoteThread::RemoteThread(RemoteThread&&) noexcept = default;
RemoteThread::~RemoteThread() {
  if (s_) {
    try {
      s_->detach();
    } catch (...) {
    }
  }
}

pid_t RemoteThread::pid() const {
  return s_->pid;
}
pid_t RemoteThread::tid() const {
  return s_->tid;
}
const std::string& RemoteThread::where() const {
  return s_->where;
}

RemoteThread RemoteThread::attach(pid_t pid, Clock::time_point deadline) {
  auto start = Clock::now();
  std::string why = "no candidate thread";
  std::uint64_t restore_rt = 0;
  for (auto pause = 1ms;; pause = std::min<std::chrono::milliseconds>(pause * 2, 8ms)) {
    if (!proc::exists(pid)) throw Error(ExitCode::no_such_process, "no such process: " + std::to_string(pid));
    auto maps = proc::read_maps(pid);
    if (maps.empty()) throw_ptrace_perm(pid, pid);
    if (maps.front().start == 0)  // sorted by address
      throw Error(ExitCode::unsupported, "pid " + std::to_string(pid) +
                                             " maps address 0, so a call returning there would not fault; cannot "
                                             "call into it");
    std::string exe = program_path(pid, maps);
    // Looked up before any thread is stopped: it takes a scan of libc's code.
    if (!restore_rt) restore_rt = find_restore_rt(pid);
    for (const auto& c : candidates(pid)) {
      if (auto s = try_thread(pid, c, maps, exe, deadline, why)) {
        s->restore_rt = restore_rt;
        return RemoteThread(std::move(s));
      }
      if (Clock::now() >= deadline) break;
    }
    if (Clock::now() >= deadline) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      throw Error(ExitCode::unsupported, "no thread of pid " + std::to_string(pid) + " reached a safe point in " +
                                             std::to_string(ms) + " ms (last: " + why + ")");
    }
    std::this_thread::sleep_for(pause);
  }
}

std::uint64_t RemoteThread::push_scratch(const void* data, std::size_t len) {
  if (!s_->attached) throw Error(ExitCode::internal, "remote thread already released");
  std::uint64_t at = (s_->scratch_lo - len) & ~std::uint64_t{15};
  if (len > kScratchMax || at < s_->scratch_floor)
    throw Error(ExitCode::internal, "remote scratch area full (" + std::to_string(len) + " bytes)");
  if (!s_->write_memory(at, data, len))
    throw Error(ExitCode::internal, "cannot write the stack of thread " + std::to_string(s_->tid) + " at " + hex(at) +
                                        ": " + std::strerror(errno));
  s_->scratch_lo = at;
  return at;
}

bool RemoteThread::write_memory(std::uint64_t addr, const void* data, std::size_t len) {
  return s_->attached && s_->write_memory(addr, data, len);
}

std::optional<std::string> RemoteThread::read_cstring(std::uint64_t addr, std::size_t max) const {
  return proc::read_cstring(s_->pid, addr, max);
}

std::uint64_t RemoteThread::call(std::uint64_t fn, std::initializer_list<std::uint64_t> args,
                                 Clock::time_point deadline) {
  State& s = *s_;
  if (!s.attached) throw Error(ExitCode::internal, "remote thread already released");
  if (args.size() > 6) throw Error(ExitCode::internal, "remote call: at most 6 arguments");
  if (!s.armed) s.arm(deadline);
  user_regs_struct r = s.saved;
  unsigned long long* argregs[] = {&r.rdi, &r.rsi, &r.rdx, &r.rcx, &r.r8, &r.r9};
  std::size_t i = 0;
  for (auto a : args) *argregs[i++] = a;
  r.rip = fn;
  r.rax = 0;           // no vector registers used (varargs ABI)
  r.orig_rax = ~0ull;  // at a system call stop: skip it; no restart on the way out
  r.eflags &= ~(kFlagsDF | kFlagsTF);
  // The return address is the trampoline, and above it the stack pointer
  // the trampoline switches to for rt_sigreturn. 16-byte aligned, then the
  // return address pushed: rsp % 16 == 8 at entry.
  std::uint64_t sp = (s.scratch_lo & ~std::uint64_t{15}) - 16 - 8;
  const std::uint64_t ret[2] = {s.page, s.frame_sp};
  s.step_write(sp, ret, sizeof ret);
  r.rsp = sp;
  s.set_regs(r);
  s.prepare_fpu();

  const std::uint64_t tramp_end = s.page + sizeof kTrampolineCode;
  step();
  ptrace(PTRACE_SYSCALL, s.tid, nullptr, nullptr);
  for (;;) {
    int st = 0;
    if (!wait_until(s.tid, st, deadline)) {
      // No safe undo: the call may hold locks. Let it run on: it returns
      // into the trampoline and restores the thread itself.
      ptrace(PTRACE_INTERRUPT, s.tid, nullptr, nullptr);
      wait_requested_stop(s.tid, st, Clock::now() + 1s);
      if (gone(st)) s.thread_gone("during the remote call (after the timeout)");
      user_regs_struct now{};
      ptrace(PTRACE_GETREGS, s.tid, nullptr, &now);
      std::string at = static_cast<long>(now.orig_rax) >= 0 ? "blocked in " + describe_syscall(now.orig_rax)
                                                            : "running at " + hex(now.rip);
      if (WIFSTOPPED(st) && (st >> 16) == 0 && WSTOPSIG(st) != kSyscallStop) {
        siginfo_t si{};  // a signal beat our interrupt: keep it
        if (ptrace(PTRACE_GETSIGINFO, s.tid, nullptr, &si) == 0) s.pending.push_back(si);
      }
      s.signal_stop = false;
      s.armed = false;  // nothing to undo: the thread finishes the call alone
      s.detach();
      throw Error(ExitCode::internal,
                  "remote call in thread " + std::to_string(s.tid) + " of pid " + std::to_string(s.pid) +
                      " did not return in time (" + at +
                      "; the thread may be blocked in dlopen on a lock); it was left to finish the call, after which "
                      "it restores its own state and goes on");
    }
    if (gone(st)) s.thread_gone("during the remote call");
    if (!WIFSTOPPED(st)) continue;
    step();
    int event = st >> 16, sig = WSTOPSIG(st);
    if (event != 0) {
      // Our interrupt arriving late, or a group-stop: carry on with the call
      // (the detach reinstates a pending group-stop).
      ptrace(PTRACE_SYSCALL, s.tid, nullptr, nullptr);
      continue;
    }
    if (sig == kSyscallStop) {
      ptrace(PTRACE_GETREGS, s.tid, nullptr, &s.now);
      // The call's own system calls pass; ours is the trampoline's
      // rt_sigreturn, with the result in rdi. The thread stays there.
      if (static_cast<long>(s.now.orig_rax) == kSysRtSigreturn && s.now.rip == tramp_end && s.now.rsp == s.frame_sp)
        return s.now.rdi;
      ptrace(PTRACE_SYSCALL, s.tid, nullptr, nullptr);
      continue;
    }
    siginfo_t si{};
    ptrace(PTRACE_GETSIGINFO, s.tid, nullptr, &si);
    if (is_fault(si)) {
      ptrace(PTRACE_GETREGS, s.tid, nullptr, &s.now);
      const std::uint64_t at = s.now.rip;
      s.signal_stop = false;
      s.detach();  // the fault is not delivered: back to rt_sigreturn, home
      throw Error(ExitCode::internal, "remote call in pid " + std::to_string(s.pid) + " faulted (signal " +
                                          std::to_string(sig) + " at " + hex(at) + ", address " +
                                          hex(reinterpret_cast<std::uint64_t>(si.si_addr)) +
                                          "); the fault was suppressed and the thread restored");
    }
    // Someone else's signal: keep it for the detach.
    s.pending.push_back(si);
    ptrace(PTRACE_SYSCALL, s.tid, nullptr, nullptr);
  }
}

void RemoteThread::set_step_hook(void (*hook)(int step)) {
  g_step_hook = hook;
  g_steps = 0;
}

void RemoteThread::release() {
  if (s_) s_->detach();
}

}  // namespace lt::inject
