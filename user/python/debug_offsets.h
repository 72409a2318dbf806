// CPython 3.13+ publishes its own layout (_Py_DebugOffsets) at the start of
// _PyRuntime.  We read it from the live process and refuse to attach if it
// disagrees with our table: a custom build must never be read with the
// wrong offsets.
#pragma once
#include <sys/types.h>

#include <cstdint>

#include "user/python/offsets.h"

namespace lt::python {

// Throws lt::Error(unsupported) on any mismatch.
void verify_debug_offsets(pid_t pid, std::uint64_t runtime_addr, int minor, const Layout& layout);

}  // namespace lt::python
