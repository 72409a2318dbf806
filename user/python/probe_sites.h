// Where to put the entry uprobes in an interpreter binary.  Lightning's
// actions are resumed by contextlib through the builtin next() (start, and
// a normal stop) and generator.throw() (stop on an exception); a dataloader
// fetch is next() on Lightning's CombinedLoader.  So we probe builtin_next
// and gen_throw, which are static: found through data (PyGen_Type's method
// table, the builtins module's method table) or .symtab when present.
// When a PGO build inlined copies of them into callers, generator resumes
// are taken from an entry probe on _PyEval_EvalFrameDefault instead.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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

// The link-time addresses of builtin_next and gen_throw found through data
// alone (the builtins module's and PyGen_Type's PyMethodDef tables), read
// from the file with its relocations (elf_file.h), never from a process:
// one held at its exec has no relocated pointers yet.
std::optional<std::uint64_t> next_from_method_table(const elf::ElfFile& file);
std::optional<std::uint64_t> gen_throw_from_method_table(const elf::ElfFile& file, const Layout& layout);

// Throws lt::Error(unsupported) if the generator entry points cannot be
// found. Reads the file alone (its tables with their relocations): the
// same sites for every process of one file, at any moment of its life.
std::vector<ProbeSite> find_probe_sites(const elf::ElfFile& file, const std::string& path, const Layout& layout);

}  // namespace lt::python
