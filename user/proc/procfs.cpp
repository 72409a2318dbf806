#include "user/proc/procfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace lt::proc {

namespace {
std::string proc_file(pid_t pid, const char* name) {
  return "/proc/" + std::to_string(pid) + "/" + name;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> split_nul(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == '\0') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}
}  // namespace

std::string read_bounded(const std::string& path, std::size_t max) {
  std::string out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  out.resize(max);
  std::size_t got = 0;
  while (got < max) {
    const ssize_t n = ::read(fd, out.data() + got, max - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

bool same_executable(pid_t a, pid_t b) {
  struct stat sa {
  }, sb{};
  return stat(proc_file(a, "exe").c_str(), &sa) == 0 && stat(proc_file(b, "exe").c_str(), &sb) == 0 &&
         sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

namespace {

// The /proc/PID/stat line of a live process (kill(pid, 0) answers), or ""
// for one that is gone.  The whole file: a comm may hold a newline.
std::string live_stat(pid_t pid) {
  if (pid <= 0 || (kill(pid, 0) != 0 && errno != EPERM)) return "";
  return slurp(proc_file(pid, "stat"));
}

// A stat line's state is not a zombie's or a dead task's (fields are read
// after the last ')': a comm may hold one).
bool stat_says_alive(const std::string& line, std::string::size_type& rp) {
  rp = line.rfind(')');
  return rp != std::string::npos && rp + 2 < line.size() && line[rp + 2] != 'Z' && line[rp + 2] != 'X';
}

}  // namespace

bool exists(pid_t pid) {
  std::string::size_type rp = 0;
  return stat_says_alive(live_stat(pid), rp);  // a zombie has no address space left to trace
}

bool running(pid_t pid) {
  return stat_says_running(live_stat(pid));
}

bool stat_says_running(const std::string& line) {
  std::string::size_type rp = 0;
  if (!stat_says_alive(line, rp)) return false;
  // After ") ": state ppid pgrp session tty_nr tpgid flags
  std::istringstream rest(line.substr(rp + 2));
  std::string field;
  unsigned long flags = 0;
  for (int i = 0; i < 7 && rest >> field; ++i)
    if (i == 6) flags = std::strtoul(field.c_str(), nullptr, 10);
  constexpr unsigned long kPfExiting = 0x4;  // include/linux/sched.h
  return !(flags & kPfExiting);              // unparsed (never seen): as exists() says
}

std::vector<Mapping> read_maps(pid_t pid) {
  std::vector<Mapping> out;
  std::ifstream in(proc_file(pid, "maps"));
  std::string line;
  while (std::getline(in, line)) {
    Mapping m;
    std::istringstream ls(line);
    std::string range, dev, inode;
    ls >> range >> m.perms >> std::hex >> m.offset >> std::dec >> dev >> inode;
    auto dash = range.find('-');
    if (dash == std::string::npos) continue;
    m.start = std::stoull(range.substr(0, dash), nullptr, 16);
    m.end = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (auto colon = dev.find(':'); colon != std::string::npos) {
      m.dev_major = static_cast<unsigned>(std::strtoul(dev.substr(0, colon).c_str(), nullptr, 16));
      m.dev_minor = static_cast<unsigned>(std::strtoul(dev.substr(colon + 1).c_str(), nullptr, 16));
    }
    m.inode = std::strtoull(inode.c_str(), nullptr, 10);
    std::getline(ls, m.path);
    auto first = m.path.find_first_not_of(' ');
    m.path = first == std::string::npos ? "" : m.path.substr(first);
    out.push_back(std::move(m));
  }
  return out;
}

bool exe_is_mapped(pid_t pid, const std::vector<Mapping>& maps) {
  const std::string exe = proc_file(pid, "exe");
  char target[4096];
  const ssize_t n = readlink(exe.c_str(), target, sizeof target - 1);
  struct stat st {};
  const bool have_inode = stat(exe.c_str(), &st) == 0;
  if (n <= 0 && !have_inode) return true;  // nothing to compare with: do not wait
  const std::string path = n > 0 ? std::string(target, static_cast<std::size_t>(n)) : "";
  for (const auto& m : maps)
    if ((!path.empty() && m.path == path) || (have_inode && m.inode == st.st_ino)) return true;
  return false;
}

std::map<std::string, std::string> read_environ(pid_t pid) {
  std::map<std::string, std::string> env;
  for (auto& kv : split_nul(slurp(proc_file(pid, "environ")))) {
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

std::vector<std::string> read_cmdline(pid_t pid) {
  return split_nul(slurp(proc_file(pid, "cmdline")));
}

namespace {
// The 16 random bytes the kernel put on the new stack at the exec
// (auxv AT_RANDOM): a fork has its parent's, every exec new ones, also
// with ASLR off (where the vDSO's address repeats). Empty when unreadable.
std::string exec_random_bytes(pid_t pid) {
  constexpr std::uint64_t kAtRandom = 25;
  const std::string auxv = slurp(proc_file(pid, "auxv"));
  for (std::size_t i = 0; i + 16 <= auxv.size(); i += 16) {
    std::uint64_t type = 0, value = 0;
    std::memcpy(&type, auxv.data() + i, 8);
    std::memcpy(&value, auxv.data() + i + 8, 8);
    if (type != kAtRandom) continue;
    std::string bytes(16, '\0');
    if (!value || !read_memory(pid, value, bytes.data(), bytes.size())) return {};
    return bytes;
  }
  return {};
}
}  // namespace

bool same_image(pid_t child, pid_t parent) {
  auto vdso = [](pid_t pid) -> std::uint64_t {
    for (const auto& m : read_maps(pid))
      if (m.path == "[vdso]") return m.start;
    return 0;
  };
  const auto cmd = read_cmdline(child);
  if (cmd.empty() || cmd != read_cmdline(parent)) return false;
  // The exec's random bytes where both can be read; else the vDSO's place.
  const std::string mine = exec_random_bytes(child);
  if (!mine.empty()) {
    const std::string theirs = exec_random_bytes(parent);
    if (!theirs.empty()) return mine == theirs;
  }
  const std::uint64_t at = vdso(child);
  return at != 0 && at == vdso(parent);
}

std::string read_comm(pid_t pid) {
  auto s = slurp(proc_file(pid, "comm"));
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

pid_t read_ppid(pid_t pid) {
  std::string line = slurp(proc_file(pid, "stat"));
  auto rp = line.rfind(')');
  if (rp == std::string::npos) return 0;
  std::istringstream ls(line.substr(rp + 2));
  std::string state;
  pid_t ppid = 0;
  ls >> state >> ppid;
  return ppid;
}

pid_t traced_by(pid_t pid) {
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(task.c_str());
  if (!d) return 0;
  pid_t tracer = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::istringstream status(slurp(task + "/" + e->d_name + "/status"));
    for (std::string line; std::getline(status, line);)
      if (line.rfind("TracerPid:", 0) == 0) {
        tracer = static_cast<pid_t>(std::atoi(line.c_str() + 10));
        break;
      }
    if (tracer) break;
  }
  closedir(d);
  return tracer;
}

std::vector<pid_t> descendants(pid_t root) {
  std::map<pid_t, std::vector<pid_t>> kids;
  if (DIR* d = opendir("/proc")) {
    while (dirent* e = readdir(d)) {
      char* end = nullptr;
      long p = std::strtol(e->d_name, &end, 10);
      if (*end != '\0' || p <= 0) continue;
      kids[read_ppid(static_cast<pid_t>(p))].push_back(static_cast<pid_t>(p));
    }
    closedir(d);
  }
  std::vector<pid_t> out, todo{root};
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    for (pid_t c : kids[p]) {
      out.push_back(c);
      todo.push_back(c);
    }
  }
  return out;
}

std::string root_path(pid_t pid, const std::string& path) {
  // In a plain chroot, /proc/PID/maps shows us host paths, which already
  // include the target's root: take that prefix off first.
  std::string inside = path;
  char buf[4096];
  ssize_t n = readlink(proc_file(pid, "root").c_str(), buf, sizeof buf - 1);
  if (n > 1) {
    std::string root(buf, static_cast<std::size_t>(n));
    if (path.size() > root.size() && path.compare(0, root.size(), root) == 0 && path[root.size()] == '/')
      inside = path.substr(root.size());
  }
  return proc_file(pid, "root") + inside;
}

std::map<pid_t, pid_t> host_tids(pid_t pid) {
  std::map<pid_t, pid_t> out;
  const std::string task = proc_file(pid, "task");
  DIR* d = opendir(task.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    long host = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || host <= 0) continue;
    pid_t inner = static_cast<pid_t>(host);
    auto ns = parse_nspid(slurp(task + "/" + e->d_name + "/status"));
    if (!ns.empty()) inner = ns.back();  // the innermost namespace's
    out[inner] = static_cast<pid_t>(host);
  }
  closedir(d);
  return out;
}

std::string mapped_file(pid_t pid, const Mapping& m) {
  if (m.path.empty() || m.path[0] != '/') return "";
  auto same_file = [&](const std::string& p) {
    struct stat st {};
    return stat(p.c_str(), &st) == 0 && st.st_ino == m.inode && major(st.st_dev) == m.dev_major &&
           minor(st.st_dev) == m.dev_minor;
  };
  // map_files/ names a mapping by its range in lowercase hex, unpadded.
  char range[40];
  std::snprintf(range, sizeof range, "%llx-%llx", static_cast<unsigned long long>(m.start),
                static_cast<unsigned long long>(m.end));
  const std::string map_file = proc_file(pid, "map_files/") + range;
  // map_files is the mapped file itself; under overlayfs its inode is the
  // real file's, which is what /proc/PID/maps shows and where uprobes fire.
  struct stat st {};
  if (stat(map_file.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return map_file;
  for (const std::string& p : {root_path(pid, m.path), m.path})
    if (same_file(p)) return p;
  return "";
}

std::optional<MappedLibrary> find_mapped_library(pid_t pid, const std::string& name) {
  for (auto& m : read_maps(pid)) {
    const auto slash = m.path.rfind('/');
    if (m.path.compare(slash == std::string::npos ? 0 : slash + 1, name.size(), name) != 0) continue;
    MappedLibrary lib{m.path, mapped_file(pid, m), {}};  // the file the target runs (containers, chroots)
    struct stat st {};
    if (lib.open_path.empty() || stat(lib.open_path.c_str(), &st) != 0) return std::nullopt;
    lib.file = {static_cast<unsigned long>(st.st_dev), static_cast<unsigned long>(st.st_ino)};
    return lib;
  }
  return std::nullopt;
}

bool read_memory(pid_t pid, std::uint64_t addr, void* out, std::size_t len) {
  iovec local{out, len};
  iovec remote{reinterpret_cast<void*>(addr), len};
  ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
  return n == static_cast<ssize_t>(len);
}

Error unreadable_memory(pid_t pid, std::uint64_t addr, std::size_t len) {
  // The same range again, for its errno (a short read: its end is not mapped).
  std::vector<char> buf(std::max<std::size_t>(len, 1));
  iovec local{buf.data(), buf.size()};
  iovec remote{reinterpret_cast<void*>(addr), buf.size()};
  errno = 0;
  const ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
  const bool read = n == static_cast<ssize_t>(buf.size());
  const int err = n >= 0 && !read ? EFAULT : errno;
  char hex[24];
  std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(addr));
  const std::string what = std::string("cannot read the target's memory at 0x") + hex;
  if (err == ESRCH) return Error(ExitCode::no_such_process, what + ": the process has exited");
  if (err == EPERM)
    return Error(
        ExitCode::permission,
        what + (geteuid() == 0 ? ": the kernel refused (a process that is not dumpable, or in a user namespace "
                                 "we are not in)"
                               : " (need CAP_SYS_PTRACE or root)"));
  return Error(ExitCode::io, what + ": " + (read ? "it changed while we read it" : std::strerror(err ? err : EFAULT)) +
                                 " (a process in the middle of its exec, or not the program its files say)");
}

std::optional<std::string> read_cstring(pid_t pid, std::uint64_t addr, std::size_t max) {
  std::string out;
  char buf[64];
  while (out.size() < max) {
    // Read in small pieces so a string near the end of a mapping still works.
    if (!read_memory(pid, addr + out.size(), buf, sizeof buf)) {
      if (!read_memory(pid, addr + out.size(), buf, 1)) return std::nullopt;
      if (buf[0] == '\0') return out;
      out.push_back(buf[0]);
      continue;
    }
    for (char c : buf) {
      if (c == '\0' || out.size() == max) return out;
      out.push_back(c);
    }
  }
  return out;
}

std::vector<pid_t> parse_nspid(const std::string& status) {
  std::vector<pid_t> out;
  std::size_t at = 0;
  while (at < status.size()) {
    auto end = status.find('\n', at);
    if (end == std::string::npos) end = status.size();
    if (status.compare(at, 6, "NSpid:") == 0) {
      const std::string rest = status.substr(at + 6, end - at - 6);
      std::size_t p = 0;
      while (p < rest.size()) {
        while (p < rest.size() && (rest[p] == ' ' || rest[p] == '\t')) ++p;
        std::size_t q = p;
        while (q < rest.size() && std::isdigit(static_cast<unsigned char>(rest[q]))) ++q;
        if (q == p) break;
        try {
          out.push_back(static_cast<pid_t>(std::stol(rest.substr(p, q - p))));
        } catch (const std::exception&) {
          return {};
        }
        p = q;
      }
      return out;
    }
    at = end + 1;
  }
  return out;
}

}  // namespace lt::proc
