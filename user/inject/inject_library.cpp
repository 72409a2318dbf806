#include "user/inject/inject_library.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
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
#include "user/proc/procfs.h"
#include "user/python/elf_file.h"

namespace lt::inject {

namespace {

constexpr std::uint64_t kRtldDlopen = 0x80000000;  // glibc's __RTLD_DLOPEN, for __libc_dlopen_mode

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
  auto tracer = [&](const std::string& status) -> std::string {
    auto s = read_status(status);
    return s["TracerPid"];
  };
  std::vector<std::string> statuses{base + "/status"};
  if (DIR* d = opendir((base + "/task").c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') statuses.push_back(base + "/task/" + e->d_name + "/status");
    closedir(d);
  }
  for (const auto& s : statuses) {
    auto t = tracer(s);
    if (!t.empty() && t != "0")
      throw Error(ExitCode::unsupported, "process " + std::to_string(pid) + " is already traced by pid " + t +
                                             " (another debugger/profiler is attached); detach it first");
  }

  // The executable's ELF header says the architecture.
  int fd = open((base + "/exe").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == EACCES || errno == EPERM) perm_error(pid, "read the executable");
    if (!proc::exists(pid)) throw Error(ExitCode::no_such_process, "no such process: " + std::to_string(pid));
    throw Error(ExitCode::unsupported, "process " + std::to_string(pid) + " has no executable (kernel thread?)");
  }
  unsigned char eh[20] = {};
  ssize_t n = pread(fd, eh, sizeof eh, 0);
  close(fd);
  std::uint16_t machine = static_cast<std::uint16_t>(eh[18] | eh[19] << 8);
  if (n != sizeof eh || std::memcmp(eh, ELFMAG, SELFMAG) != 0 || eh[EI_CLASS] != ELFCLASS64 || machine != EM_X86_64)
    throw Error(ExitCode::unsupported, "process " + std::to_string(pid) + " is not an x86-64 ELF process");
  return pid;
}

struct Loader {
  std::uint64_t dlopen = 0, dlerror = 0, mode_extra = 0;
  std::string how;  // "libc.so.6!dlopen"
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
  auto pick = [&](std::initializer_list<const char*> prefixes, const char* open_name,
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
  // glibc >= 2.34 and musl: dlopen in libc (musl's libc is its loader).
  if (auto l = pick({"libc.so", "libc-2.", "libc.musl", "ld-musl"}, "dlopen", "dlerror")) return *l;
  // Older glibc: libdl, if the program loaded it.
  if (auto l = pick({"libdl.so", "libdl-"}, "dlopen", "dlerror")) return *l;
  // Older glibc without libdl: the internal entry point (no dlerror text).
  if (auto l = pick({"libc.so", "libc-2."}, "__libc_dlopen_mode", nullptr)) {
    l->mode_extra = kRtldDlopen;
    for (const auto& f : libs.files({"libdl.so", "libdl-"}))
      if (auto e = libs.lookup(f, "dlerror")) l->dlerror = *e;
    return *l;
  }
  throw Error(ExitCode::unsupported,
              "process " + std::to_string(pid) + " has no dlopen (no glibc/musl libc mapped; statically linked?)");
}

// The library as the target sees it. A missing file is left to dlopen, whose
// message says so; a file we cannot read is refused before touching the target.
void check_library(pid_t pid, const std::string& path) {
  if (path.empty()) throw Error(ExitCode::usage, "empty library path");
  if (path.size() >= 4096) throw Error(ExitCode::usage, "library path too long");
  if (path.find('\n') != std::string::npos || path.find('\0') != std::string::npos)
    throw Error(ExitCode::usage, "library path contains a newline or NUL");
  std::string view;
  if (path[0] == '/')
    view = proc::root_path(pid, path);
  else if (path.find('/') != std::string::npos)
    view = "/proc/" + std::to_string(pid) + "/cwd/" + path;
  else
    return;  // a bare name: dlopen searches the target's library path
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

}  // namespace

InjectResult inject_library(pid_t pid, const std::string& path, const InjectOptions& opts) {
  auto start = Clock::now();
  if (pid <= 0 || !proc::exists(pid)) throw Error(ExitCode::no_such_process, "no such process: " + std::to_string(pid));
  pid = check_target(pid);
  check_library(pid, path);
  Loader loader = find_loader(pid);

  auto deadline = start + opts.timeout;
  RemoteThread thread = RemoteThread::attach(pid, start + opts.timeout / 2);
  std::uint64_t str = thread.push_string(path);
  std::uint64_t handle = thread.call(loader.dlopen, {str, RTLD_NOW | RTLD_LOCAL | loader.mode_extra}, deadline);
  std::string err;
  if (handle == 0) {
    if (loader.dlerror) {
      std::uint64_t msg = thread.call(loader.dlerror, {}, deadline);
      if (msg) err = thread.read_cstring(msg, 2048).value_or("(message unreadable)");
    }
    if (err.empty()) err = "no dlerror text (" + loader.how + ")";
  }
  InjectResult res;
  res.handle = handle;
  res.tid = thread.tid();
  std::string where = thread.where();
  thread.release();
  if (handle == 0)
    throw Error(ExitCode::io, "dlopen(\"" + path + "\") failed in pid " + std::to_string(pid) + ": " + one_line(err));
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
  char took[32];
  std::snprintf(took, sizeof took, "%.2f ms", static_cast<double>(us) / 1000.0);
  res.detail = "pid " + std::to_string(pid) + " thread " + std::to_string(res.tid) + " (" + where + "): " + loader.how +
               " -> handle " + hex(handle) + " in " + took;
  return res;
}

}  // namespace lt::inject
