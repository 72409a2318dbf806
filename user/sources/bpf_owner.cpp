#include "user/sources/bpf_owner.h"

#include <bpf/libbpf.h>
#include <unistd.h>

namespace lt {

void LinkDestroy::operator()(bpf_link* l) const {
  bpf_link__destroy(l);
}

OwnedFd::~OwnedFd() {
  if (fd_ >= 0) close(fd_);
}

OwnedFd& OwnedFd::operator=(OwnedFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

}  // namespace lt
