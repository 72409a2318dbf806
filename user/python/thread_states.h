// How BPF finds a thread's PyThreadState: pthread_getspecific(autoTSSkey),
// emulated from the thread's fsbase (glibc x86-64 layout).  The key is read
// from the target, and the layout is proven on the target's own threads
// before any sample relies on it.
#pragma once
#include <cstdint>

#include "user/python/discovery.h"

namespace lt::python {

struct TsdLookup {
  std::uint32_t key = 0;
  std::uint16_t block = 0x310;   // struct pthread.specific_1stblock (glibc 2.27+)
  std::uint16_t levels = 0x510;  // struct pthread.specific[] (keys >= 32)
  int threads_checked = 0, threads_matched = 0;
};

// Throws lt::Error(unsupported) when the key is not set up or no thread of
// the target can be found through it (not glibc, or another layout).
TsdLookup find_tsd_lookup(const Interpreter& interp);

}  // namespace lt::python
