#include "user/sources/pygc.h"

#include <bpf/libbpf.h>

#include <cerrno>

#include "pygc.skel.h"
#include "user/sources/bpf_errors.h"

namespace lt {

template <>
void SkeletonDestroy<lt_pygc>::operator()(lt_pygc* s) const {
  lt_pygc__destroy(s);
}

PyGcSource::PyGcSource(const ProcTrackSource& shared) : skel_(lt_pygc__open()) {
  if (!skel_) throw bpf_error("open pygc", errno);
  if (int err = shared.share_with(skel_->obj)) throw bpf_error("share maps with pygc", -err);
  if (int err = lt_pygc__load(skel_.get())) throw bpf_error("load pygc", -err);
}

PyGcSource::~PyGcSource() {
  links_.clear();
}

bool PyGcSource::attach(const std::string& path, pid_t pid) {
  // libbpf finds the notes, the semaphore (the kernel raises it in each
  // process the probe is in) and the arguments' locations.
  LinkPtr start(bpf_program__attach_usdt(skel_->progs.lt_gc_start, pid, path.c_str(), "python", "gc__start", nullptr));
  if (!start) {
    const int err = errno;
    if (err == ENOENT || err == EINVAL) return false;  // no such note in this build
    throw bpf_error("attach USDT python:gc__start in " + path, err);
  }
  LinkPtr done(bpf_program__attach_usdt(skel_->progs.lt_gc_done, pid, path.c_str(), "python", "gc__done", nullptr));
  if (!done) {
    const int err = errno;
    throw bpf_error("attach USDT python:gc__done in " + path, err);
  }
  links_.push_back(std::move(start));
  links_.push_back(std::move(done));
  return true;
}

}  // namespace lt
