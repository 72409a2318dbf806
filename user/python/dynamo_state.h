// What torch.compile's Dynamo keeps about its compiles, read out of the
// target with process_vm_readv (no code runs in the target): the guard
// failure that caused each recompile, compile failures and the graph breaks
// Dynamo met, which exist nowhere but in the target's Python objects.
//
//   sys.modules["torch._dynamo.utils"]._compilation_metrics
//     a collections.deque of CompilationMetrics (a dataclass; the newest
//     64 compiles by default): compile_id "F/C", co_name, co_filename,
//     co_firstlineno, start_time_us / duration_us (wall clock),
//     recompile_reason ("0/0: tensor 'x' size mismatch at index 0. expected
//     64, actual 48": the first guard that failed), fail_type/fail_reason,
//     num_graph_breaks.
//   sys.modules["torch._dynamo.utils"].counters["graph_break"]
//     a Counter: graph break reason -> times met (since the process began),
//     including breaks met only while compiling (an inlined call that could
//     not be traced), which never run as a frame of their own.
//
// Torch versions without a field leave it empty.  Every byte is untrusted:
// sizes are capped, and a failed read ends that item, never the process.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "user/python/discovery.h"

namespace lt::python {

struct DynamoCompile {
  std::string compile_id;  // "0/1" (str(CompileId)); "" unknown
  std::string function;    // co_name
  std::string file;        // co_filename
  std::int64_t first_line = 0;
  std::int64_t start_wall_us = 0;  // 0 unknown
  std::int64_t duration_us = -1;   // -1 unknown
  std::int64_t graph_breaks = -1;  // num_graph_breaks; -1 unknown
  std::string recompile_reason;    // "" for a first compile
  std::string failure;             // "fail_type: fail_reason"; "" if it compiled
};

struct DynamoGraphBreak {
  std::string reason;
  std::int64_t count = 0;
};

struct DynamoState {
  std::vector<DynamoCompile> compiles;  // oldest first, as the deque holds them
  std::vector<DynamoGraphBreak> graph_breaks;
};

// Caches where torch._dynamo.utils lives in each process (a module's dict
// does not move while it is loaded), so that only the first read walks
// sys.modules.
class DynamoStateReader {
 public:
  // nullopt: Dynamo is not loaded, or this CPython has no sys.modules offset.
  // The newest compile a read saw, to read only those after it next time.
  // Its address names it while it is in the deque (alive); once it left,
  // the address may hold a new object, so id and start must agree too.
  struct Newest {
    std::uint64_t addr = 0;
    std::string id;
    std::int64_t start_wall_us = 0;
  };
  // With `newest`, compiles are read only after it (all of them when it is
  // not found, or is another object now); *newest is updated.
  std::optional<DynamoState> read(const Interpreter& interp, Newest* newest = nullptr);
  void forget(pid_t pid);

 private:
  std::uint64_t utils_dict(const Interpreter& interp);
  struct Known {
    pid_t pid;
    std::uint64_t dict;
  };
  std::vector<Known> known_;
};

// A PyLong's value when it fits in 62 bits (two 30-bit digits), else nullopt.
std::optional<std::int64_t> read_small_int(pid_t pid, std::uint64_t obj, const Layout& l);

}  // namespace lt::python
