// Names the native instruction a sampled thread was at (its user-space
// leaf): which mapped file, which function symbol in it (demangled).  Only
// the leaf: our targets (CPython, libtorch) are built without frame
// pointers, and we do not unwind native stacks in BPF.  Results go into the
// stream as NATIVE_SYM records, once per (pid, address).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "user/proc/procfs.h"

namespace lt::proc {

class SymbolIndex;

class NativeSymbols {
 public:
  using Emit = std::function<void(const void* record, std::size_t size)>;
  explicit NativeSymbols(Emit emit);
  ~NativeSymbols();
  // Describes `ip` of `pid` unless it lies in `skip_file` (the interpreter:
  // its frames are the Python ones) or was described already.
  void describe(pid_t pid, std::uint64_t ip, const std::string& skip_file, std::uint64_t ts);
  void forget(pid_t pid);  // exec or exit: its addresses mean nothing now

 private:
  const Mapping* mapping_of(pid_t pid, std::uint64_t ip);
  Emit emit_;
  std::map<pid_t, std::vector<Mapping>> maps_;
  std::map<std::pair<dev_t, ino_t>, std::unique_ptr<SymbolIndex>> files_;  // by file identity
  std::set<std::pair<pid_t, std::uint64_t>> done_;
};

}  // namespace lt::proc
