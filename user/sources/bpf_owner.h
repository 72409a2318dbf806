// Owners for what a source holds from libbpf and the kernel: each BPF
// skeleton, each link, each file descriptor is released by its owner's
// destructor, so a source that fails half-way through its constructor, or
// is destroyed, releases exactly what it got, in reverse order of members.
#pragma once
#include <memory>
#include <utility>

struct bpf_link;

namespace lt {

// The skeletons' destroy functions are static inline in their generated
// headers: each skeleton's is an explicit specialization declared in its
// source's header and defined in the one .cpp that includes that skeleton
// (user/sources/<name>.{h,cpp}), so a new source adds nothing here.
template <typename Skeleton>
struct SkeletonDestroy {
  void operator()(Skeleton* s) const;
};
template <typename Skeleton>
using SkeletonPtr = std::unique_ptr<Skeleton, SkeletonDestroy<Skeleton>>;

struct LinkDestroy {
  void operator()(bpf_link* l) const;
};
using LinkPtr = std::unique_ptr<bpf_link, LinkDestroy>;

// A file descriptor (a raw BPF link, a perf event), closed once.
class OwnedFd {
 public:
  explicit OwnedFd(int fd = -1) : fd_(fd) {}
  ~OwnedFd();
  OwnedFd(OwnedFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  OwnedFd& operator=(OwnedFd&& o) noexcept;
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  int get() const { return fd_; }
  // Gives the descriptor up (to an owner that closes it: a libbpf link).
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

}  // namespace lt
