// COMPILE_NOTE records: what torch.compile's Dynamo kept about its compiles
// (the guard failure behind each recompile, failures, graph break reasons),
// read from the target's Python objects (python/dynamo_state.h) while it
// runs, so that `report FILE` needs no process.  Dynamo keeps only its
// newest 64 compiles, so the session reads every few seconds, and each
// compile goes into the trace once.  Graph break counts grow as the job
// runs: they go in once, at the detach.
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

  // Emits the compiles not yet in the trace; with `final`, the graph breaks too.
  void read(const python::Interpreter& interp, std::uint64_t ts, bool final);
  void forget(pid_t pid) { sent_.erase(pid), reader_.forget(pid); }

 private:
  Emit emit_;
  python::DynamoStateReader reader_;
  std::map<pid_t, std::set<std::pair<std::string, std::int64_t>>> sent_;  // (compile id, start)
};

}  // namespace lt
