// Puts the comm probes on each target: the c10d backend methods of its
// libtorch_cpu (ProcessGroupGloo) and libtorch_cuda (ProcessGroupNCCL), and
// the NCCL API of its libnccl (user/torch/comm_sites.h, nccl_sites.h),
// found once per file and attached per target (or for every process mapping
// the file, with --children).
#pragma once
#include <sys/types.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bpf/events.h"
#include "user/collector/tracer.h"
#include "user/proc/procfs.h"
#include "user/torch/comm_sites.h"

namespace lt {

class CommProbeSource;
class ProcTrackSource;

class CommTracer final : public Tracer {
 public:
  // Loads its BPF objects (the op stacks of `op_stacks_fd` when ops are
  // traced too, else -1).
  explicit CommTracer(const TracerContext& ctx);
  ~CommTracer() override;
  std::string_view name() const override { return "comm"; }
  bool library() const override { return true; }
  // Probes pid's libraries (pid_filter -1: every process mapping them).
  // Returns false when the process has no libtorch_cpu mapped (yet), or,
  // for up to kLibraryWaitNs, while the loader is still mapping the rest of
  // a CUDA build (libtorch_cuda next to libtorch_cpu but not mapped yet, or
  // libtorch_cuda without libnccl).  Throws lt::Error (io: unreadable;
  // unsupported: no c10d backend and no NCCL; bpf) for libtorch_cpu; an
  // error on libtorch_cuda or libnccl only leaves a note (take_notes()).
  bool attach(pid_t pid, pid_t pid_filter) override;
  const char* lost() const override { return "its collectives are missing from the report"; }
  // What could not be probed since the last call, one line each.
  std::vector<std::string> take_notes() override { return std::exchange(notes_, {}); }
  static constexpr std::uint64_t kLibraryWaitNs =
      1'000'000'000;  // the loader maps a library's dependencies in milliseconds
  std::size_t probes() const override { return probes_; }
  std::string describe(pid_t) const override { return last_; }
  void detach() override;
  void fill_target(pid_t, lt_target& t) const override { t.flags |= LT_TARGET_COMM; }

 private:
  enum class Library { torch, nccl };
  // Sites of one mapped file (found once per file), attached for pid_filter;
  // returns how many sites the file has (0: none, nothing attached).
  std::size_t attach_file(const proc::MappedLibrary& lib, Library kind, pid_t pid_filter);

  std::unique_ptr<CommProbeSource> source_;
  std::map<std::pair<unsigned long, unsigned long>, std::vector<CommSite>> sites_;  // per (dev, inode)
  std::set<std::tuple<unsigned long, unsigned long, pid_t>> attached_;
  std::size_t probes_ = 0;
  std::string last_;
  std::vector<std::string> notes_;
  std::map<pid_t, std::uint64_t> waiting_since_;  // pid -> when it was first seen half-loaded
};

}  // namespace lt
