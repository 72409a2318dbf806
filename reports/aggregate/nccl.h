// NCCL API calls per process from the NCCL records (bpf/commprobe.bpf.c,
// lt_nccl_enter; docs/design-comm.md "NCCL"): per (function, dtype, element
// count) the calls and bytes, as nccl-tests lays out its results, per
// Lightning action, per communicator (size and rank where its creation was
// seen), and the GPU time of each call's NCCL kernels from CUPTI.
//
// The kernel join: NCCL launches a collective's kernel on the calling
// thread, inside the call (ungrouped) or inside the ncclGroupEnd that closes
// its group.  The bridge sends a GPU_LAUNCH with CUPTI's correlation id at
// every launch API entry on that thread (NCCL calls the driver directly:
// LT_API_DRIVER is set), and the kernel record carries the same id; so a
// call's kernels are the NCCL kernels ("nccl..." names) launched on its
// thread after its entry (or its group's end) and before the thread's next
// NCCL entry.  Joined as the records stream in: a launch waits for its
// kernel record (~100 ms), then only NCCL kernels are kept.  A group's kernels are shared by its calls: the
// group has one GPU time, which no single call is given.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "reports/aggregate/actions.h"
#include "user/model/trace.h"

namespace lt {

// NCCL's name of a function ("ncclAllReduce") and of a ncclDataType_t
// ("float32", nccl-tests' names), with its size in bytes (0 unknown).
std::string nccl_fn_name(std::uint8_t fn);
std::string nccl_dtype_name(int dtype);
std::size_t nccl_dtype_size(int dtype);
std::string nccl_op_name(std::uint32_t op);
// True for the collectives and point-to-point calls (what carries data).
bool nccl_fn_moves_data(std::uint8_t fn);

struct NcclSizeRow {
  std::uint8_t fn = 0;
  int dtype = -1;
  std::uint64_t count = 0;               // the count argument (elements; per peer for all-to-all)
  std::uint64_t bytes = 0;               // count * element size
  int nranks = -1;                       // the communicator's size when the calls were made, -1 unknown
  std::uint64_t calls = 0, grouped = 0;  // grouped: made between ncclGroupStart and its ncclGroupEnd
  std::uint64_t timed = 0, gpu_ns = 0;   // ungrouped calls whose kernels were joined: their GPU time
};

struct NcclActionRow {
  std::string action;
  std::uint8_t fn = 0;
  std::uint64_t calls = 0, bytes = 0, timed = 0, gpu_ns = 0;
};

struct NcclComm {
  std::uint64_t handle = 0;
  int nranks = -1, rank = -1;  // -1: created before the attach (or by a call whose size is not an argument)
  std::uint64_t calls = 0;
  bool destroyed = false;  // ncclCommDestroy / ncclCommAbort seen
};

// One group (ncclGroupStart ... ncclGroupEnd, outermost) with calls in it.
struct NcclGroupRow {
  std::string calls;  // "ncclAllReduce x2, ncclSend x1", the calls of that shape
  std::uint64_t groups = 0, timed = 0, gpu_ns = 0;
};

struct ProcessNccl {
  std::uint32_t pid = 0;
  std::vector<NcclSizeRow> sizes;  // by function, then bytes
  std::vector<NcclActionRow> actions;
  std::vector<NcclComm> comms;  // order of first use
  std::vector<NcclGroupRow> groups;
  std::uint64_t calls = 0, bytes = 0;
  std::uint64_t kernels = 0;       // NCCL kernels joined to calls or groups
  bool cupti = false;              // the process had CUPTI launch records (kernel times possible)
  std::uint64_t unbounded = 0;     // calls past the bounds kept for the join (threads, calls): not in any row
  std::uint64_t rows_dropped = 0;  // calls in the totals but in no row (more distinct sizes or actions than the bound)
  std::uint64_t simulated = 0;     // calls in groups closed by ncclGroupSimulateEnd (never run): not counted
  std::uint64_t launches_dropped = 0;  // launches past the bound of those awaiting their kernel record: not joined
};

struct NcclReport {
  std::vector<ProcessNccl> processes;  // by pid
};

class NcclAggregator {
 public:
  explicit NcclAggregator(const ActionAggregator& actions);
  ~NcclAggregator();
  // Call right after actions.add(h, p) for the same record.
  void add(const lt_event_header& h, const std::byte* record);
  NcclReport finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace lt
