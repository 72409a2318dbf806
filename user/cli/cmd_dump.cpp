// `dump`: every thread of a process (and, with --children, of its Python
// descendants) right now, without stopping it (docs/design-dump.md).
#include <algorithm>
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
  std::vector<pid_t> pids = opts.pids;
  std::set<pid_t> asked(pids.begin(), pids.end());
  if (opts.children)
    for (pid_t p : opts.pids)
      for (pid_t c : proc::descendants(p))
        if (!asked.count(c)) pids.push_back(c);
  std::sort(pids.begin() + static_cast<long>(opts.pids.size()), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  proc::NativeNamer namer;
  std::vector<python::ProcessDump> dumps;
  for (pid_t pid : pids) {
    try {
      dumps.push_back(python::dump_process(pid, namer));
    } catch (const Error& e) {
      // A pid asked for by name must be dumped; a descendant that is not
      // Python (a shell, a compiler) or that exits meanwhile is skipped.
      if (asked.count(pid)) throw;
      if (opts.verbose || e.code() == ExitCode::no_such_process)
        std::cerr << "ltrace-bpf: dump: skipped child " << pid << ": " << e.what() << "\n";
    }
    namer.forget(pid);
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
