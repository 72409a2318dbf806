// GPU data for each target: finds how it can be had and sets it up.
//
//  1. The bridge (torchbridge/) is already in the process (launched with
//     CUDA_INJECTION64_PATH, e.g. by `ltrace-bpf run`): attach its USDT
//     probes; the bridge wakes, subscribes to CUPTI and streams records.
//  2. The process uses CUDA but has no bridge: inject ours with ptrace
//     (dlopen in the target), unless --no-inject.  NVTX cannot be had this
//     way (each library's NVTX initialises once, at its first call).
//  3. CUPTI is not ours (another client holds it: error 39; no libcupti;
//     injection refused): entry uprobes on libcudart / libcuda launches,
//     copies and syncs — counts, ops, stacks and actions, no GPU times.
// A process that has not initialised CUDA yet is polled until it does.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bpf/events.h"
#include "user/collector/library_tracer.h"

namespace lt {

class GpuSource;

struct GpuTracerOptions {
  bool inject = true;       // ptrace-inject the bridge into CUDA processes without one
  std::string bridge_path;  // our libltrace-bridge.so ("" = not found)
  bool verbose = false;
};

class GpuTracer final : public LibraryTracer {
 public:
  using Note = std::function<void(const std::string&)>;
  // `source` is created on first use: sessions without CUDA never load it.
  GpuTracer(std::function<GpuSource&()> source, GpuTracerOptions opts, Note note);
  // Sets up GPU data for pid.  Returns false while the process has no CUDA
  // library mapped (call again later).  Never throws for a target's sake:
  // what fails becomes a note. The probes are the process's own (the
  // bridge's, or uprobes scoped to it): pid_filter does not apply.
  bool attach(pid_t pid, pid_t pid_filter) override;
  const char* lost() const override { return "its GPU data is missing from the report"; }
  bool holds_at_load() const override { return false; }  // it may inject, by ptrace
  // The probes of a bridge that processes will load (run: the launched
  // command's), in place before any of them does: nothing is missed.
  void expect_bridge(const std::string& path);
  // A bridge reported its state: on CUPTI unavailable, fall back to uprobes.
  void on_status(pid_t pid, const lt_gpu_status& s);
  // Whether we injected the bridge into pid (it reports its state soon).
  bool injected(pid_t pid) const { return injected_.count(pid) != 0; }
  // For the session's stderr summary.
  std::string describe(pid_t pid) const override;

 private:
  void fall_back_to_uprobes(pid_t pid, const std::string& why);
  std::function<GpuSource&()> source_;
  GpuTracerOptions opts_;
  Note note_;
  std::map<pid_t, std::string> how_;  // pid -> "bridge (launch)", "bridge (injected)", "uprobes", ...
  std::set<pid_t> uprobed_;
  std::set<pid_t> injected_;
};

// Where our bridge library is: $LTRACE_BRIDGE, next to the executable, or
// ../lib/ltrace-bpf/ from it (make install).  "" if none exists.
std::string find_bridge_library();

}  // namespace lt
