// CPython's garbage collections (bpf/pygc.bpf.c): its USDT probes
// python:gc__start and python:gc__done, in interpreters built with them
// (--with-dtrace: Debian's, Ubuntu's, Fedora's; not pyenv's or python.org's
// builds).  Which processes report is decided per target (LT_TARGET_GC).
#pragma once
#include <sys/types.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "user/sources/bpf_owner.h"
#include "user/sources/proctrack.h"

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
  std::size_t probes() const { return links_.size(); }

 private:
  SkeletonPtr<lt_pygc> skel_;
  std::vector<LinkPtr> links_;  // released before the skeleton
};

}  // namespace lt
