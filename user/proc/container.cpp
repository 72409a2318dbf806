#include "user/proc/container.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "user/proc/census.h"
#include "user/proc/procfs.h"
#include "user/proc/rank_env.h"

namespace lt::proc {

namespace {

bool same_namespace(pid_t pid, const char* ns) {
  struct stat theirs {
  }, ours{};
  const std::string path = "/proc/" + std::to_string(pid) + "/ns/" + ns;
  if (stat(path.c_str(), &theirs) != 0 || stat((std::string("/proc/self/ns/") + ns).c_str(), &ours) != 0)
    return true;  // cannot tell: assume ours
  return theirs.st_ino == ours.st_ino && theirs.st_dev == ours.st_dev;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Its pid in the innermost pid namespace (the last NSpid field).
unsigned ns_pid_of(pid_t pid) {
  auto ns = parse_nspid(slurp("/proc/" + std::to_string(pid) + "/status"));
  return static_cast<unsigned>(ns.empty() ? pid : ns.back());
}

template <std::size_t N>
void copy_text(char (&dst)[N], const std::string& s) {
  std::strncpy(dst, s.c_str(), N - 1);
  dst[N - 1] = '\0';
}

}  // namespace

std::optional<lt_proc_container_event> container_of(pid_t pid) {
  lt_proc_container_event e{};
  if (!same_namespace(pid, "pid")) e.flags |= LT_CONTAINER_PID_NS;
  if (!same_namespace(pid, "mnt")) e.flags |= LT_CONTAINER_MNT_NS;
  if (!same_namespace(pid, "uts")) e.flags |= LT_CONTAINER_UTS_NS;
  char root[4096];
  ssize_t n = readlink(("/proc/" + std::to_string(pid) + "/root").c_str(), root, sizeof root - 1);
  if (!(e.flags & LT_CONTAINER_MNT_NS) && n > 0 && !(n == 1 && root[0] == '/')) e.flags |= LT_CONTAINER_CHROOT;
  const std::string id = container_id_from_cgroup(slurp("/proc/" + std::to_string(pid) + "/cgroup"));
  if (!e.flags && id.empty()) return std::nullopt;
  e.hdr.kind = LT_EV_PROC_CONTAINER;
  e.hdr.size = sizeof e;
  e.hdr.pid = e.hdr.tid = static_cast<std::uint32_t>(pid);
  e.ns_pid = ns_pid_of(pid);
  copy_text(e.hostname, process_hostname(pid));
  copy_text(e.container_id, id);
  return e;
}

std::string describe_container(const std::string& hostname, const std::string& container_id, unsigned ns_pid) {
  std::string s = hostname.empty() ? "?" : hostname;
  std::string inner;
  if (!container_id.empty()) inner = "id " + container_id.substr(0, 12);
  if (ns_pid) inner += (inner.empty() ? "" : ", ") + std::string("pid ") + std::to_string(ns_pid) + " inside";
  return inner.empty() ? s : s + " (" + inner + ")";
}

}  // namespace lt::proc
