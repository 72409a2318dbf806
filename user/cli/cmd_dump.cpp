// `dump`: every thread of a process (and, with --children, of its Python
// descendants) right now, without stopping it (docs/design-dump.md).
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <set>

#include "user/cli/builtin.h"
#include "user/cli/dump_output.h"
#include "user/core/errors.h"
#include "user/proc/procfs.h"
#include "user/python/process_dump.h"

namespace lt {

void check_dump(Options& opts) {
  if (opts.pids.empty()) throw Error(ExitCode::usage, "dump needs --pid PID");
}

int cmd_dump(Options& opts) {
  std::set<pid_t> asked(opts.pids.begin(), opts.pids.end()), seen = asked;
  proc::NativeNamer namer;
  std::vector<python::ProcessDump> dumps;
  // A pid asked for by name must be dumped (its error is the command's).
  for (pid_t pid : opts.pids) {
    if (!std::count_if(dumps.begin(), dumps.end(), [&](const auto& d) { return d.pid == pid; }))
      dumps.push_back(python::dump_process(pid, namer));
    namer.forget(pid);
  }
  if (opts.children)
    for (pid_t p : opts.pids) {
      auto kids = python::dump_descendants(p, seen, namer, SIZE_MAX, [&](pid_t c, const Error& e) {
        if (opts.verbose || e.code() == ExitCode::no_such_process)
          std::cerr << "ltrace-bpf: dump: skipped child " << c << ": " << e.what() << "\n";
      });
      for (auto& d : kids.dumps) {
        seen.insert(d.pid);
        dumps.push_back(std::move(d));
      }
    }
  if (opts.json) {
    std::cout << dump_json(dumps);
  } else {
    for (std::size_t i = 0; i < dumps.size(); ++i) std::cout << (i ? "\n" : "") << dump_text(dumps[i]);
  }
  std::cout.flush();
  return 0;
}

}  // namespace lt
