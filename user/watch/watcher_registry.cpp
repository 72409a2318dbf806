#include "user/watch/watcher_registry.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include "user/core/errors.h"

namespace lt {

namespace {

// A value on one line: backslash and newline escaped.
std::string escape(const std::string& v) {
  std::string o;
  for (char c : v) {
    if (c == '\\')
      o += "\\\\";
    else if (c == '\n')
      o += "\\n";
    else
      o += c;
  }
  return o;
}

bool unescape(const std::string& v, std::string& o) {
  o.clear();
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] != '\\') {
      o += v[i];
      continue;
    }
    if (++i == v.size()) return false;
    if (v[i] == 'n')
      o += '\n';
    else if (v[i] == '\\')
      o += '\\';
    else
      return false;
  }
  return true;
}

bool positive(const std::string& n, pid_t& v) {
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(n.c_str(), &end, 10);
  if (n.empty() || *end || errno || x <= 0 || x > 0x3fffffff) return false;
  v = static_cast<pid_t>(x);
  return true;
}

}  // namespace

// Lines: "watcher PID", then "all", "children", "pid N [START]" and
// "env KEY=VALUE" lines, and last "dir DIR" (the rest of the text: a
// directory name may hold any byte).
std::string format_selection(const WatchSelection& s) {
  std::string t = "watcher " + std::to_string(s.watcher) + "\n";
  if (s.all) t += "all\n";
  if (s.children) t += "children\n";
  for (pid_t p : s.pids) {
    const auto st = s.started.find(p);
    t += "pid " + std::to_string(p) + (st == s.started.end() ? "" : " " + std::to_string(st->second)) + "\n";
  }
  for (const auto& [k, v] : s.env) t += "env " + escape(k) + "=" + escape(v) + "\n";
  return t + "dir " + s.dir;
}

bool parse_selection(const std::string& text, WatchSelection& out) {
  WatchSelection s;
  std::size_t at = 0;
  bool have_watcher = false;
  while (at < text.size()) {
    if (text.compare(at, 4, "dir ") == 0) {
      s.dir = text.substr(at + 4);
      if (!have_watcher) return false;
      out = std::move(s);
      return true;
    }
    const std::size_t nl = text.find('\n', at);
    if (nl == std::string::npos) return false;
    const std::string line = text.substr(at, nl - at);
    at = nl + 1;
    if (line.rfind("watcher ", 0) == 0) {
      if (!positive(line.substr(8), s.watcher)) return false;
      have_watcher = true;
    } else if (line == "all") {
      s.all = true;
    } else if (line == "children") {
      s.children = true;
    } else if (line.rfind("pid ", 0) == 0) {
      pid_t p = 0;
      const std::size_t sp = line.find(' ', 4);
      if (!positive(line.substr(4, sp == std::string::npos ? std::string::npos : sp - 4), p)) return false;
      if (sp != std::string::npos) {
        const std::string n = line.substr(sp + 1);
        char* end = nullptr;
        errno = 0;
        const unsigned long long start = std::strtoull(n.c_str(), &end, 10);
        if (n.empty() || !std::isdigit(static_cast<unsigned char>(n[0])) || *end || errno) return false;
        s.started[p] = start;
      }
      s.pids.push_back(p);
    } else if (line.rfind("env ", 0) == 0) {
      const std::size_t eq = line.find('=', 4);
      std::string k, v;
      if (eq == std::string::npos || eq == 4 || !unescape(line.substr(4, eq - 4), k) ||
          !unescape(line.substr(eq + 1), v))
        return false;
      s.env.emplace_back(std::move(k), std::move(v));
    } else {
      return false;
    }
  }
  return false;
}

namespace {

// Two --job-env filters can take one process unless a key has different
// values in them (the Slurm nodes' watchers: one SLURMD_NODENAME each).
bool envs_compatible(const EnvPairs& a, const EnvPairs& b) {
  for (const auto& [k, v] : a)
    for (const auto& [k2, v2] : b)
      if (k == k2 && v != v2) return false;
  return true;
}

std::string env_text(const EnvPairs& env) {
  std::string t;
  for (const auto& [k, v] : env) t += (t.empty() ? "" : " ") + k + "=" + v;
  return t;
}

std::vector<pid_t> sorted(std::vector<pid_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

}  // namespace

std::string selection_overlap(const WatchSelection& mine, const WatchSelection& theirs, const WatchedNow& watched) {
  if (theirs.all) return "it watches every process (--all)";
  if (mine.all) return "--all would take its processes too";
  if (!mine.env.empty() && !theirs.env.empty() && envs_compatible(mine.env, theirs.env))
    return "it watches the processes with " + env_text(theirs.env);
  const auto a = sorted(watched ? watched(theirs) : theirs.pids);
  const auto b = sorted(watched ? watched(mine) : mine.pids);
  std::vector<pid_t> both;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
  if (both.empty()) return "";
  return "it watches pid " + std::to_string(both.front());
}

namespace {

// The registry directory, opened without following a link: made here
// (ours, 0700), refused when it is someone else's or open to others (they
// could read, lock or plant entries).
int open_registry_dir(const std::string& dir) {
  for (std::size_t slash = 1; slash != std::string::npos;) {
    slash = dir.find('/', slash + 1);
    const std::string part = dir.substr(0, slash);
    const bool last = slash == std::string::npos;
    if (mkdir(part.c_str(), last ? 0700 : 0755) != 0 && errno != EEXIST) {
      const int err = errno;
      throw Error(err == EACCES || err == EPERM || err == EROFS ? ExitCode::permission : ExitCode::io,
                  "cannot make " + part + ": " + std::strerror(err));
    }
  }
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw Error(err == ELOOP || err == ENOTDIR ? ExitCode::unsafe_output : ExitCode::io,
                "cannot open " + dir + ": " + std::strerror(err));
  }
  struct stat st {};
  // Ours, and no one else may write in it; one others may read (an older
  // ltrace-bpf's 0755) is closed to them first.
  if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 022) ||
      ((st.st_mode & 077) && fchmod(fd, 0700) != 0)) {
    ::close(fd);
    throw Error(ExitCode::unsafe_output,
                dir + " is not a directory of ours that only we may use (0700): the watcher registry refuses it");
  }
  return fd;
}

