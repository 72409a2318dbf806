#include "user/python/discovery.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "user/core/errors.h"
#include "user/proc/census.h"
#include "user/proc/procfs.h"
#include "user/python/debug_offsets.h"
#include "user/python/elf_file.h"

namespace lt::python {

namespace {

std::string basename_of(const std::string& p) {
  auto s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

// Minor version from a file name: python3.11, libpython3.12.so.1.0, ...
// Returns -1 if the name says nothing, and sets free_threaded for "3.13t".
int minor_from_name(const std::string& name, bool& free_threaded) {
  static const std::regex re(R"((?:lib)?python3\.(\d+)(t?)[dm]*(?:$|[.\-_]))");
  std::smatch m;
  if (!std::regex_search(name, m, re)) return -1;
  free_threaded = m[2].length() > 0;
  return std::stoi(m[1]);
}

bool is_candidate(const std::string& path) {
  auto b = basename_of(path);
  return b.rfind("libpython", 0) == 0 || b.rfind("python", 0) == 0;
}

// A version newer than our tables: say which, and what we would need.
std::string unsupported_version_message(pid_t pid, std::uint64_t runtime_addr, int minor) {
  const std::string v = "CPython 3." + std::to_string(minor);
  const std::string range = "supported: 3." + std::to_string(kMinMinor) + " to 3." + std::to_string(kMaxMinor);
  if (minor < kMinMinor) return v + " is not supported (" + range + ")";
  char cookie[8] = {};
  const bool publishes =
      proc::read_memory(pid, runtime_addr, cookie, sizeof cookie) && std::string(cookie, sizeof cookie) == "xdebugpy";
  return v + " is not supported yet: this ltrace-bpf knows " +
         (publishes ? std::string("neither the format of its _Py_DebugOffsets nor ")
                    : std::string("none of its layout, including ")) +
         "the fields it does not publish (co_flags, _co_firsttraceable, the generator frame, the thread-state "
         "lookup) (" +
         range + ")";
}

}  // namespace

Interpreter discover(pid_t pid) {
  if (!proc::exists(pid)) throw Error(ExitCode::no_such_process, "no such process: " + std::to_string(pid));
  auto maps = proc::read_maps(pid);
  // Caught inside an execve (a launcher that just started it, a poll that
  // found it): the new program is not mapped yet. Wait for it, briefly.
  for (int i = 0; i < 50 && !maps.empty() && !proc::exe_is_mapped(pid, maps); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    maps = proc::read_maps(pid);
  }
  if (maps.empty()) {
    // A kernel thread has no memory map at all, whoever asks.
    std::ifstream stat_file("/proc/" + std::to_string(pid) + "/stat");
    std::stringstream stat;
    stat << stat_file.rdbuf();
    if (auto st = proc::parse_stat(stat.str()); st && st->kernel_thread())
      throw Error(ExitCode::not_python,
                  "process " + std::to_string(pid) + " (" + st->comm + ") is a kernel thread, not a CPython process");
    // Readable but empty: the process let go of its memory (exiting).
    if (std::ifstream("/proc/" + std::to_string(pid) + "/maps").is_open())
      throw Error(ExitCode::no_such_process,
                  "process " + std::to_string(pid) + " has no memory map (it is exiting or has exited)");
    throw Error(ExitCode::permission,
                "cannot read /proc/" + std::to_string(pid) + "/maps" +
                    (geteuid() == 0 ? ": the kernel refused root (a process that is not dumpable, in a user namespace "
                                      "we are not in, or kept from ptrace by a security module)"
                                    : " (need CAP_SYS_PTRACE or root)"));
  }

  // Candidate files, the executable first: where it defines the
  // interpreter, that copy runs (the executable comes first in the dynamic
  // linker's global scope), even when an extension maps a libpython too
  // (torch_xla's _XLAC needs libpython3.11.so: a second, idle copy).  An
  // executable linked against libpython defines none of it: skipped below.
  std::vector<const proc::Mapping*> candidates;
  for (auto& m : maps) {
    if (m.path.empty() || m.path[0] != '/' || !is_candidate(m.path)) continue;
    bool seen = false;
    for (auto* c : candidates) seen |= c->path == m.path;
    if (!seen) candidates.push_back(&m);
  }
  std::stable_partition(candidates.begin(), candidates.end(),
                        [](const proc::Mapping* m) { return basename_of(m->path).rfind("lib", 0) != 0; });

  std::string unreadable;  // a candidate we could not open as the target maps it
  for (const auto* cand : candidates) {
    const std::string& path = cand->path;
    Interpreter it;
    it.pid = pid;
    it.binary = path;
    // The file the target runs (containers, chroots, overlayfs), not one
    // that happens to have the same name here.
    it.open_path = proc::mapped_file(pid, *cand);
    if (it.open_path.empty()) {
      unreadable = path;
      continue;
    }
    std::optional<elf::ElfFile> file;
    try {
      file.emplace(it.open_path);
    } catch (const Error&) {
      unreadable = path;
      continue;
    }
    auto eval = file->symbol("_PyEval_EvalFrameDefault");
    auto runtime = file->symbol("_PyRuntime");
    if (!eval || !runtime) {
      if (!file->symbol("Py_Initialize")) continue;
      // A CPython, but older than anything we can read (no _PyRuntime: < 3.7).
      static const std::regex any(R"(python(\d)\.(\d+))");
      std::smatch m;
      std::string b = basename_of(path);
      std::string v = std::regex_search(b, m, any) ? m[1].str() + "." + m[2].str() : "of this age";
      throw Error(ExitCode::unsupported, "CPython " + v + " is not supported (supported: 3." +
                                             std::to_string(kMinMinor) + " to 3." + std::to_string(kMaxMinor) + ")");
    }
    it.in_executable = basename_of(path).rfind("lib", 0) != 0;

    // Load bias from any mapping of this file.
    if (!file->is_exec()) {
      bool found = false;
      for (auto& m : maps) {
        if (m.path != path) continue;
        for (auto& s : file->segments()) {
          if (m.offset >= (s.offset & ~0xfffULL) && m.offset < s.offset + s.filesz) {
            it.load_bias = m.start - m.offset - (s.vaddr - s.offset);
            found = true;
            break;
          }
        }
        if (found) break;
      }
      if (!found) throw Error(ExitCode::not_python, "cannot find the load address of " + path);
    }
    it.runtime_addr = runtime->value + it.load_bias;

    // Version: Py_Version (3.11+) is authoritative; else the file name.
    bool free_threaded = false;
    int minor = minor_from_name(basename_of(path), free_threaded);
    if (auto pv = file->symbol("Py_Version")) {
      if (auto v = proc::read_value<std::uint32_t>(pid, pv->value + it.load_bias)) {
        if ((*v >> 24) != 3) throw Error(ExitCode::unsupported, "unsupported Python major version in " + path);
        minor = static_cast<int>((*v >> 16) & 0xff);
      }
    }
    if (minor < 0) throw Error(ExitCode::unsupported, "cannot tell the CPython version of " + path);
    it.minor = minor;
    if (free_threaded)
      throw Error(ExitCode::unsupported, "free-threaded CPython 3." + std::to_string(minor) + "t is not supported yet");
    auto layout = layout_for(minor);
    if (!layout) throw Error(ExitCode::unsupported, unsupported_version_message(pid, it.runtime_addr, minor));
    it.layout = *layout;
    // 3.13+: the layout the interpreter publishes, cross-checked with ours.
    if (minor >= 13) {
      DebugOffsets d = read_debug_offsets(pid, it.runtime_addr, minor);
      if (d.free_threaded)
        throw Error(ExitCode::unsupported,
                    "free-threaded CPython 3." + std::to_string(minor) + "t is not supported yet");
      apply_debug_offsets(d, it.layout);
    }
    it.sites = find_probe_sites(*file, path, it.layout);
    it.gen_type_addr = file->symbol("PyGen_Type")->value + it.load_bias;
    return it;
  }
  if (!unreadable.empty())
    throw Error(ExitCode::not_python, "process " + std::to_string(pid) + " (" + proc::read_comm(pid) +
                                          "): cannot open " + unreadable + " as the process maps it (its root or " +
                                          "mount namespace is gone?)");
  throw Error(ExitCode::not_python, "process " + std::to_string(pid) + " (" + proc::read_comm(pid) +
                                        ") is not a CPython process (no _PyEval_EvalFrameDefault mapped)");
}

}  // namespace lt::python
