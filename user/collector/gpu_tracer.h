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
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bpf/events.h"
#include "user/collector/bridge_files.h"
#include "user/collector/tracer.h"

namespace lt {

class GpuSource;

class GpuTracer final : public Tracer {
 public:
  // Its BPF objects load at first use: sessions without CUDA never load them.
  explicit GpuTracer(const TracerContext& ctx);
  ~GpuTracer() override;
  std::string_view name() const override { return "GPU"; }
  bool library() const override { return true; }
  // Sets up GPU data for pid.  Returns false while the process has no CUDA
  // library mapped (call again later).  Never throws for a target's sake:
  // what fails becomes a note. The probes are the process's own (the
  // bridge's, or uprobes scoped to it): pid_filter does not apply.
  bool attach(pid_t pid, pid_t pid_filter) override;
  const char* lost() const override { return "its GPU data is missing from the report"; }
  bool holds_at_load() const override { return false; }  // it may inject, by ptrace
  // For the session's stderr summary.
  std::string describe(pid_t pid) const override;
  void fill_target(pid_t pid, lt_target& t) const override;
  // A bridge we injected has not said yet whether CUPTI is ours.
  bool settling(pid_t pid) const override;
  // The bridges' states: on CUPTI unavailable, fall back to uprobes.
  void observe(const lt_event_header& h, std::span<const std::byte> record) override;
  // The bridges flush and release CUPTI; `drain` carries what they flush.
  void flush(const std::function<bool()>& drain) override;
  void detach() override;

 private:
  GpuSource& source();
  // The probes of a bridge that processes will load (run: the launched
  // command's), in place before any of them does: nothing is missed.
  void expect_bridge(const std::string& path);
  void on_status(pid_t pid, const lt_gpu_status& s);
  void fall_back_to_uprobes(pid_t pid, const std::string& why);
  const TracerContext& ctx_;
  std::string bridge_path_;  // our libltrace-bridge.so ("" = not found)
  std::unique_ptr<GpuSource> source_;
  std::map<pid_t, std::string> how_;  // pid -> "bridge (launch)", "bridge (injected)", "uprobes", ...
  std::set<pid_t> uprobed_;
  std::set<pid_t> injected_;
  std::map<pid_t, bool> active_;  // bridges that said ACTIVE (wait for DORMANT on detach)
  std::set<pid_t> heard_;         // bridges that reported any state (awaited at the attach)
};

}  // namespace lt
