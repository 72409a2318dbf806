// Names the native instruction a thread was at (its user-space leaf): which
// mapped file, which function symbol in it (demangled).  Only the leaf: our
// targets (CPython, libtorch) are built without frame pointers, and we do
// not unwind native stacks.  NativeNamer answers one address; NativeSymbols
// puts the answers into the stream as NATIVE_SYM records, once per (pid,
// address), for stack samples.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "user/proc/procfs.h"

namespace lt::proc {

class SymbolIndex;

struct NativeName {
  std::string function;                      // demangled; "[dso]" when the file has no symbol there
  std::string dso;                           // base name of the mapped file
  std::string path;                          // the mapped file as the target names it
  std::uint64_t map_start = 0, map_end = 0;  // the mapping it lies in
  // The addresses with this same name: the function's extent, or the gap
  // between the symbols around it when it has none; 0, 0 when unknown.
  std::uint64_t start = 0, end = 0;
  // Its file's symbols are still being read (on a thread of their own): no
  // function yet; ask again later.
  bool loading = false;
};

class NativeNamer {
 public:
  // How long name() waits for a file's symbols before it answers `loading`.
  // They are read on a thread of their own: a small library's in well under
  // this; libtorch_cpu's ~450k take ~150 ms, which the drain that asks would
  // otherwise spend not reading the ring (while short-lived code objects
  // die unread, or a short job exits).
  // NativeSymbols (the drain) waits kIndexWait; `dump`, which names each
  // leaf once, kWaitAlways (never `loading`).
  static constexpr std::chrono::milliseconds kIndexWait{5};
  static constexpr std::chrono::milliseconds kWaitAlways{-1};
  using Loader = std::function<std::shared_ptr<const SymbolIndex>(const std::string& path)>;
  explicit NativeNamer(std::chrono::milliseconds index_wait = kWaitAlways, Loader load = {});
  ~NativeNamer();
  // `ip` of `pid`, or nullopt when it is in no mapped file (JIT code,
  // anonymous memory, a vanished process).
  std::optional<NativeName> name(pid_t pid, std::uint64_t ip);
  void forget(pid_t pid);

 private:
  const Mapping* mapping_of(pid_t pid, std::uint64_t ip);
  std::map<pid_t, std::vector<Mapping>> maps_;
  std::chrono::milliseconds index_wait_;
  Loader load_;
  // By file identity; each ready once its reader thread is done.
  std::map<std::pair<dev_t, ino_t>, std::shared_future<std::shared_ptr<const SymbolIndex>>> files_;
};

class NativeSymbols {
 public:
  using Emit = std::function<void(const void* record, std::size_t size)>;
  // A better name for a leaf than its symbol, where a data source knows one
  // (inductor's `kernel` is cpp_fused_relu_0); nullopt keeps the symbol.
  using Renamer = std::function<std::optional<std::string>(pid_t pid, const NativeName& n)>;
  explicit NativeSymbols(Emit emit, Renamer rename = {}, std::chrono::milliseconds index_wait = NativeNamer::kIndexWait,
                         NativeNamer::Loader load = {});
  ~NativeSymbols();
  // Describes `ip` of `pid` unless it lies in `skip_file` (the interpreter:
  // its frames are the Python ones) or was described already.  False when
  // its file's symbols are still being read: nothing written, and the next
  // sample there asks again (that sample's stack has no native leaf).
  bool describe(pid_t pid, std::uint64_t ip, const std::string& skip_file, std::uint64_t ts);
  void forget(pid_t pid);           // exec or exit: its addresses mean nothing now
  std::size_t remembered() const {  // addresses and functions kept (tests: bounded)
    std::size_t n = done_.size();
    for (const auto& [pid, r] : named_) n += r.size();
    return n;
  }

 private:
  Emit emit_;
  Renamer rename_;
  NativeNamer namer_;
  // Addresses named already. Bounded: cleared when full (a name written
  // again is harmless); the interpreter's own are never in it (below).
  static constexpr std::size_t kMaxDone = 1 << 18;
  std::set<std::pair<pid_t, std::uint64_t>> done_;
  // Per process, the interpreter's mappings: a leaf there is skipped by
  // range. Remembering each such address (every instruction of the eval
  // loop a sample lands on) grew a watcher by megabytes an hour.
  std::map<pid_t, std::vector<std::pair<std::uint64_t, std::uint64_t>>> skipped_;
  // Per process, the functions (and symbol-less mappings) named already,
  // start -> end: NATIVE_FUNC records.  Bounded by the functions a process
  // runs; past kMaxRanges per process, addresses are named one by one.
  static constexpr std::size_t kMaxRanges = 1 << 16;
  std::map<pid_t, std::map<std::uint64_t, std::uint64_t>> named_;
};

}  // namespace lt::proc
