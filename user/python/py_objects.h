// Reading CPython objects out of another process: str objects (as UTF-8)
// and bytes objects (raw).  Shared by the symbolizer (code objects named for
// samples) and `dump` (every thread's stack, read from user space).  Every
// byte is untrusted: lengths are capped, a failed read gives an empty value.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "user/python/offsets.h"

namespace lt::python {

// A compact str object as UTF-8 (every str the compiler makes), at most
// 4096 code points; empty if unreadable or not a compact str.
std::string read_str(pid_t pid, std::uint64_t addr, const Layout& l);
// The contents of a bytes object (co_lnotab / co_linetable), at most 1 MiB.
std::vector<std::uint8_t> read_bytes_object(pid_t pid, std::uint64_t addr);

}  // namespace lt::python
