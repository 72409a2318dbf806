#include "user/inject/inject_library.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include "user/core/errors.h"
#include "user/inject/remote_call.h"
#include "user/proc/elf_image.h"
#include "user/proc/procfs.h"
#include "user/python/elf_file.h"

namespace lt::inject {

namespace {

constexpr std::uint64_t kRtldDlopen = 0x80000000;  // glibc's __RTLD_DLOPEN, for __libc_dlopen_mode
// memfd_create flags (linux/memfd.h), spelled out: MFD_EXEC is newer than
// some headers we build with.
constexpr std::uint64_t kMfdCloexec = 0x1, kMfdAllowSealing = 0x2, kMfdExec = 0x10;

std::string basename_of(const std::string& p) {
  auto s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

std::string hex(std::uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::map<std::string, std::string> read_status(const std::string& path) {
  std::map<std::string, std::string> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto c = line.find(':');
    if (c == std::string::npos) continue;
    auto v = line.substr(c + 1);
    auto f = v.find_first_not_of(" \t");
    out[line.substr(0, c)] = f == std::string::npos ? "" : v.substr(f);
  }
  return out;
}

[[noreturn]] void perm_error(pid_t pid, const std::string& what) {
  throw Error(ExitCode::permission, "cannot " + what + " of pid " + std::to_string(pid) +
                                        ": permission denied; need CAP_SYS_PTRACE (run as root), or the same uid "
                                        "with kernel.yama.ptrace_scope=0");
}

// Refuses targets we must not touch: traced by someone else, under strict
// seccomp or a filter, stopped, ignoring SIGSEGV; and anything not x86-64.
// Returns the thread-group id (the pid may name a thread).
pid_t check_target(pid_t pid) {
  const std::string base = "/proc/" + std::to_string(pid);
  auto st = read_status(base + "/status");
  if (st.empty()) throw Error(ExitCode::no_such_process, "no such process: " + std::to_string(pid));
  pid_t tgid = static_cast<pid_t>(std::atoi(st["Tgid"].c_str()));
  if (tgid > 0 && tgid != pid) return check_target(tgid);
  if (pid == getpid()) throw Error(ExitCode::usage, "cannot inject a library into ltrace-bpf itself");
  if (!st["State"].empty() && (st["State"][0] == 'T' || st["State"][0] == 't'))
    throw Error(ExitCode::unsupported, "process " + std::to_string(pid) + " is stopped; continue it first");
  if (st["Seccomp"] == "1" || st["Seccomp"] == "2")
    throw Error(ExitCode::unsupported, "process " + std::to_string(pid) + " runs under seccomp (" +
                                           (st["Seccomp"] == "1" ? "strict" : "filter") +
                                           " mode); a filter may kill it for the loader's system calls, so we "
                                           "do not inject");
  // SigIgn is a hex mask; bit SIGSEGV-1.
  if (std::strtoull(st["SigIgn"].c_str(), nullptr, 16) & (1ull << (SIGSEGV - 1)))
    throw Error(ExitCode::unsupported, "process " + std::to_string(pid) + " ignores SIGSEGV; cannot inject");
  // Every thread: a debugger may trace only some of them.
  if (const pid_t t = proc::traced_by(pid))
    throw Error(ExitCode::unsupported, "process " + std::to_string(pid) + " is already traced by pid " +
                                           std::to_string(t) +
                                           " (another debugger/profiler is attached); detach it first");

  // The executable's ELF header says the architecture (/proc/PID/exe: the
  // file the process runs, whatever mount namespace it is in).
  const elf::ElfImage exe(base + "/exe");
  if (exe.problem() == elf::ElfImage::Problem::cannot_open) {
    if (exe.error() == EACCES || exe.error() == EPERM) perm_error(pid, "read the executable");
    if (!proc::exists(pid)) throw Error(ExitCode::no_such_process, "no such process: " + std::to_string(pid));
    throw Error(ExitCode::unsupported, "process " + std::to_string(pid) + " has no executable (kernel thread?)");
  }
  if (!exe.ok() || !exe.is_elf64() || exe.machine() != EM_X86_64)
    throw Error(ExitCode::unsupported, "process " + std::to_string(pid) + " is not an x86-64 ELF process");
  return pid;
}

struct Loader {
  std::uint64_t dlopen = 0, dlerror = 0, mode_extra = 0;
  std::string how;  // "libc.so.6!dlopen"
  // From the same libc: syscall() for memfd_create and close, and
  // __errno_location() to put the thread's errno back (0: not found).
  std::uint64_t syscall = 0, errno_location = 0;
};

// Symbol address in the target: the file's .dynsym value plus the load bias
// of its mapping at file offset 0. Read through map_files (the very file
// mapped, even if replaced on disk since) or the target's root.
class MappedLibraries {
 public:
  MappedLibraries(pid_t pid, std::vector<proc::Mapping> maps) : pid_(pid), maps_(std::move(maps)) {}

  std::optional<std::uint64_t> lookup(const std::string& path, const std::string& name) {
    Lib* lib = load(path);
    if (!lib) return std::nullopt;
    auto sym = lib->elf->symbol(name);
    if (!sym || sym->value == 0) return std::nullopt;
    std::uint64_t addr = lib->bias + sym->value;
    for (auto& m : maps_)  // it must land in this file's code
      if (m.path == path && addr >= m.start && addr < m.end && m.perms.find('x') != std::string::npos) return addr;
    return std::nullopt;
  }

  // Mapped files whose name starts with one of `prefixes`.
  std::vector<std::string> files(std::initializer_list<const char*> prefixes) const {
    std::vector<std::string> out;
    for (auto& m : maps_) {
      if (m.path.empty() || m.path[0] != '/') continue;
      auto b = basename_of(m.path);
      bool match = false;
      for (const char* p : prefixes) match |= b.rfind(p, 0) == 0;
      if (match && std::find(out.begin(), out.end(), m.path) == out.end()) out.push_back(m.path);
    }
    return out;
  }

 private:
  struct Lib {
    std::unique_ptr<elf::ElfFile> elf;
    std::uint64_t bias = 0;
  };

  Lib* load(const std::string& path) {
    auto it = libs_.find(path);
    if (it != libs_.end()) return it->second.elf ? &it->second : nullptr;
    Lib& lib = libs_[path];
    const proc::Mapping* first = nullptr;
    for (auto& m : maps_)
      if (m.path == path && m.offset == 0) {
        first = &m;
        break;
      }
    if (!first) return nullptr;
    char range[64];
    std::snprintf(range, sizeof range, "%llx-%llx", static_cast<unsigned long long>(first->start),
                  static_cast<unsigned long long>(first->end));
    for (const std::string& open_path :
         {"/proc/" + std::to_string(pid_) + "/map_files/" + range, proc::root_path(pid_, path)}) {
      try {
        lib.elf = std::make_unique<elf::ElfFile>(open_path);
        break;
      } catch (const Error&) {
      }
    }
    if (!lib.elf) return nullptr;
    // The segment at file offset 0 is mapped at `first->start`.
    for (auto& seg : lib.elf->segments())
      if ((seg.offset & ~std::uint64_t{0xfff}) == 0) {
        lib.bias = first->start - (seg.vaddr & ~std::uint64_t{0xfff});
        return &lib;
      }
    lib.elf.reset();
    return nullptr;
  }

  pid_t pid_;
  std::vector<proc::Mapping> maps_;
  std::map<std::string, Lib> libs_;
};

Loader find_loader(pid_t pid) {
  auto maps = proc::read_maps(pid);
  if (maps.empty()) {
    if (!proc::exists(pid)) throw Error(ExitCode::no_such_process, "no such process: " + std::to_string(pid));
    perm_error(pid, "read the memory map");
  }
  MappedLibraries libs(pid, std::move(maps));
  auto pick_dlopen = [&](std::initializer_list<const char*> prefixes, const char* open_name,
                         const char* error_name) -> std::optional<Loader> {
    for (const auto& f : libs.files(prefixes)) {
      auto o = libs.lookup(f, open_name);
      if (!o) continue;
      Loader l;
      l.dlopen = *o;
      l.dlerror = error_name ? libs.lookup(f, error_name).value_or(0) : 0;
      l.how = basename_of(f) + "!" + open_name;
      return l;
    }
    return std::nullopt;
  };
  auto pick = [&]() -> std::optional<Loader> {
    // glibc >= 2.34 and musl: dlopen in libc (musl's libc is its loader).
    if (auto l = pick_dlopen({"libc.so", "libc-2.", "libc.musl", "ld-musl"}, "dlopen", "dlerror")) return l;
    // Older glibc: libdl, if the program loaded it.
    if (auto l = pick_dlopen({"libdl.so", "libdl-"}, "dlopen", "dlerror")) return l;
    // Older glibc without libdl: the internal entry point (no dlerror text).
    if (auto l = pick_dlopen({"libc.so", "libc-2."}, "__libc_dlopen_mode", nullptr)) {
      l->mode_extra = kRtldDlopen;
      for (const auto& f : libs.files({"libdl.so", "libdl-"}))
        if (auto e = libs.lookup(f, "dlerror")) l->dlerror = *e;
      return l;
    }
    return std::nullopt;
  };
  auto l = pick();
  if (!l)
    throw Error(ExitCode::unsupported,
                "process " + std::to_string(pid) + " has no dlopen (no glibc/musl libc mapped; statically linked?)");
  for (const auto& f : libs.files({"libc.so", "libc-2.", "libc.musl", "ld-musl"})) {
    if (!l->syscall) l->syscall = libs.lookup(f, "syscall").value_or(0);
    if (!l->errno_location) l->errno_location = libs.lookup(f, "__errno_location").value_or(0);
  }
  return *l;
}

// The library as the target sees it. A missing file is left to dlopen, whose
// message says so; a file we cannot read is refused before touching the target.
void check_path_string(const std::string& path) {
  if (path.empty()) throw Error(ExitCode::usage, "empty library path");
  if (path.size() >= 4096) throw Error(ExitCode::usage, "library path too long");
  if (path.find('\n') != std::string::npos || path.find('\0') != std::string::npos)
    throw Error(ExitCode::usage, "library path contains a newline or NUL");
}

// `path` as pid sees it, through /proc ("" for a bare name: dlopen searches
// the target's library path).
std::string target_view(pid_t pid, const std::string& path) {
  if (path[0] == '/') return proc::root_path(pid, path);
  if (path.find('/') != std::string::npos) return "/proc/" + std::to_string(pid) + "/cwd/" + path;
  return "";
}

void check_library(pid_t pid, const std::string& path) {
  check_path_string(path);
  std::string view = target_view(pid, path);
  if (view.empty()) return;
  struct stat sb;
  if (stat(view.c_str(), &sb) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return;
    throw Error(ExitCode::io, "cannot read library " + path + " (as pid " + std::to_string(pid) +
                                  " sees it): " + std::strerror(errno));
  }
  if (S_ISDIR(sb.st_mode)) throw Error(ExitCode::io, "library path " + path + " is a directory");
  int fd = open(view.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw Error(ExitCode::io, "cannot read library " + path + " (as pid " + std::to_string(pid) +
                                  " sees it): " + std::strerror(errno));
  close(fd);
}

// Our copy of the library, whole (it goes into the memfd).
std::string read_our_file(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(ExitCode::io, "cannot read library " + path + ": " + std::strerror(errno));
  struct stat sb {};
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    throw Error(ExitCode::io, "library " + path + " is not a regular file");
  }
  std::string bytes;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      close(fd);
      throw Error(ExitCode::io, "cannot read library " + path + ": " + std::strerror(e));
    }
    if (n == 0) break;
    bytes.append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  return bytes;
}

// Why the target could not dlopen("/proc/self/fd/N"), or "" if it can: its
// mount namespace needs a /proc of its own pid namespace at /proc.
std::string memfd_blocker(pid_t pid) {
  const std::string base = "/proc/" + std::to_string(pid);
  struct statfs fs {};
  if (statfs((base + "/root/proc").c_str(), &fs) != 0 || fs.f_type != PROC_SUPER_MAGIC)
    return "no /proc in its mount namespace (dlopen would need /proc/self/fd)";
  // Its pid as its own pid namespace numbers it: the last NSpid field.
  std::string nspid = std::to_string(pid);
  auto st = read_status(base + "/status");
  if (auto it = st.find("NSpid"); it != st.end()) {
    std::istringstream in(it->second);
    for (std::string one; in >> one;) nspid = one;
  }
  struct stat sb {};
  if (stat((base + "/root/proc/" + nspid + "/fd").c_str(), &sb) != 0)
    return "the /proc in its mount namespace does not show it (another pid namespace's /proc)";
  return "";
}

// Does pid see our file at `path`, the very same one (device and inode)?
// "" if so, else why not.
std::string path_blocker(pid_t pid, const std::string& path) {
  std::string view = target_view(pid, path);
  if (view.empty()) return path + " is a bare name";
  struct stat ours {};
  struct stat theirs {};
  if (stat(path.c_str(), &ours) != 0) return std::string("we cannot stat ") + path + ": " + std::strerror(errno);
  if (stat(view.c_str(), &theirs) != 0)
    return "it does not see " + path + " in its mount namespace (" + std::strerror(errno) + ")";
  if (ours.st_dev != theirs.st_dev || ours.st_ino != theirs.st_ino) return "its " + path + " is another file than ours";
  return "";
}

// Writes `bytes` into the target's fd `fd` (a fresh memfd), then seals it
// (no one in the target can change the code we checked). "" or why not.
std::string fill_memfd(pid_t pid, std::uint64_t fd, const std::string& bytes) {
  const std::string link = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  int w = open(link.c_str(), O_WRONLY | O_CLOEXEC);
  if (w < 0) return "cannot open " + link + ": " + std::strerror(errno);
  struct stat sb {};
  if (fstat(w, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size != 0) {
    close(w);
    return link + " is not the fresh memfd";
  }
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(w, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = n < 0 ? errno : EIO;
      close(w);
      return "cannot write " + link + ": " + std::strerror(e);
    }
    done += static_cast<std::size_t>(n);
  }
  fcntl(w, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);  // best effort
  close(w);
  return "";
}

// The thread's errno, read before our calls and put back after them: a
// failed open() inside dlopen must not show through to the program.
class ErrnoKeeper {
 public:
  ErrnoKeeper(RemoteThread& t, const Loader& l, Clock::time_point deadline) : t_(t) {
    if (!l.errno_location) return;
    addr_ = t.call(l.errno_location, {}, deadline);
    if (!addr_ || !proc::read_memory(t.pid(), addr_, &saved_, sizeof saved_)) addr_ = 0;
  }
  // The target's errno now (after a failed call).
  int current() const {
    int e = 0;
    return addr_ && proc::read_memory(t_.pid(), addr_, &e, sizeof e) ? e : 0;
  }
  void restore() {
    if (addr_) t_.write_memory(addr_, &saved_, sizeof saved_);
  }

