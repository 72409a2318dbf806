#include "user/sources/other_tracers.h"

#include <bpf/bpf.h>
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "user/proc/procfs.h"

namespace lt {

namespace {

constexpr const char* kTargetsMap = "lt_targets";  // bpf/common.bpf.h

// The map ids this process holds (its own fds' fdinfo).
std::set<std::uint32_t> map_ids_of(pid_t pid) {
  std::set<std::uint32_t> ids;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fdinfo";
  DIR* d = opendir(dir.c_str());
  if (!d) return ids;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string info = proc::read_bounded(dir + "/" + e->d_name, 1024);
    const auto at = info.find("map_id:");
    if (at != std::string::npos)
      ids.insert(static_cast<std::uint32_t>(std::strtoul(info.c_str() + at + 7, nullptr, 10)));
  }
  closedir(d);
  return ids;
}

// The process holding map `id` (a scan of every process's fds), or 0.
// Not this one, which holds an fd of it while it asks (a scan that met
// this process first named it as the other tracer).
pid_t owner_of(std::uint32_t id) {
  const pid_t self = getpid();
  DIR* d = opendir("/proc");
  if (!d) return 0;
  pid_t found = 0;
  while (!found) {
    dirent* e = readdir(d);
    if (!e) break;
    char* end = nullptr;
    const long p = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || p <= 0 || p == self) continue;
    if (map_ids_of(static_cast<pid_t>(p)).count(id)) found = static_cast<pid_t>(p);
  }
  closedir(d);
  return found;
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

std::optional<OtherTracer> traced_by_another(const std::vector<pid_t>& pids, bool all, bool watchers_only,
                                             bool* listed) {
  if (listed) *listed = true;
  const std::set<std::uint32_t> mine = map_ids_of(getpid());
  std::uint32_t id = 0;
  for (;;) {
    if (bpf_map_get_next_id(id, &id) != 0) {
      if (errno != ENOENT && listed) *listed = false;  // EPERM: not ours to list
      return std::nullopt;
    }
    if (mine.count(id)) continue;
    Fd map{bpf_map_get_fd_by_id(id)};
    if (map.fd < 0) continue;  // gone meanwhile
    bpf_map_info info{};
    std::uint32_t len = sizeof info;
    if (bpf_obj_get_info_by_fd(map.fd, &info, &len) != 0) continue;
    if (std::strncmp(info.name, kTargetsMap, sizeof info.name) != 0 || info.type != BPF_MAP_TYPE_HASH ||
        info.key_size != sizeof(std::uint32_t) || info.value_size > 65536)
      continue;
    std::vector<unsigned char> value(info.value_size);
    // Its owner, looked up once per map (a scan of every process's fds),
    // at its first live key: a map of no watcher's is skipped whole.
    std::optional<OtherTracer> held;
    auto owner = [&]() -> const OtherTracer& {
      if (!held) {
        held.emplace();
        held->map_id = id;
        held->owner = owner_of(id);
        const auto args = held->owner ? proc::read_cmdline(held->owner) : std::vector<std::string>{};
        for (const auto& a : args) held->owner_cmdline += (held->owner_cmdline.empty() ? "" : " ") + a;
        // `ltrace-bpf watch ...`: the command, its first word not an option
        // (an option's value before it, `-o watch`, would read as one).
        const auto word = std::find_if(args.begin() + (args.empty() ? 0 : 1), args.end(),
                                       [](const std::string& a) { return a.empty() || a[0] != '-'; });
        held->watcher = word != args.end() && *word == "watch";
      }
      return *held;
    };
    auto live_key = [&](pid_t pid) {
      const auto key = static_cast<std::uint32_t>(pid);
      return pid > 0 && pid != getpid() && bpf_map_lookup_elem(map.fd, &key, value.data()) == 0 && proc::exists(pid);
    };
    auto hit = [&](pid_t pid) -> std::optional<OtherTracer> {
      OtherTracer t = owner();
      t.traced = pid;
      return t;
    };
    if (all) {
      std::uint32_t key = 0, next = 0;
      for (const std::uint32_t* prev = nullptr; bpf_map_get_next_key(map.fd, prev, &next) == 0; prev = &key) {
        key = next;
        if (!live_key(static_cast<pid_t>(key))) continue;
        if (watchers_only && !owner().watcher) break;
        return hit(static_cast<pid_t>(key));
      }
    } else {
      for (pid_t pid : pids) {
        if (!live_key(pid)) continue;
        if (watchers_only && !owner().watcher) break;
        return hit(pid);
      }
    }
  }
}

}  // namespace lt
