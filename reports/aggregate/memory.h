// Memory per process from the allocator records (MEM, MEM_STACK; the probes
// are in docs/design-memory.md, the attribution in
// docs/design-memory-report.md): per Lightning action and device, bytes
// allocated and freed, allocation counts and the peak of live bytes; the
// allocations still alive at the end grouped by the op and Python stack that
// made them (leaks); out-of-memory events; and, for exports, each event
// (Chrome's "[memory]" instants) and a downsampled live-bytes timeline.
//
// An allocation is charged to the innermost action open on its thread (as
// the other aggregators attribute), or, on a thread outside every action
// (autograd's, a CUDA caching allocator callback), to the one open on the
// process's main thread.  A CPU free carries no size: it is the size of the
// allocation it frees, as this aggregator saw it; a free of an allocation
// made before the attach is counted, with its size unknown.  State is
// bounded: one entry per allocation alive in the target (capped), and sums
// per (action, device), per allocation site and per timeline bucket.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "reports/aggregate/actions.h"
#include "user/model/stack_profile.h"
#include "user/model/trace.h"

namespace lt {

// c10::DeviceType 0 (CPU) / 1 (CUDA), and the device index (-1 for CPU).
struct MemDevice {
  std::uint8_t type = 0;
  std::int8_t index = -1;
  bool cuda() const { return type == 1; }
  auto operator<=>(const MemDevice&) const = default;
};
// "CPU", "CUDA 0", "device type 7 index 2"
std::string mem_device_name(MemDevice d);

// One (action, device): sums over the action's calls.
struct MemActionRow {
  std::string action;  // kNoAction outside every action
  MemDevice device;
  std::uint64_t allocs = 0, alloc_bytes = 0;
  std::uint64_t frees = 0, freed_bytes = 0;  // frees of a known size
  std::uint64_t frees_unknown = 0;           // frees of allocations made before the attach: size unknown
  // The peak of the process's live bytes on the device (the allocator's
  // total when the records carry it, else ours since the attach) right after
  // an allocation this action made.
  std::uint64_t peak_live = 0;
  std::uint64_t peak_reserved = 0;  // CUDA: the caching allocator's reserved bytes at the same moments
};

// One device of a process over the whole window.
struct MemDeviceSummary {
  MemDevice device;
  std::uint64_t allocs = 0, alloc_bytes = 0, frees = 0, freed_bytes = 0, frees_unknown = 0, ooms = 0;
  bool totals_known = false;  // live/reserved are the allocator's own totals (CUDA), not ours since attach
  std::int64_t live = 0;      // at the end: the allocator's total, or ours (allocated - freed since attach)
  std::uint64_t peak_live = 0, reserved = 0, peak_reserved = 0;
};

// Allocations still alive at the end, grouped by the op and the Python stack
// that made them.
struct MemLeakRow {
  MemDevice device;
  std::string op;                 // the innermost aten op running ("" none or unknown)
  std::vector<StackFrame> stack;  // root first; empty: no stack recorded
  std::uint64_t bytes = 0, count = 0;
  std::uint64_t first_ns = 0;  // the oldest of them
};

struct MemOom {
  std::uint64_t ts_ns = 0;
  std::uint32_t tid = 0;
  MemDevice device;
  std::uint64_t bytes = 0;  // what was asked for
  std::string action, op;
  std::vector<StackFrame> stack;
};

// One allocator event as kineto writes it (exports only).
struct MemEvent {
  std::uint64_t ts_ns = 0, ptr = 0;
  std::uint32_t tid = 0;
  MemDevice device;
  bool oom = false;
  std::int64_t bytes = 0;  // > 0 allocated, < 0 freed (size found for CPU frees; 0 unknown)
  std::int64_t total_allocated = 0;
  std::uint64_t total_reserved = 0;
};

// Live bytes over time, downsampled: each point is the maximum over its bucket.
struct MemTimelinePoint {
  std::uint64_t ts_ns = 0;
  std::int64_t live = 0;
  std::uint64_t reserved = 0;
};
struct MemTimeline {
  MemDevice device;
  std::vector<MemTimelinePoint> points;  // at most MemoryOptions::timeline_points, in time order
};

struct ProcessMemory {
  std::uint32_t pid = 0;
  std::vector<MemDeviceSummary> devices;  // CPU first, then CUDA by index
  std::vector<MemActionRow> actions;      // first-begin order of actions, kNoAction last; per action by device
  std::vector<MemLeakRow> leaks;          // biggest first
  std::uint64_t leak_bytes = 0, leak_count = 0;
  std::vector<MemOom> ooms;      // in time order (the first kMaxOoms)
  std::uint64_t ooms_total = 0;  // including those not kept
  std::vector<MemEvent> events;  // exports only, in stream order (capped)
  std::uint64_t events_dropped = 0;
  std::vector<MemTimeline> timelines;  // exports only, one per device
  std::uint64_t untracked = 0;         // allocations not remembered: the live map was full
  bool stacks = false;                 // some allocation carried its Python stack
};

struct MemoryReport {
  std::vector<ProcessMemory> processes;  // those with MEM records, first-seen order
  bool any() const { return !processes.empty(); }
};

struct MemoryOptions {
  bool keep_events = false;            // Chrome events and the timeline (exports)
  std::size_t max_events = 4'000'000;  // per report, for the Chrome trace
  std::size_t timeline_points = 2000;  // per device
  std::size_t max_live = 8'000'000;    // live allocations remembered, per process
  std::size_t max_sites = 100'000;     // distinct (op, stack) sites per process
};

class MemoryAggregator {
 public:
  // Add each record after `actions` has seen it.
  explicit MemoryAggregator(const ActionAggregator& actions, MemoryOptions opts = {});
  ~MemoryAggregator();
  void add(const lt_event_header& h, const std::byte* record);
  // Records were lost here (a damaged chunk): a stack is not joined to an
  // allocation across it.
  void gap();
  MemoryReport finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace lt
