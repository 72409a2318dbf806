// Every Python thread's stack, read now from user space with
// process_vm_readv (no ptrace stop, no BPF): the interpreter's thread list,
// each thread's frame chain, code objects to names and lines, and the GIL
// holder, all through the per-version layout (offsets.cpp).  The target
// keeps running while we read, so any read may be torn: a frame chain that
// faults or loops is read again (a few times), then marked torn; nothing
// read from the target is trusted for a length or a loop bound.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "user/python/discovery.h"

namespace lt::python {

struct PyFrameInfo {
  std::string function;           // co_qualname (3.11+) or co_name; UTF-8 as decoded (may hold lone surrogates)
  std::string file;               // co_filename
  int line = 0;                   // kNoLine (0): CPython has none for the instruction
  bool readable = true;           // false: the code object could not be read (function and file empty)
  std::uint64_t first_local = 0;  // localsplus[0] (a method's self), when asked for; 0: not read or unset
};

struct PyThreadStack {
  std::uint64_t tstate = 0;
  pid_t tid = 0;                    // as we see it (host pid namespace); 0: not known
  std::vector<PyFrameInfo> frames;  // innermost first
  bool truncated = false;           // deeper than we walk (kMaxFrames)
  bool torn = false;                // the chain faulted or looped on every try: frames are what was read
};

struct PyThreads {
  std::vector<PyThreadStack> threads;  // the interpreter's thread list order (newest first)
  bool gil_known = false;              // the version table says where the GIL holder is
  std::uint64_t gil_tstate = 0;        // the thread state holding the GIL now; 0: none
};

inline constexpr std::size_t kMaxFrames = 1024;

// first_locals: also read each frame's first local (--module-names finds the
// LightningModule as the `self` of a frame on some stack).
PyThreads read_thread_stacks(const Interpreter& interp, bool first_locals = false);

}  // namespace lt::python
