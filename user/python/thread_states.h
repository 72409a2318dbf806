// How BPF finds a thread's PyThreadState: pthread_getspecific(autoTSSkey),
// emulated from the thread's fsbase (glibc x86-64 layout).  The key is read
// from the target, and the layout is proven on the target's own threads
// before any sample relies on it.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "user/core/errors.h"
#include "user/python/discovery.h"

namespace lt::python {

struct TsdLookup {
  // No usable pthread key (3.15 keeps the thread state in a C11
  // thread-local; or a libc whose TSD layout we do not know): user space
  // keeps tid -> thread state in a BPF map from the interpreter's thread
  // list instead (thread_states_by_tid), refreshed while attached.
  bool by_map = false;
  std::uint32_t key = 0;
  std::uint16_t block = 0x310;   // struct pthread.specific_1stblock (glibc 2.27+)
  std::uint16_t levels = 0x510;  // struct pthread.specific[] (keys >= 32)
  int threads_checked = 0, threads_matched = 0;
};

// The interpreter has no key, or no thread state, yet: a process at or
// just after its exec (its start-up may be held up for seconds: a busy
// machine, an LD_PRELOAD constructor), or one finalising. Worth looking
// again, however long it takes.
struct NotInitialisedYet : Error {
  using Error::Error;
};

// Throws lt::Error(unsupported) when the key is not set up or no thread of
// the target can be found through it (not glibc, or another layout);
// NotInitialisedYet (an Error(unsupported) too) when it may be later.
TsdLookup find_tsd_lookup(const Interpreter& interp);

// (native thread id, PyThreadState*) of every thread of the main
// interpreter now (3.11+: native_thread_id).  Empty if unreadable.
std::vector<std::pair<std::uint32_t, std::uint64_t>> thread_states_by_tid(const Interpreter& interp);

}  // namespace lt::python
