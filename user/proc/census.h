// The process census behind `ltrace-bpf ps` and `--all`: which processes on
// this host, containers included, have PyTorch or Lightning loaded, and who
// they are.  Reads /proc only; never throws.
//
// The rule (cheap, one /proc/PID/maps read per candidate):
//   eligible = not a kernel thread, not a zombie, and
//              torch mapped (a libtorch*.so in /proc/PID/maps), or
//              CPython (executable python*, or libpython3* mapped) with a
//              sign of Lightning: its command line mentions "lightning", or
//              a PYTHONPATH entry holds a lightning / pytorch_lightning
//              package (seen through /proc/PID/root).
// Lightning is pure Python and always imports torch, so a real Lightning job
// is eligible through its libtorch within seconds of its start; the second
// clause finds it earlier, and covers programs that drive Lightning's
// profilers without torch.  Whether a module was imported cannot be seen
// cheaply from outside, so the Lightning version shown is the package's in
// the process's import path (next to its torch, or on PYTHONPATH).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "user/proc/rank_env.h"

namespace lt::proc {

// ---- pure parsers (unit-tested) ----

// /proc/PID/stat.  The comm may hold spaces and ')' itself: it ends at the
// last ')'.
struct StatInfo {
  std::string comm;
  char state = '?';
  pid_t ppid = 0;
  unsigned flags = 0;
  unsigned long long starttime = 0;                           // clock ticks since boot
  unsigned long long vsize = 0;                               // bytes of address space: grows when a library is mapped
  bool kernel_thread() const { return flags & 0x00200000u; }  // PF_KTHREAD
  bool zombie() const { return state == 'Z' || state == 'X' || state == 'x'; }
};
std::optional<StatInfo> parse_stat(const std::string& text);

// The container id in /proc/PID/cgroup: a path component that is, or holds
// as a word, 64 hex digits, as container runtimes name their cgroups
// (docker/<id>, docker-<id>.scope, cri-containerd-<id>.scope,
// crio-<id>.scope, libpod-<id>.scope, kubepods/.../<id>).  conmon's
// (crio-conmon-<id>, libpod-conmon-<id>) are the runtime's, not the
// container's.  Lowercased; "" if none.
std::string container_id_from_cgroup(const std::string& cgroup);

// What /proc/PID/maps says about a process.
struct MapsFacts {
  std::string python_lib;   // a mapped libpython3*.so ("" none)
  std::string torch_lib;    // a mapped libtorch*.so, as the target sees it
  bool cuda = false;        // libcuda.so mapped (the CUDA driver: CUDA in use)
  std::string xla_lib;      // torch_xla's _XLAC extension ("" none)
  std::string pjrt_plugin;  // the PJRT device a mapped plug-in serves: "TPU" (libtpu), "CUDA"; "" none
  bool torch() const { return !torch_lib.empty(); }
};
MapsFacts scan_maps(const std::string& maps_text);

// "3.11" from python3.11, libpython3.13t.so.1.0 ("3.13t"), ...; "" if none.
std::string python_version_from_name(const std::string& path);

// `__version__ = '2.15.0'` (or "...") in a version.py; "" if none.
std::string version_from_py(const std::string& text);
// "Version: 2.6.6" in a dist-info METADATA; "" if none.
std::string version_from_metadata(const std::string& text);

// Text safe to print: valid UTF-8 is kept, every byte of an invalid
// sequence and every control character becomes \xNN, a backslash \\.
std::string printable(const std::string& bytes);

// ---- reading /proc ----

// Why a process is not looked at.
enum class Skip { none, gone, zombie, kernel_thread, unreadable, self };
// Plural-ready words for counts: "kernel thread(s)".
const char* skip_reason(Skip s);

struct ProcessProbe {
  pid_t pid = 0;
  Skip skip = Skip::none;
  StatInfo stat;
  std::string exe;  // readlink(/proc/PID/exe), as we see it
  MapsFacts maps;
  bool python = false;         // CPython-looking: exe python*, or libpython3 mapped
  std::string lightning_sign;  // why Lightning is assumed ("" none)
  std::string lightning_dir;   // a Lightning package directory found on PYTHONPATH (as the target sees it)
  bool eligible() const { return skip == Skip::none && (maps.torch() || (python && !lightning_sign.empty())); }
};
// Stat, exe, maps, and (for CPython without torch) the Lightning signs;
// `lightning_known` skips the signs (already looked at: "" none).
ProcessProbe probe_process(pid_t pid, const std::string* lightning_known = nullptr);

// The process's root directory was deleted (a chroot into a removed
// directory, a container whose root is gone): no file of it can be opened
// by path any more.
bool root_deleted(pid_t pid);

// Every pid in /proc, ascending.
std::vector<pid_t> list_pids();

// torch_xla's version: torch_xla/version.py beside the mapped _XLAC (through
// /proc/PID/root); "" if unreadable.
std::string torch_xla_version(pid_t pid, const std::string& xlac_path);
// The PJRT device a torch_xla process runs on: PJRT_DEVICE as it was
// exec'd, else the plug-in it maps (MapsFacts::pjrt_plugin), else "CPU"
// (torch_xla's own CPU client, built into _XLAC).  Printable ASCII.
std::string xla_device(const std::string& pjrt_device_env, const std::string& pjrt_plugin);
std::string xla_device(pid_t pid, const MapsFacts& maps);

// One `ps` row, before the profiling check.
struct CensusEntry {
  ProcessProbe probe;
  std::vector<pid_t> nspid;  // from ours inward
  std::string hostname;      // in its UTS namespace
  std::string container_id;  // 64 hex, "" on the host
  RankEnv rank;
  std::vector<std::string> argv;  // /proc/PID/cmdline, raw bytes
  std::string python_version, torch_version, lightning_version;
  std::string xla;  // "2.9.0 CPU": torch_xla's version and PJRT device; "" no torch_xla
};

struct CensusSkips {
  std::map<Skip, std::size_t> counts;
  std::vector<std::pair<pid_t, std::string>> python_not_listed;  // CPython without torch or Lightning: pid, comm
};

// Every eligible process, ascending pid; with what was skipped and why.
std::vector<CensusEntry> take_census(CensusSkips* skips = nullptr);
// The facts of one eligible process.
CensusEntry describe_process(const ProcessProbe& probe);

// torch's version in the package of a mapped libtorch (torch/version.py
// next to torch/lib/, through /proc/PID/root); "" if unreadable.
std::string torch_version(pid_t pid, const std::string& torch_lib);
std::string torch_version(pid_t pid);  // finds the mapped libtorch itself

// New eligible processes, for --all: each call returns the eligible
// processes it did not return before (a pid reused by a new process counts
// as new).  Cheap to call every 500 ms: after the first look, a process
// costs a stat and a readlink per call, and its maps are read again only
// when its address space changed size (importing torch maps libraries),
// when it exec'd, or every 5 s.
class EligibleWatcher {
 public:
  std::vector<pid_t> poll();

 private:
  struct Seen {
    unsigned long long starttime = 0;
    std::string exe;
    unsigned long long vsize = 0;
    bool settled = false;       // returned, or a kernel thread: not looked at again
    std::uint64_t next_ns = 0;  // look again by then, whatever the size
    std::string lightning;      // the sign of Lightning found the first time (environ and argv stay)
  };
  std::map<pid_t, Seen> seen_;
};

}  // namespace lt::proc
