// torch.compile's compiled regions as the op records show them
// (docs/design-compile.md): per process, each compile id ("Torch-Compiled
// Region: F/C" rows, F the frame Dynamo compiled, C its C-th graph) with its
// calls and when it first ran while we watched, and the recompilations seen:
// a frame's new compile id running for the first time after one of its
// earlier ids ran while attached (Dynamo runs a graph right after compiling
// it, and keeps an id per guard set, so a new id after an older one ran means
// the older one's guards failed and the frame compiled again).  Pure: the
// records in, the report out.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bpf/events.h"

namespace lt {

struct CompiledRegion {
  unsigned frame = 0, compile = 0;
  std::uint64_t calls = 0;
  std::uint64_t first_ns = 0;  // its first entry we saw
  std::string function;        // the user's function Dynamo compiled: "MLP.forward (file.py:31)"; "" unknown
};

struct Recompile {
  unsigned frame = 0, compile = 0;   // the new graph
  std::uint64_t at_ns = 0;           // its first entry: just after its compile ended
  unsigned after = 0;                // the compile id of the frame that ran before (whose guards failed)
  std::string function;              // as in CompiledRegion
  std::vector<std::string> kernels;  // inductor kernels first called in it (its new code, if any)
};

struct CompilesProcess {
  std::vector<CompiledRegion> regions;  // by (frame, compile)
  std::vector<Recompile> recompiles;    // in time order
};

struct CompilesReport {
  std::uint64_t window_begin_ns = 0;  // the attach (0: unknown)
  std::map<std::uint32_t, CompilesProcess> procs;
  bool empty() const { return procs.empty(); }
};

class CompileAggregator {
 public:
  void add(const lt_event_header& h, const std::byte* record);
  CompilesReport finish();

 private:
  struct Proc {
    std::map<std::pair<unsigned, unsigned>, CompiledRegion> regions;
    std::map<unsigned, unsigned> last_compile;  // per frame: the newest id that ran
    std::vector<Recompile> recompiles;
    std::map<std::uint32_t, bool> kernel_seen;  // op -> called before
    std::vector<std::uint32_t> open_recompile;  // kernels' first calls go to the newest recompile
    std::map<std::uint32_t, std::pair<std::uint64_t, std::uint32_t>> code_of_op;  // REGION_CODE: op -> code
    std::map<std::pair<std::uint64_t, std::uint32_t>, std::string> functions;     // PY_CODE: code -> name
  };
  struct Name {
    bool region = false;
    unsigned frame = 0, compile = 0;
    bool kernel = false;
    std::string text;
  };
  std::vector<Name> names_;  // by op index
  std::map<std::uint32_t, Proc> procs_;
  std::uint64_t window_begin_ = 0;
};

// "Torch-Compiled Region: F/C" -> (F, C); false for any other name.
bool parse_region_name(const std::string& name, unsigned& frame, unsigned& compile);

}  // namespace lt
