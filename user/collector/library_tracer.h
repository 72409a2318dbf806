// The seam between Session and each source whose probes go on a library a
// target loads when it likes (libtorch's ops, libc10's allocator,
// libtorch_cpu's collectives, CUDA): Session keeps one slot per tracer,
// tries each at adoption and, until the library is there, again every
// interval (PendingAttach), and turns their errors into notes the same way
// for all. A tracer owns its loader (the BPF objects and links): Session
// names none of them. Adding such a source = its BPF source, its loader
// (user/sources), a LibraryTracer, and one line in the catalogue
// (library_tracers.cpp).
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace lt {

class LibraryTracer {
 public:
  virtual ~LibraryTracer() = default;
  // What a note says when this tracer fails for a target: "its ops are
  // missing from the report".
  virtual const char* lost() const = 0;
  // Probes `pid`'s library (pid_filter -1: every process mapping it). False
  // when it has not loaded it yet. Throws lt::Error.
  virtual bool attach(pid_t pid, pid_t pid_filter) = 0;
  // The last attach, for --verbose.
  virtual std::string describe(pid_t pid) const = 0;
  virtual std::size_t probes() const { return 0; }
  // Notes from the last attach ("pid N: " is added).
  virtual std::vector<std::string> take_notes() { return {}; }
  // The session ends: its probes come out (the ring is drained after).
  virtual void detach() {}
  // The LT_TARGET_* bits a target gets in the shared target table so that
  // this tracer's BPF programs take its events.
  virtual std::uint32_t target_flags() const { return 0; }
  // Whether a CPython held at its exec is kept seized until this tracer's
  // library loads (user/sources/libload.h), so that its probes are in
  // before the library's code runs.  Not for one that ptraces the target
  // itself (the GPU tracer injects its bridge).
  virtual bool holds_at_load() const { return true; }
};

}  // namespace lt
