// Late injection: make a running process dlopen() a shared library (the
// "wprof approach"), for targets started without CUDA_INJECTION64_PATH.
//
// dlopen and dlerror are found in the target's own libc (glibc >= 2.34),
// libdl.so.2 (older glibc; __libc_dlopen_mode as a last resort) or musl's
// loader, from /proc/PID/maps and the file's .dynsym. One thread is stopped
// at a safe point and runs dlopen(path, RTLD_NOW | RTLD_LOCAL) (see
// remote_call.h); on NULL it runs dlerror() and we read the message back.
// The thread's errno is put back as it was.
//
// A target in a container does not see our files. Handoff::memfd hands it
// the library whatever its mount namespace, leaving nothing in its file
// system: the thread runs syscall(SYS_memfd_create, name, MFD_CLOEXEC |
// MFD_ALLOW_SEALING) (libc's syscall(), in every glibc and musl); we write
// the file's bytes into it through /proc/PID/fd/N and seal it; the thread
// runs dlopen("/proc/self/fd/./N") and close(N). The mapping then shows as
// "/memfd:NAME (deleted)" in /proc/PID/maps; /proc/PID/map_files/ opens it.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace lt::inject {

enum class Handoff {
  path,           // dlopen(path): `path` as the target sees it (its root, its cwd)
  memfd,          // `path` is ours; its bytes go to the target in a memfd
  memfd_or_path,  // memfd; failing that, `path` if the target sees the very
                  // same file there (same device and inode through
                  // /proc/PID/root); else an error that says why neither
};

struct InjectOptions {
  std::chrono::milliseconds timeout{5000};  // half for finding a safe thread, all of it for the call
  Handoff handoff = Handoff::path;
  std::string memfd_name;  // "" = the file's base name
  // Runs while the target's thread is stopped, right before dlopen, with a
  // path this process can open naming the very file the target is about to
  // load (/proc/PID/fd/N for a memfd): e.g. to attach uprobes that must be in
  // place when the library maps. An exception from it abandons the
  // injection (memfd closed, thread restored) and propagates.
  std::function<void(const std::string& file)> before_dlopen;
};

struct InjectResult {
  std::uint64_t handle = 0;  // dlopen's handle in the target
  pid_t tid = 0;             // the thread that ran dlopen
  bool memfd = false;        // loaded from a memfd (else from the path)
  std::string detail;        // one line: where the thread was, which dlopen, how, how long
};

// Throws lt::Error with a one-line message: no_such_process (pid gone),
// permission (ptrace not allowed), io (library unreadable; dlopen returned
// NULL: the message carries dlerror's text), unsupported (not x86-64, no
// dlopen found, seccomp, another tracer, stopped, no safe thread), internal
// (the call faulted, timed out, or its thread exited). The target is left as
// it was whether we return or throw (a timed-out call: see remote_call.h).
// Loading a library that is already loaded only bumps its reference count
// (by path; a memfd copy is a new file each time: check the maps first).
InjectResult inject_library(pid_t pid, const std::string& path, const InjectOptions& = {});

}  // namespace lt::inject
