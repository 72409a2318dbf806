// CPython's garbage collections (bpf/pygc.bpf.c): its USDT probes
// python:gc__start and python:gc__done, in interpreters built with them
// (--with-dtrace: Debian's, Ubuntu's, Fedora's); in pyenv's and
// python.org's builds, which have none, an entry probe on the collector's
// invoke_gc_callback.  Which processes report is decided per target (LT_TARGET_GC).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "user/sources/bpf_owner.h"
#include "user/sources/proctrack.h"
#include "user/sources/uprobe_multi.h"

struct lt_pygc;

namespace lt {

template <>
void SkeletonDestroy<lt_pygc>::operator()(lt_pygc* s) const;

class PyGcSource {
 public:
  // Throws lt::Error(bpf|permission).
  explicit PyGcSource(const ProcTrackSource& shared);
  ~PyGcSource();
  PyGcSource(const PyGcSource&) = delete;
  PyGcSource& operator=(const PyGcSource&) = delete;

  // Both probes in `path` (the ELF with the interpreter: its executable or
  // libpython, a path this process can open) for pid (-1: every process
  // mapping it).  False when the file has no such probes (no error: that
  // CPython's collections are not seen).  Throws lt::Error(bpf) otherwise.
  bool attach(const std::string& path, pid_t pid);
  // Where `path` has no such probes: an entry probe on its
  // invoke_gc_callback (bpf/pygc.bpf.c), found in its symbol table. False
  // when it has none (a stripped build, or a CPython before 3.8 or after
  // 3.13, whose collector is laid out otherwise).
  bool attach_callback(const std::string& path, pid_t pid);
  std::size_t probes() const { return links_.size() + entries_.probes(); }

 private:
  SkeletonPtr<lt_pygc> skel_;
  std::vector<LinkPtr> links_;  // released before the skeleton
  EntryUprobes entries_;        // likewise
};

// The offset in `path` of its invoke_gc_callback: the function itself or a
// GCC clone that keeps its arguments' places (`.isra.N`, `.constprop.N`;
// not a `.part.N`, which the callers enter only when gc.callbacks is set).
std::optional<std::uint64_t> gc_callback_offset(const std::string& path);

}  // namespace lt
