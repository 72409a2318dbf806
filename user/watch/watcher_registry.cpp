#include "user/watch/watcher_registry.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "user/core/errors.h"

namespace lt {

// Lines: "watcher PID", then "all" or "pid N" / "env KEY=VALUE" lines, and
// last "dir DIR" (the rest of the text: a directory name may hold any byte).
std::string format_selection(const WatchSelection& s) {
  std::string t = "watcher " + std::to_string(s.watcher) + "\n";
  if (s.all) t += "all\n";
  for (pid_t p : s.pids) t += "pid " + std::to_string(p) + "\n";
  for (const auto& [k, v] : s.env) t += "env " + k + "=" + v + "\n";
  return t + "dir " + s.dir;
}

bool parse_selection(const std::string& text, WatchSelection& out) {
  WatchSelection s;
  std::size_t at = 0;
  bool have_watcher = false;
  while (at < text.size()) {
    if (text.compare(at, 4, "dir ") == 0) {
      s.dir = text.substr(at + 4);
      if (!have_watcher || s.watcher <= 0) return false;
      out = std::move(s);
      return true;
    }
    const std::size_t nl = text.find('\n', at);
    if (nl == std::string::npos) return false;
    const std::string line = text.substr(at, nl - at);
    at = nl + 1;
    auto number = [](const std::string& n, pid_t& v) {
      char* end = nullptr;
      errno = 0;
      const long x = std::strtol(n.c_str(), &end, 10);
      if (n.empty() || *end || errno || x <= 0 || x > 0x3fffffff) return false;
      v = static_cast<pid_t>(x);
      return true;
    };
    if (line.rfind("watcher ", 0) == 0) {
      if (!number(line.substr(8), s.watcher)) return false;
      have_watcher = true;
    } else if (line == "all") {
      s.all = true;
    } else if (line.rfind("pid ", 0) == 0) {
      pid_t p = 0;
      if (!number(line.substr(4), p)) return false;
      s.pids.push_back(p);
    } else if (line.rfind("env ", 0) == 0) {
      const std::size_t eq = line.find('=', 4);
      if (eq == std::string::npos || eq == 4) return false;
      s.env.emplace_back(line.substr(4, eq - 4), line.substr(eq + 1));
    } else {
      return false;
    }
  }
  return false;
}

namespace {

std::vector<pid_t> watched_now(const WatchSelection& s, const JobProcesses& find) {
  std::vector<pid_t> out = s.pids;
  if (!s.env.empty() && find) {
    auto more = find(s.env);
    out.insert(out.end(), more.begin(), more.end());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

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

}  // namespace

std::string selection_overlap(const WatchSelection& mine, const WatchSelection& theirs, const JobProcesses& find) {
  if (theirs.all) return "it watches every process (--all)";
  if (mine.all) return "--all would take its processes too";
  if (!mine.env.empty() && !theirs.env.empty() && envs_compatible(mine.env, theirs.env))
    return "it watches the processes with " + env_text(theirs.env);
  const auto a = watched_now(theirs, find);
  const auto b = watched_now(mine, find);
  std::vector<pid_t> both;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
  if (both.empty()) return "";
  return "it watches pid " + std::to_string(both.front());
}

namespace {

// The registry directory: made here (root's, 0755), refused when it is a
// link or someone else's (they could read or plant entries).
void ensure_registry_dir(const std::string& dir) {
  for (std::size_t slash = 1; slash != std::string::npos;) {
    slash = dir.find('/', slash + 1);
    const std::string part = dir.substr(0, slash);
    if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST)
      throw Error(ExitCode::io, "cannot make " + part + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) throw Error(ExitCode::io, "cannot read " + dir + ": " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
    throw Error(ExitCode::unsafe_output,
                dir + " is not a directory of ours that only we may write: the watcher registry refuses it");
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

}  // namespace

WatcherRegistration::WatcherRegistration(const WatchSelection& mine, const JobProcesses& find, const std::string& dir) {
  ensure_registry_dir(dir);
  const std::string lock_path = dir + "/.lock";
  const int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (lock < 0) throw Error(ExitCode::io, "cannot open " + lock_path + ": " + std::strerror(errno));
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }  // releases the flock
  } unlock{lock};
  if (flock(lock, LOCK_EX) != 0) throw Error(ExitCode::io, "cannot lock " + lock_path + ": " + std::strerror(errno));

  DIR* d = opendir(dir.c_str());
  if (!d) throw Error(ExitCode::io, "cannot read " + dir + ": " + std::strerror(errno));
  std::vector<std::string> names;
  while (const dirent* e = readdir(d))
    if (e->d_name[0] != '.') names.emplace_back(e->d_name);
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    const std::string path = dir + "/" + name;
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) continue;
    struct stat st {};
    const bool plain = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    const bool live = plain && flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    const std::string text = live ? read_all(fd) : std::string();
    ::close(fd);
    if (!live) {
      if (plain) unlink(path.c_str());  // left by a watcher killed with SIGKILL
      continue;
    }
    WatchSelection theirs;
    if (!parse_selection(text, theirs) || theirs.watcher == mine.watcher) continue;
    const std::string why = selection_overlap(mine, theirs, find);
    if (!why.empty())
      throw Error(ExitCode::watched, "the watcher pid " + std::to_string(theirs.watcher) + " (on " + theirs.dir +
                                         ") runs here and " + why +
                                         ": one watcher per process on a machine (ask it: ltrace-bpf watch --dir " +
                                         theirs.dir + " --capture-now)");
  }

  path_ = dir + "/" + std::to_string(mine.watcher);
  unlink(path_.c_str());  // a dead watcher's, whose pid we now have
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(ExitCode::io, "cannot create " + path_ + ": " + std::strerror(errno));
  const std::string text = format_selection(mine);
  if (flock(fd_, LOCK_EX) != 0 || write(fd_, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    const int err = errno;
    ::close(fd_);
    unlink(path_.c_str());
    throw Error(ExitCode::io, "cannot write " + path_ + ": " + std::strerror(err));
  }
}

WatcherRegistration::~WatcherRegistration() {
  if (fd_ < 0) return;
  unlink(path_.c_str());
  ::close(fd_);
}

}  // namespace lt
