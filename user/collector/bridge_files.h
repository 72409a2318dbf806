// Where our in-process bridge (torchbridge/) is, here and in a target: the
// GPU tracer and the op observer both put it into running processes.
#pragma once
#include <sys/types.h>

#include <string>

namespace lt {

// The memfd name an injected bridge gets: its mapping reads
// "/memfd:libltrace-bridge.so (deleted)" in /proc/PID/maps.
inline constexpr const char* kBridgeMemfdName = "libltrace-bridge.so";

bool is_lib(const std::string& path, const char* stem);  // the base name starts with stem
bool is_bridge(const std::string& path);                 // a mapping's path is our bridge

// Where our bridge library is: $LTRACE_BRIDGE, next to the executable, or
// ../lib/ltrace-bpf/ from it (make install).  "" if none exists.
std::string find_bridge_library();

// The bridge pid has mapped, as a path we can open (its memfd through
// /proc/PID/map_files), or "".
std::string mapped_bridge(pid_t pid);

}  // namespace lt
