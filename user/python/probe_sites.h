// Where to put the entry uprobes in an interpreter binary.  Lightning's
// actions are resumed by contextlib through the builtin next() (start, and
// a normal stop) and generator.throw() (stop on an exception); a dataloader
// fetch is next() on Lightning's CombinedLoader.  So we probe builtin_next
// and gen_throw, which are static: found through data (PyGen_Type's method
// table, the builtins module's method table) or .symtab when present.
// When a PGO build inlined copies of them into callers, generator resumes
// are taken from an entry probe on _PyEval_EvalFrameDefault instead.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "user/proc/procfs.h"
#include "user/python/elf_file.h"
#include "user/python/offsets.h"

namespace lt::python {

struct ProbeSite {
  std::string function;  // "builtin_next", "gen_throw", "_PyEval_EvalFrameDefault", "Py_FinalizeEx"
  std::uint64_t file_offset = 0;
  bool cheap_entry = true;  // first instruction is emulated (push), not single-stepped
  // Attached only for nn.Module calls (--module-names): the eval loop's
  // entry on a build whose generator entry points are probed directly.
  bool modules_only = false;
};

// Throws lt::Error(unsupported) if the generator entry points cannot be found.
std::vector<ProbeSite> find_probe_sites(pid_t pid, const elf::ElfFile& file, const std::string& path,
                                        const std::vector<proc::Mapping>& maps, std::uint64_t bias,
                                        const Layout& layout);

}  // namespace lt::python
