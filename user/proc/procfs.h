// Reading another process through /proc: maps, environment, command line,
// descendants, and its memory (process_vm_readv).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "user/core/errors.h"

namespace lt::proc {

struct Mapping {
  std::uint64_t start = 0, end = 0, offset = 0;
  std::string perms;  // "r-xp"
  std::string path;   // may be empty or "[heap]"; as the reader of /proc sees it
  unsigned dev_major = 0, dev_minor = 0;
  std::uint64_t inode = 0;
};

// Up to `max` bytes of a file (procfs files are generated per read: one
// read() loop, no stat, no stream). Empty when it cannot be opened.
std::string read_bounded(const std::string& path, std::size_t max);

bool exists(pid_t pid);
// Exists and has not begun to exit (PF_EXITING, set before the kernel's
// exit tracepoint runs, while /proc still says R or D): what a writer of
// BPF entries for `pid` checks after its write, since BPF removes them at
// that tracepoint and a write after it would outlive the process.
bool running(pid_t pid);
// The same, from a /proc/PID/stat line (a comm may hold ')' and spaces).
bool stat_says_running(const std::string& stat_line);
// Whether two processes run the same executable file (/proc/PID/exe's
// device and inode): a fork that has not exec'd yet.
bool same_executable(pid_t a, pid_t b);
std::vector<Mapping> read_maps(pid_t pid);
// Whether the file /proc/PID/exe names is among `maps`. False in the moment
// of an execve between the new, empty address space and the new program's
// mappings (the exec's close-on-exec already let the launcher go on).
bool exe_is_mapped(pid_t pid, const std::vector<Mapping>& maps);
std::map<std::string, std::string> read_environ(pid_t pid);
std::vector<std::string> read_cmdline(pid_t pid);
std::string read_comm(pid_t pid);
pid_t read_ppid(pid_t pid);
// Whether `child` is a fork of `parent` with no exec since (a DataLoader
// worker; not a torchrun rank): its command line and the 16 random bytes
// every exec gets (auxv AT_RANDOM; also with ASLR off) are its parent's;
// where those cannot be read, its vDSO's address, which every exec places
// anew under ASLR. False when the command lines cannot be read.
bool same_image(pid_t child, pid_t parent);
// The pid ptrace-attached to one of pid's threads (TracerPid), 0 if none.
pid_t traced_by(pid_t pid);
// "NSpid:" of /proc/PID/status: the pid in each pid namespace from ours
// inward (one entry when the process is in ours); empty if absent.
std::vector<pid_t> parse_nspid(const std::string& status);

// Every live descendant of `pid` (children, grandchildren, ...).
std::vector<pid_t> descendants(pid_t pid);
// Path through which we can open a file the target has mapped, even across
// mount namespaces.
std::string root_path(pid_t pid, const std::string& path);
// A path that opens exactly the file behind mapping `m` (same device and
// inode), wherever the target lives: /proc/PID/map_files/<range> (the mapped
// file itself, also under overlayfs), else the target's own path through
// /proc/PID/root (containers), else the path as we see it (a plain chroot
// shows host paths).  Empty if none of them is that file.  Uprobes attached
// through it land on the inode the target runs.
std::string mapped_file(pid_t pid, const Mapping& m);

// The first library mapped in `pid` whose file name starts with `name`
// ("libc10.so" matches Debian's libc10.so.1.13, not libc10_cuda.so): the
// path as the target names it, one we can open (mapped_file) and that
// file's (device, inode), the key probes are attached and cached by.
struct MappedLibrary {
  std::string path;
  std::string open_path;
  std::pair<unsigned long, unsigned long> file;
};
std::optional<MappedLibrary> find_mapped_library(pid_t pid, const std::string& name);

// The threads of `pid`: tid in its own (innermost) pid namespace -> tid as
// we see it (NSpid of /proc/PID/task/*/status; the identity outside
// containers).
std::map<pid_t, pid_t> host_tids(pid_t pid);

// Reads target memory; false if any byte was unreadable.
bool read_memory(pid_t pid, std::uint64_t addr, void* out, std::size_t len);
template <typename T>
std::optional<T> read_value(pid_t pid, std::uint64_t addr) {
  T v{};
  if (!read_memory(pid, addr, &v, sizeof v)) return std::nullopt;
  return v;
}
// Why a read of the target's memory at `addr` fails, as the error to raise:
// gone (no_such_process), refused (permission: only then is a missing
// capability the cause; as root it is a process that is not dumpable or in
// a user namespace we are not in), or the address not mapped (io: a process
// in the middle of its exec, or not the program its files say).
Error unreadable_memory(pid_t pid, std::uint64_t addr, std::size_t len);
// A NUL-terminated C string of at most `max` bytes.
std::optional<std::string> read_cstring(pid_t pid, std::uint64_t addr, std::size_t max = 256);

}  // namespace lt::proc
