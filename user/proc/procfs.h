// Reading another process through /proc: maps, environment, command line,
// descendants, and its memory (process_vm_readv).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lt::proc {

struct Mapping {
  std::uint64_t start = 0, end = 0, offset = 0;
  std::string perms;  // "r-xp"
  std::string path;   // may be empty or "[heap]"
};

bool exists(pid_t pid);
std::vector<Mapping> read_maps(pid_t pid);
std::map<std::string, std::string> read_environ(pid_t pid);
std::vector<std::string> read_cmdline(pid_t pid);
std::string read_comm(pid_t pid);
pid_t read_ppid(pid_t pid);
// Every live descendant of `pid` (children, grandchildren, ...).
std::vector<pid_t> descendants(pid_t pid);
// Path through which we can open a file the target has mapped, even across
// mount namespaces.
std::string root_path(pid_t pid, const std::string& path);

// Reads target memory; false if any byte was unreadable.
bool read_memory(pid_t pid, std::uint64_t addr, void* out, std::size_t len);
template <typename T>
std::optional<T> read_value(pid_t pid, std::uint64_t addr) {
  T v{};
  if (!read_memory(pid, addr, &v, sizeof v)) return std::nullopt;
  return v;
}
// A NUL-terminated C string of at most `max` bytes.
std::optional<std::string> read_cstring(pid_t pid, std::uint64_t addr, std::size_t max = 256);

}  // namespace lt::proc
