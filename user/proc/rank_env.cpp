#include "user/proc/rank_env.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <utility>

namespace lt::proc {

int parse_env_number(const std::string& s) {
  std::size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  if (b == std::string::npos) return -1;
  int v = -1;
  const char* first = s.data() + b;
  const char* last = s.data() + e + 1;
  auto [ptr, ec] = std::from_chars(first, last, v);
  if (ec != std::errc() || ptr != last || v < 0) return -1;
  return v;
}

namespace {

// The first of `keys` whose value is a valid number; -1 if none.
int first_number(const std::map<std::string, std::string>& env, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    auto it = env.find(k);
    if (it == env.end()) continue;
    if (int v = parse_env_number(it->second); v >= 0) return v;
  }
  return -1;
}

std::string first_string(const std::map<std::string, std::string>& env, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    auto it = env.find(k);
    if (it != env.end() && !it->second.empty()) return it->second;
  }
  return "";
}

template <std::size_t N>
void copy_field(char (&dst)[N], const std::string& src) {
  const std::size_t n = std::min(src.size(), N - 1);
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

std::string own_hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "";
  return std::string(buf, strnlen(buf, sizeof buf));
}

// Asks a child that joins the target's UTS namespace.  The child runs only
// async-signal-safe calls (we may have threads).  "" on failure; *timed_out
// when the child did not answer within 1 s.
std::string hostname_in_namespace(int ns_fd, bool* timed_out) {
  *timed_out = false;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return "";
  const pid_t child = fork();
  if (child < 0) {
    close(p[0]);
    close(p[1]);
    return "";
  }
  if (child == 0) {
    close(p[0]);
    struct utsname u;
    if (setns(ns_fd, CLONE_NEWUTS) != 0 || uname(&u) != 0) _exit(1);
    const std::size_t n = strnlen(u.nodename, sizeof u.nodename);
    _exit(write(p[1], u.nodename, n) == static_cast<ssize_t>(n) ? 0 : 1);
  }
  close(p[1]);
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  bool eof = false;
  while (!eof) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      *timed_out = true;
      break;
    }
    pollfd pf{p[0], POLLIN, 0};
    const int r = poll(&pf, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      *timed_out = r == 0;
      break;
    }
    char buf[128];
    const ssize_t n = read(p[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      eof = true;
    } else {
      out.append(buf, static_cast<std::size_t>(n));
    }
  }
  close(p[0]);
  if (!eof) kill(child, SIGKILL);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!eof || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return "";
  return out;
}

}  // namespace

RankEnv parse_rank_env(const std::map<std::string, std::string>& env) {
  RankEnv r;
  r.rank = first_number(env, {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"});
  r.local_rank = first_number(env, {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"});
  r.world_size = first_number(env, {"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"});
  r.local_world_size = first_number(env, {"LOCAL_WORLD_SIZE"});
  r.group_rank = first_number(env, {"GROUP_RANK"});
  r.slurm_procid = first_number(env, {"SLURM_PROCID"});
  r.slurm_nodeid = first_number(env, {"SLURM_NODEID"});
  const int port = first_number(env, {"MASTER_PORT"});
  r.master_port = port >= 1 && port <= 65535 ? static_cast<unsigned>(port) : 0;
  r.master_addr = first_string(env, {"MASTER_ADDR"});
  r.slurm_job_id = first_string(env, {"SLURM_JOB_ID", "SLURM_JOBID"});
  r.run_id = first_string(env, {"TORCHELASTIC_RUN_ID"});
  return r;
}

lt_proc_env_event to_event(pid_t pid, const RankEnv& env, const std::string& hostname) {
  lt_proc_env_event e{};
  e.hdr.kind = static_cast<u16>(LT_EV_PROC_ENV);
  e.hdr.size = sizeof e;
  e.hdr.pid = static_cast<u32>(pid);
  e.hdr.tid = static_cast<u32>(pid);
  e.rank = env.rank;
  e.local_rank = env.local_rank;
  e.world_size = env.world_size;
  e.local_world_size = env.local_world_size;
  e.group_rank = env.group_rank;
  e.slurm_procid = env.slurm_procid;
  e.slurm_nodeid = env.slurm_nodeid;
  e.master_port = env.master_port;
  copy_field(e.slurm_job_id, env.slurm_job_id);
  copy_field(e.master_addr, env.master_addr);
  copy_field(e.run_id, env.run_id);
  copy_field(e.hostname, hostname);
  return e;
}

std::string process_hostname(pid_t pid) {
  struct stat theirs {
  }, ours{};
  const std::string ns = "/proc/" + std::to_string(pid) + "/ns/uts";
  if (stat(ns.c_str(), &theirs) != 0 || stat("/proc/self/ns/uts", &ours) != 0 ||
      (theirs.st_ino == ours.st_ino && theirs.st_dev == ours.st_dev))
    return own_hostname();
  // Keyed by the namespace's inode: a namespace freed and its inode reused
  // within one session could return a stale name (the name of a namespace
  // can also change by sethostname); one session is short enough.
  static std::mutex mu;
  static std::map<std::pair<dev_t, ino_t>, std::string> cache;
  const auto key = std::make_pair(theirs.st_dev, theirs.st_ino);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  const int fd = open(ns.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return own_hostname();
  bool timed_out = false;
  std::string name = hostname_in_namespace(fd, &timed_out);
  close(fd);
  if (name.empty()) name = own_hostname();
  // A timeout may be a passing stall: ask again next time.
  if (!timed_out) {
    std::lock_guard<std::mutex> lock(mu);
    cache[key] = name;
  }
  return name;
}

}  // namespace lt::proc
