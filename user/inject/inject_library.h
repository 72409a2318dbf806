// Late injection: make a running process dlopen() a shared library (the
// "wprof approach"), for targets started without CUDA_INJECTION64_PATH.
//
// dlopen and dlerror are found in the target's own libc (glibc >= 2.34),
// libdl.so.2 (older glibc; __libc_dlopen_mode as a last resort) or musl's
// loader, from /proc/PID/maps and the file's .dynsym. One thread is stopped
// at a safe point and runs dlopen(path, RTLD_NOW | RTLD_LOCAL) (see
// remote_call.h); on NULL it runs dlerror() and we read the message back.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace lt::inject {

struct InjectOptions {
  std::chrono::milliseconds timeout{5000};  // half for finding a safe thread, all of it for the call
};

struct InjectResult {
  std::uint64_t handle = 0;  // dlopen's handle in the target
  pid_t tid = 0;             // the thread that ran dlopen
  std::string detail;        // one line: where the thread was, which dlopen, how long
};

// Throws lt::Error with a one-line message: no_such_process (pid gone),
// permission (ptrace not allowed), io (library unreadable; dlopen returned
// NULL: the message carries dlerror's text), unsupported (not x86-64, no
// dlopen found, seccomp, another tracer, stopped, no safe thread), internal
// (the call faulted, timed out, or its thread exited). The target is left as
// it was whether we return or throw (a timed-out call: see remote_call.h).
// Loading a library that is already loaded only bumps its reference count.
InjectResult inject_library(pid_t pid, const std::string& path, const InjectOptions& = {});

}  // namespace lt::inject
