// Finds the CPython interpreter inside a running process: which file holds
// it (executable or libpython3.X.so), its version, where it is loaded, and
// the layout BPF must use.  Refuses, with a clear error, anything it cannot
// read correctly rather than producing garbage.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "user/python/offsets.h"
#include "user/python/probe_sites.h"

namespace lt::python {

struct Interpreter {
  pid_t pid = 0;
  int major = 3, minor = 0;
  std::string binary;          // path as the target sees it
  std::string open_path;       // path we can open (through /proc/PID/root)
  bool in_executable = false;  // false: libpython3.X.so
  std::uint64_t load_bias = 0;
  std::vector<ProbeSite> sites;     // uprobe sites in `binary`
  std::uint64_t runtime_addr = 0;   // &_PyRuntime in the target
  std::uint64_t gen_type_addr = 0;  // &PyGen_Type in the target
  bool gen_via_eval() const {
    for (auto& s : sites)
      if (s.function == "_PyEval_EvalFrameDefault" && !s.modules_only) return true;
    return false;
  }
  Layout layout{};
  std::string version_string() const { return std::to_string(major) + "." + std::to_string(minor); }
};

// Throws lt::Error with no_such_process / not_python / unsupported.
Interpreter discover(pid_t pid);

}  // namespace lt::python
