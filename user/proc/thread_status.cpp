#include "user/proc/thread_status.h"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace lt::proc {

namespace {

std::optional<std::string> slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return std::nullopt;
  return ss.str();
}

std::string task_dir(pid_t pid, pid_t tid) {
  return "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/";
}

// The fields of a stat line after "(comm)" (comm may hold spaces and ')').
std::vector<std::string> stat_fields_after_comm(const std::string& line) {
  std::vector<std::string> out;
  auto close = line.rfind(')');
  if (close == std::string::npos) return out;
  std::istringstream ss(line.substr(close + 1));
  for (std::string w; ss >> w;) out.push_back(w);
  return out;
}

}  // namespace

std::string ThreadStatus::state_words() const {
  switch (state) {
    case 'R':
      return "running";
    case 'S':
      return "sleeping";
    case 'D':
      return "disk sleep";
    case 'T':
      return "stopped";
    case 't':
      return "tracing stop";
    case 'Z':
      return "zombie";
    case 'X':
      return "dead";
    case 'I':
      return "idle";
    default:
      return "unknown";
  }
}

std::vector<pid_t> task_ids(pid_t pid) {
  std::vector<pid_t> out;
  DIR* d = opendir(("/proc/" + std::to_string(pid) + "/task").c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    long tid = std::strtol(e->d_name, &end, 10);
    if (*end == '\0' && tid > 0) out.push_back(static_cast<pid_t>(tid));
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<ThreadStatus> thread_status(pid_t pid, pid_t tid) {
  const std::string dir = task_dir(pid, tid);
  auto stat = slurp(dir + "stat");
  if (!stat || stat->empty()) return std::nullopt;
  ThreadStatus t;
  t.tid = tid;
  auto open = stat->find('('), close = stat->rfind(')');
  if (open != std::string::npos && close != std::string::npos && close > open)
    t.name = stat->substr(open + 1, close - open - 1);
  auto fields = stat_fields_after_comm(*stat);
  if (!fields.empty() && !fields[0].empty()) t.state = fields[0][0];
  // "on-CPU ns, run-queue ns, times run" (CONFIG_SCHED_INFO).
  if (auto ss = slurp(dir + "schedstat")) {
    std::istringstream in(*ss);
    unsigned long long on_cpu = 0, queued = 0, runs = 0;
    if (in >> on_cpu >> queued >> runs) t.runs = static_cast<long long>(runs);
  }
  // "running" | "-1 SP PC" (blocked, not in a call) | "NR A1..A6 SP PC".
  // Read after stat: a thread that woke in between shows "running" here.
  if (auto sc = slurp(dir + "syscall")) {
    std::istringstream ss(*sc);
    std::vector<std::string> w;
    for (std::string s; ss >> s;) w.push_back(s);
    if (w.size() == 3 || w.size() == 9) {
      t.syscall = std::strtol(w[0].c_str(), nullptr, 10);
      t.sp = std::strtoull(w[w.size() - 2].c_str(), nullptr, 16);
      t.pc = std::strtoull(w[w.size() - 1].c_str(), nullptr, 16);
    }
  }
  return t;
}

std::optional<std::uint64_t> start_time(pid_t pid) {
  auto stat = slurp("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return std::nullopt;
  auto fields = stat_fields_after_comm(*stat);
  // fields[0] is field 3 (state): field 22 is fields[19].  A zombie has
  // no memory left to read: as good as gone.
  if (fields.size() < 20 || fields[0] == "Z" || fields[0] == "X") return std::nullopt;
  return std::strtoull(fields[19].c_str(), nullptr, 10);
}

}  // namespace lt::proc