std::string read_all(int fd) {
  std::string text;
  char b[4096];
  for (off_t at = 0; text.size() < 1 << 20;) {
    const ssize_t n = pread(fd, b, sizeof b, at);
    if (n <= 0) break;
    text.append(b, static_cast<std::size_t>(n));
    at += n;
  }
  return text;
}

// The registry's lock: another watcher registering holds it while it reads
// the entries (/proc of its jobs' processes); 10 s at most.
void lock_registry(int fd, const std::string& dir) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR)
      throw Error(ExitCode::io, "cannot lock " + dir + "/.lock: " + std::strerror(errno));
    if (std::chrono::steady_clock::now() > deadline)
      throw Error(ExitCode::io, "another watcher has held " + dir + "/.lock for 10 s (registering): try again");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

WatcherRegistration::WatcherRegistration(const WatchSelection& mine, const WatchedNow& watched,
                                         const std::string& dir) {
  dir_fd_ = open_registry_dir(dir);
  try {
    const int lock = openat(dir_fd_, ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (lock < 0) throw Error(ExitCode::io, "cannot open " + dir + "/.lock: " + std::strerror(errno));
    struct Unlock {
      int fd;
      ~Unlock() { ::close(fd); }  // releases the flock
    } unlock{lock};
    lock_registry(lock, dir);

    const int list_fd = dup(dir_fd_);
    DIR* d = list_fd >= 0 ? fdopendir(list_fd) : nullptr;
    if (!d) {
      if (list_fd >= 0) ::close(list_fd);
      throw Error(ExitCode::io, "cannot read " + dir + ": " + std::strerror(errno));
    }
    std::vector<std::string> names;
    while (const dirent* e = readdir(d))
      if (e->d_name[0] != '.') names.emplace_back(e->d_name);
    closedir(d);
    std::sort(names.begin(), names.end());
    // What this watcher would watch is read once (with --job-env, a scan of
    // every process's environment), at the first entry that needs it, not
    // once per entry under the lock.
    std::optional<std::vector<pid_t>> mine_now;
    const WatchedNow watched_once = !watched ? WatchedNow() : [&](const WatchSelection& s) {
      if (&s != &mine) return watched(s);
      if (!mine_now) mine_now = watched(mine);
      return *mine_now;
    };
    for (const auto& name : names) {
      const int fd = openat(dir_fd_, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
      if (fd < 0) continue;
      struct stat st {};
      if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        continue;
      }
      if (flock(fd, LOCK_SH | LOCK_NB) == 0) {  // its watcher is gone (SIGKILL): not obeyed
        ::close(fd);
        unlinkat(dir_fd_, name.c_str(), 0);
        continue;
      }
      const bool live = errno == EWOULDBLOCK;
      const std::string text = live ? read_all(fd) : std::string();
      ::close(fd);
      if (!live) continue;  // cannot tell: neither obeyed nor removed
      WatchSelection theirs;
      std::string why;
      if (!parse_selection(text, theirs))
        why = "its entry " + dir + "/" + name + " is not one this ltrace-bpf reads";
      else if (theirs.watcher != mine.watcher)
        why = selection_overlap(mine, theirs, watched_once);
      if (why.empty()) continue;
      const std::string who = theirs.watcher
                                  ? "the watcher pid " + std::to_string(theirs.watcher) + " (on " + theirs.dir + ")"
                                  : "a watcher";
      throw Error(ExitCode::watched,
                  who + " runs here and " + why + ": one watcher per process on a machine" +
                      (theirs.dir.empty() ? std::string()
                                          : " (ask it: ltrace-bpf watch --dir " + theirs.dir + " --capture-now)"));
    }

    // Ours: locked before it is written, in a directory no one else may
    // open; the pid a dead watcher's entry may still hold is ours now.
    name_ = std::to_string(mine.watcher);
    unlinkat(dir_fd_, name_.c_str(), 0);
    fd_ = openat(dir_fd_, name_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd_ < 0) throw Error(ExitCode::io, "cannot create " + dir + "/" + name_ + ": " + std::strerror(errno));
    const std::string text = format_selection(mine);
    if (flock(fd_, LOCK_EX | LOCK_NB) != 0 ||
        write(fd_, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      const int err = errno;
      ::close(fd_);
      fd_ = -1;
      unlinkat(dir_fd_, name_.c_str(), 0);
      throw Error(ExitCode::io, "cannot write " + dir + "/" + name_ + ": " + std::strerror(err));
    }
  } catch (...) {
    ::close(dir_fd_);
    dir_fd_ = -1;
    throw;
  }
}

WatcherRegistration::~WatcherRegistration() {
  if (fd_ >= 0) {
    unlinkat(dir_fd_, name_.c_str(), 0);
    ::close(fd_);
  }
  if (dir_fd_ >= 0) ::close(dir_fd_);
}

}  // namespace lt
