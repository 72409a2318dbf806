// `[pl][module]` rows' exact calls (--module-names; docs/design-modules.md):
// MODULE_CALL records counted per module object, named by the MODULE_NAME
// records as Lightning's PyTorchProfiler names them
// ("[pl][module]{type}: {name}").  Names are resolved at the end: a module
// may be named after its first calls (its tree read when a LightningModule
// was first seen on a stack).  Calls of modules never named with a
// non-empty name (the LightningModule itself, modules outside its tree)
// are counted apart, as Lightning has no row for them.  Times are not here
// yet (part 3 of the design).  Pure: the records in, the rows out.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bpf/events.h"

namespace lt {

struct ModuleRow {
  std::string name;  // "[pl][module]torch.nn.modules.linear.Linear: block.seq.0"
  std::uint64_t calls = 0;
};

struct ProcessModules {
  std::uint32_t pid = 0;
  std::vector<ModuleRow> rows;      // order of first call
  std::uint64_t unnamed_calls = 0;  // calls of modules with no Lightning name
};

class ModuleAggregator {
 public:
  void add(const lt_event_header& h, const std::byte* record);
  std::vector<ProcessModules> finish() const;  // processes in first-call order

 private:
  struct Module {
    std::uint64_t calls = 0;
    std::string type, name;
    bool named = false;
  };
  struct Process {
    std::vector<std::uint64_t> order;         // module addresses, first call first
    std::map<std::uint64_t, Module> modules;  // by address
  };
  std::vector<std::uint32_t> pids_;  // first-call order
  std::map<std::uint32_t, Process> procs_;
};

}  // namespace lt
