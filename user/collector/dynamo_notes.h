// COMPILE_NOTE records: what torch.compile's Dynamo kept about its compiles
// (the guard failure behind each recompile, failures, graph break reasons),
// read from the target's Python objects (python/dynamo_state.h) while it
// runs, so that `report FILE` needs no process.  The session reads when a
// compiled region runs for the first time (a compile just ended: Dynamo
// records it before the graph's first run), every few seconds (it keeps
// only its newest 64) and at the detach.  Each compile goes into the trace
// once; a graph break again when its count grew (the report keeps the
// largest).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "user/python/discovery.h"
#include "user/python/dynamo_state.h"

namespace lt {

class DynamoNotes {
 public:
  using Emit = std::function<void(const void*, std::size_t)>;
  explicit DynamoNotes(Emit emit) : emit_(std::move(emit)) {}

  // Emits the compiles and graph break counts not yet in the trace.
  void read(const python::Interpreter& interp, std::uint64_t ts);
  void forget(pid_t pid) { sent_.erase(pid), breaks_.erase(pid), newest_.erase(pid), reader_.forget(pid); }

  // What the reads cost (for -v): how many, the first (it walks sys.modules)
  // and the slowest of the others, in ms.
  struct Cost {
    unsigned reads = 0;
    double first_ms = 0, max_later_ms = 0;
  };
  const Cost& cost() const { return cost_; }

 private:
  Emit emit_;
  python::DynamoStateReader reader_;
  std::map<pid_t, std::set<std::pair<std::string, std::int64_t>>> sent_;  // (compile id, start)
  std::map<pid_t, std::map<std::string, std::int64_t>> breaks_;           // reason -> count sent
  std::map<pid_t, python::DynamoStateReader::Newest> newest_;             // the newest compile read, per process
  Cost cost_;
};

}  // namespace lt