 private:
  RemoteThread& t_;
  std::uint64_t addr_ = 0;
  int saved_ = 0;
};

std::string errno_text(int e) {
  return e ? std::strerror(e) : "unknown error";
}

}  // namespace

InjectResult inject_library(pid_t pid, const std::string& path, const InjectOptions& opts) {
  auto start = Clock::now();
  if (pid <= 0 || !proc::exists(pid)) throw Error(ExitCode::no_such_process, "no such process: " + std::to_string(pid));
  pid = check_target(pid);
  const std::string spid = std::to_string(pid);

  // How the library will reach the target; checked before we touch it.
  const bool want_memfd = opts.handoff != Handoff::path;
  std::string bytes, no_memfd, no_path;
  if (want_memfd) {
    check_path_string(path);
    bytes = read_our_file(path);
    no_memfd = memfd_blocker(pid);
    if (opts.handoff == Handoff::memfd_or_path) no_path = path_blocker(pid, path);
  } else {
    check_library(pid, path);
  }
  Loader loader = find_loader(pid);
  if (want_memfd && no_memfd.empty() && !loader.syscall) no_memfd = "no syscall() in its libc";
  auto neither = [&](ExitCode code) {
    std::string m = "cannot hand " + path + " to pid " + spid + ": no memfd (" + no_memfd + ")";
    if (opts.handoff == Handoff::memfd_or_path) m += ", and not by its path (" + no_path + ")";
    return Error(code, m);
  };
  if (want_memfd && !no_memfd.empty() && (opts.handoff == Handoff::memfd || !no_path.empty()))
    throw neither(ExitCode::unsupported);

  auto deadline = start + opts.timeout;
  RemoteThread thread = RemoteThread::attach(pid, start + opts.timeout / 2);
  const auto held_from = Clock::now();
  Clock::duration hook_took{};
  ErrnoKeeper saved_errno(thread, loader, deadline);

  // The memfd, filled and sealed; -1 if we use the path.
  long fd = -1;
  std::string load_path = path, our_view;
  auto close_fd = [&] {
    if (fd >= 0) thread.call(loader.syscall, {SYS_close, static_cast<std::uint64_t>(fd)}, deadline);
    fd = -1;
  };
  if (want_memfd && no_memfd.empty()) {
    std::string name = opts.memfd_name.empty() ? basename_of(path) : opts.memfd_name;
    if (name.size() > 200) name.resize(200);
    std::uint64_t name_at = thread.push_string(name);
    auto create = [&](std::uint64_t flags) {
      return static_cast<long>(thread.call(loader.syscall, {SYS_memfd_create, name_at, flags}, deadline));
    };
    // MFD_EXEC: kernels with vm.memfd_noexec would make it non-executable
    // otherwise; older kernels do not know the flag (EINVAL).
    fd = create(kMfdCloexec | kMfdAllowSealing | kMfdExec);
    if (fd < 0 && saved_errno.current() == EINVAL) fd = create(kMfdCloexec | kMfdAllowSealing);
    if (fd < 0) {
      no_memfd = "memfd_create failed in the target: " + errno_text(saved_errno.current());
      fd = -1;
    } else if (std::string why = fill_memfd(pid, static_cast<std::uint64_t>(fd), bytes); !why.empty()) {
      no_memfd = why;
      close_fd();
    }
    if (fd < 0 && (opts.handoff == Handoff::memfd || !no_path.empty())) {
      saved_errno.restore();
      thread.release();
      throw neither(ExitCode::io);
    }
    if (fd >= 0) {
      // The loader knows a library by the name it was opened by: the "./"
      // keeps the program's own later dlopen("/proc/self/fd/N") of another
      // file that reuses this fd number from matching ours.
      load_path = "/proc/self/fd/./" + std::to_string(fd);
      our_view = "/proc/" + spid + "/fd/" + std::to_string(fd);
    }
  }
  if (fd < 0) {
    our_view = target_view(pid, path);
    if (our_view.empty()) our_view = path;
  }

  if (opts.before_dlopen) {
    try {
      auto t0 = Clock::now();
      opts.before_dlopen(our_view);
      hook_took = Clock::now() - t0;
    } catch (...) {
      close_fd();
      saved_errno.restore();
      thread.release();
      throw;
    }
  }

  std::uint64_t str = thread.push_string(load_path);
  std::uint64_t handle = thread.call(loader.dlopen, {str, RTLD_NOW | RTLD_LOCAL | loader.mode_extra}, deadline);
  std::string err;
  if (handle == 0) {
    if (loader.dlerror) {
      std::uint64_t msg = thread.call(loader.dlerror, {}, deadline);
      if (msg) err = thread.read_cstring(msg, 2048).value_or("(message unreadable)");
    }
    if (err.empty()) err = "no dlerror text (" + loader.how + ")";
  }
  const bool memfd = fd >= 0;
  close_fd();  // the mapping keeps the file
  saved_errno.restore();
  InjectResult res;
  res.handle = handle;
  res.tid = thread.tid();
  res.memfd = memfd;
  std::string where = thread.where();
  thread.release();
  const auto held = Clock::now() - held_from;
  if (handle == 0)
    throw Error(ExitCode::io, "dlopen(\"" + (memfd ? path + "\" as " + load_path : path + "\"") + ") failed in pid " +
                                  spid + ": " + one_line(err));
  auto ms = [](Clock::duration d) {
    char b[32];
    std::snprintf(b, sizeof b, "%.2f ms", std::chrono::duration<double, std::milli>(d).count());
    return std::string(b);
  };
  std::string how = memfd ? " from a memfd" : want_memfd ? " by path (no memfd: " + no_memfd + ")" : "";
  res.detail = "pid " + spid + " thread " + std::to_string(res.tid) + " (" + where + "): " + loader.how + how +
               " -> handle " + hex(handle) + " in " + ms(Clock::now() - start) + " (thread held " + ms(held) +
               (opts.before_dlopen ? ", " + ms(hook_took) + " of it in the hook" : std::string()) + ")";
  return res;
}

}  // namespace lt::inject
