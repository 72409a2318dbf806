#include "user/proc/job_discovery.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <set>
#include <string_view>

#include "user/proc/procfs.h"

namespace lt::proc {

namespace {

enum class Env { ok, unreadable, gone };

// /proc/PID/environ as it is (NUL-separated entries).
Env read_raw_environ(pid_t pid, std::string* out) {
  const std::string path = "/proc/" + std::to_string(pid) + "/environ";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == EACCES || errno == EPERM ? Env::unreadable : Env::gone;
  char buf[8192];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return err == EACCES || err == EPERM ? Env::unreadable : Env::gone;
    }
    if (n == 0) break;
    out->append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  return Env::ok;
}

// Every pair present, with the first KEY= entry holding VALUE (getenv's view).
bool environ_matches(const std::string& raw, const std::vector<std::pair<std::string, std::string>>& match) {
  std::vector<int> state(match.size(), 0);  // 0 unseen, 1 equal, 2 different
  std::size_t pos = 0;
  while (pos < raw.size()) {
    std::size_t end = raw.find('\0', pos);
    if (end == std::string::npos) end = raw.size();
    const std::string_view entry(raw.data() + pos, end - pos);
    for (std::size_t i = 0; i < match.size(); ++i) {
      if (state[i]) continue;
      const auto& [k, v] = match[i];
      if (entry.size() > k.size() && entry.compare(0, k.size(), k) == 0 && entry[k.size()] == '=')
        state[i] = entry.substr(k.size() + 1) == v ? 1 : 2;
    }
    pos = end + 1;
  }
  return std::all_of(state.begin(), state.end(), [](int s) { return s == 1; });
}

std::string basename_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// CPython: the executable is python* (python, python3, python3.11, ...), or
// an embedding program maps libpython3.
bool runs_python(pid_t pid) {
  char buf[4096];
  const std::string link = "/proc/" + std::to_string(pid) + "/exe";
  const ssize_t n = readlink(link.c_str(), buf, sizeof buf - 1);
  if (n > 0 && basename_of(std::string(buf, static_cast<std::size_t>(n))).rfind("python", 0) == 0) return true;
  for (auto& m : read_maps(pid))
    if (basename_of(m.path).rfind("libpython3", 0) == 0) return true;
  return false;
}

std::string describe(const std::vector<std::pair<std::string, std::string>>& match) {
  std::string s;
  for (auto& [k, v] : match) s += (s.empty() ? "" : " and ") + k + "=" + v;
  return s;
}

}  // namespace

std::vector<pid_t> find_job_processes(const std::vector<std::pair<std::string, std::string>>& match, std::string* why) {
  auto explain = [why](const std::string& s) {
    if (why) *why = s;
  };
  if (match.empty()) {
    explain("no KEY=VALUE to look for");
    return {};
  }
  // Ourselves and the processes above us (a wrapper started in the job's
  // own step, e.g. by `srun --overlap`, carries the job's variables too).
  std::set<pid_t> skip;
  for (pid_t p = getpid(); p > 0 && skip.insert(p).second; p = read_ppid(p)) {
  }

  std::set<pid_t> candidates;
  std::vector<pid_t> not_python;
  std::size_t unreadable = 0;
  if (DIR* d = opendir("/proc")) {
    while (dirent* e = readdir(d)) {
      char* end = nullptr;
      const long v = std::strtol(e->d_name, &end, 10);
      if (*end != '\0' || v <= 0) continue;
      const auto pid = static_cast<pid_t>(v);
      if (skip.count(pid)) continue;
      std::string raw;
      const Env r = read_raw_environ(pid, &raw);
      if (r == Env::unreadable) ++unreadable;
      // Kernel threads have an empty environment: they never match.
      if (r != Env::ok || raw.empty() || !environ_matches(raw, match)) continue;
      if (!exists(pid)) continue;  // a zombie, or gone meanwhile
      if (runs_python(pid))
        candidates.insert(pid);
      else
        not_python.push_back(pid);
    }
    closedir(d);
  }

  std::vector<pid_t> roots;
  for (pid_t c : candidates) {
    bool under_candidate = false;
    int depth = 0;
    for (pid_t p = read_ppid(c); p > 1 && depth < 4096; p = read_ppid(p), ++depth)
      if (candidates.count(p)) {
        under_candidate = true;
        break;
      }
    if (!under_candidate) roots.push_back(c);
  }

  if (!roots.empty()) {
    explain("");
    return roots;
  }
  std::string msg;
  if (!not_python.empty()) {
    std::sort(not_python.begin(), not_python.end());
    msg = std::to_string(not_python.size()) + " process(es) have " + describe(match) + " but none runs CPython:";
    for (std::size_t i = 0; i < not_python.size() && i < 5; ++i)
      msg += (i ? ", pid " : " pid ") + std::to_string(not_python[i]) + " (" + read_comm(not_python[i]) + ")";
    if (not_python.size() > 5) msg += ", ...";
  } else {
    msg = "no process on this host has " + describe(match) + " in its environment";
  }
  if (unreadable)
    msg += "; " + std::to_string(unreadable) + " environment(s) could not be read" +
           (geteuid() != 0 ? " (run as root)" : "");
  explain(msg);
  return {};
}

bool environ_has(pid_t pid, const std::vector<std::pair<std::string, std::string>>& match) {
  std::string raw;
  return !match.empty() && read_raw_environ(pid, &raw) == Env::ok && environ_matches(raw, match);
}

}  // namespace lt::proc
