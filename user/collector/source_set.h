// The probe sources a session starts besides the action probes: what the
// chosen reports need (each report entry names its own, and
// user/cli/report_registry.cpp ORs them over the reports asked for) plus
// what other options ask for (--profile-memory, --ops, ...).
#pragma once

namespace lt {

struct SourceSet {
  bool stacks = false;         // the stack sampler (the session reads its rate from sample_rate_hz)
  bool ops = false;            // the aten op probes
  bool memory = false;         // the allocator probes
  bool memory_stacks = false;  // ...with the Python stack of each allocation
  bool comm = false;           // the collective probes
  bool xla = false;            // torch_xla's runtime probes
  bool gc = false;             // CPython's garbage-collection probes (USDT)
  bool oom = false;            // the allocator's out-of-memory hooks alone (watch: a trigger; no cost until one)
  // The blocking of the targets' forks (their DataLoader workers), with its
  // stacks: where they wait (the verdict's input-bound finding).  Off-CPU
  // stacks of the forks only; --off-cpu records every target's.
  bool fork_waits = false;
  // /proc samples of the targets (memory, CPU, run-queue waits) without
  // NVML and without a report of their own: the verdict's memory growth
  // and CPU contention.  --device-stats takes them with their report.
  bool proc_samples = false;
  // Where the targets' forks are not traced (no --children, no --all):
  // their CPU from /proc beside the targets' samples (FORK_STATS), so the
  // input-bound finding still says who loads the batches.
  bool untraced_forks = false;

  SourceSet& operator|=(const SourceSet& o) {
    stacks |= o.stacks;
    ops |= o.ops;
    memory |= o.memory;
    memory_stacks |= o.memory_stacks;
    comm |= o.comm;
    xla |= o.xla;
    gc |= o.gc;
    oom |= o.oom;
    fork_waits |= o.fork_waits;
    proc_samples |= o.proc_samples;
    untraced_forks |= o.untraced_forks;
    return *this;
  }
};

}  // namespace lt
