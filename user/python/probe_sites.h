// Where to put the entry uprobes in an interpreter binary: CPython's C
// entry points for resuming a generator (gen_iternext, gen_throw) and for
// next() on a Python-defined iterator (slot_tp_iternext).  They are static
// functions, so we find them through data the binary exports: the slots of
// PyGen_Type, its method table, and the slotdefs table (or .symtab when the
// binary has one).  Data, not instruction patterns.
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
  std::string function;  // "gen_iternext", "gen_throw", "slot_tp_iternext"
  std::uint64_t file_offset = 0;
  bool cheap_entry = true;  // first instruction is emulated (push), not single-stepped
};

// Throws lt::Error(unsupported) if the generator entry points cannot be found.
std::vector<ProbeSite> find_probe_sites(pid_t pid, const elf::ElfFile& file, const std::string& path,
                                        const std::vector<proc::Mapping>& maps, std::uint64_t bias,
                                        const Layout& layout);

}  // namespace lt::python
