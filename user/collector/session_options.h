// What a live attach is asked to do (the CLI fills it from its options).
// Its own header: the tracers (user/collector/tracer.h) read it too.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bpf/events.h"
#include "user/collector/source_set.h"

namespace lt {

// How often the drain loop reads the ring while records come, refreshes
// the targets' thread states and takes the /proc samples. The defaults suit
// a profile; watch's cheap tier asks for a slower one: each wake-up of the
// tracer lands on a CPU the job's threads use (two here), and an always-on
// recorder pays it for hours (docs/design-watch.md, "Cost").
struct LoopCadence {
  std::uint64_t drain_ns = 20'000'000;
  std::uint64_t thread_states_ns = 100'000'000;
  std::uint64_t proc_samples_ns = 100'000'000;
  bool operator==(const LoopCadence&) const = default;
};

struct SessionOptions {
  std::vector<pid_t> pids;
  // --all: every process with torch or Lightning loaded, now and started
  // later (proc::EligibleWatcher, every 500 ms); those that cannot be
  // profiled are notes.  Runs until a signal or --duration.
  bool all = false;
  bool children = false;
  // A CPython started anywhere whose environment has these KEY=VALUE
  // (`run`'s marker, which srun passes on to the job's tasks; --job-env):
  // held at its exec and adopted, like a child.
  std::vector<std::pair<std::string, std::string>> adopt_env;
  double duration_s = 0;  // 0: until signal or targets exit
  bool verbose = false;
  unsigned sample_rate_hz = 0;  // Python stack samples per second per thread (0: off)
  // watch: an escalated target's samples per second (Session::escalate);
  // 0, or not over sample_rate_hz: the same rate as the others.
  unsigned escalated_rate_hz = 0;
  bool off_cpu = false;  // record blocking (sched_switch) with stacks
  // Action starts name their opening frame without its depth, so stacks
  // are cut at the outermost frame running its code (LT_TARGET_ORIGIN_BY_CODE:
  // watch's cheap tier; LTRACE_BPF_ORIGIN_BY_CODE=1 for the tests).
  bool origin_by_code = false;
  // Which probe sources (user/collector/source_set.h): ops are aten op
  // entry probes (they need sample_rate_hz for times); memory the
  // allocator hooks of libc10 and comm the c10d backend methods of
  // libtorch_cpu, both started from the catalogue (tracers.cpp).
  SourceSet sources;
  // watch: the ops source records nothing until escalated (Session::escalate,
  // after a trigger): then the op observer, for a while.
  bool ops_on_demand = false;
  // The loop's cadence; while a target is escalated, the default one (the
  // op observer's rings fill faster than the cheap tier's records).
  LoopCadence cadence;
  std::vector<std::string> op_filters;  // --ops globs; empty: every op
  bool shapes = false;                  // ops with their tensor arguments' shapes
  // nn.Module calls (--module-names): MODULE_CALL from the eval loop's
  // entry, MODULE_NAME records read from the target (module_namer.h).
  bool module_names = false;
  // GPU: records from CUDA targets (the CUPTI bridge, injected if needed,
  // or uprobes on libcudart / libcuda); see user/collector/gpu_tracer.h.
  bool gpu = true;
  // The reports asked for (--report as given, or its default): stored in
  // the trace so that `report FILE` prints the same ones.
  std::string reports = "simple";
  bool inject = true;                          // may ptrace-inject the bridge into a running process
  bool launch_stacks = false;                  // the Python stack of launches (needs sampling's TSD key)
  std::uint64_t launch_stack_interval_ns = 0;  // ...at most one per thread per interval (0: every launch)
  bool device_stats = false;                   // NVML + /proc samples (DeviceStatsMonitor keys)
  std::string preloaded_bridge;  // run: the bridge the command gets at launch: its probes go in before it starts
  std::string output_path;       // also write the trace file here ("" = none)
  bool keep_in_memory = false;   // also return every record as a Trace (--dump)
  // Sees every record as it arrives (the report aggregator), so a long
  // attach does not hold the stream in memory.
  std::function<void(const lt_event_header&, const std::byte*)> sink;
  // Called between two drains (watch: its ring, triggers and captures),
  // with the loop's clock (CLOCK_MONOTONIC ns): every ~20 ms while records
  // come; while none do, when next_tick says it has work next (absent: every
  // ~20 ms still).
  std::function<void(std::uint64_t)> on_tick;
  // When on_tick next has timed work (CLOCK_MONOTONIC ns; UINT64_MAX: none
  // but what a record or a wake_fd brings).
  std::function<std::uint64_t(std::uint64_t now)> next_tick;
  // Readable (an eventfd) when the loop must run now: a stop signal, a
  // capture asked for from another thread (user/cli/stop_signals.h). -1:
  // none (the loop then wakes at least every second to look at `stop`).
  int wake_fd = -1;
  // Called once every probe is live (run: lets the launched command go).
  std::function<void()> on_attached;
  // The cluster coordinator's clock server: measured at attach and at
  // detach, into CLOCK_SYNC records (user/cluster/clock_exchange.h).
  std::string clock_host;  // empty: no measurement
  std::uint16_t clock_port = 0;
  // `run`: the pid given is our own launched command, held before its
  // exec (not yet a CPython: no note that it is none). Kept out of the
  // fields the callers set by position (above).
  bool launched = false;
  // --all: why a process found running (not one adopted at its exec) is
  // not to be adopted, or nullopt. watch: another watcher traces it (one
  // watcher per process on a machine, across /run's).
  std::function<std::optional<std::string>(pid_t)> adoption_refused;
};

// Whether the stack sampler runs: its rate, off-CPU time, and the stacks of
// launches and allocations all need its walker and thread-state keys.
inline bool wants_stacks(const SessionOptions& o) {
  return o.sample_rate_hz > 0 || o.off_cpu || o.launch_stacks || o.sources.memory_stacks;
}

}  // namespace lt
