// c10d calls per process from the COMM records (bpf/commprobe.bpf.c;
// docs/design-comm.md): per (kind, dtype, element count) the calls and
// bytes, as nccl-tests lays out its results; per Lightning action the calls
// and bytes of each kind; per process group our sequence numbers (gaps are
// records lost).  Counts and bytes are exact.  Times come from the
// COMM_MARK records joined to the calls (reports/aggregate/comm_times.h):
// sums over the calls whose time is known, with how many those are.
//
// A call is charged to the innermost action open on its thread, or, on a
// thread outside every action, to the one open on the process's main
// thread.  The element count and dtype are read from the TensorImpl words
// the record carries (decode_comm_tensor), the layout learnt per process.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "reports/aggregate/actions.h"
#include "user/model/trace.h"

namespace lt {

// torch.distributed's name of a call ("all_reduce", "all_gather_into_tensor", ...).
std::string comm_kind_name(std::uint8_t kind);
// torch's name of a ScalarType ("float32"), and its size in bytes (0: unknown).
std::string comm_dtype_name(int scalar_type);
std::size_t comm_dtype_size(int scalar_type);

// A tensor read from TensorImpl words (LT_COMM_FIRST_WORD on).
struct CommTensor {
  int layout = -1;  // word (among the captured ones) of ndim
  unsigned ndim = 0;
  std::uint64_t numel = 0;
  int dtype = -1;  // c10::ScalarType
};
// Finds SizesAndStrides, numel_ and data_type_ in the captured words: ndim
// (0..5), the sizes, zeros in the unused inline slots, and numel_ equal to
// their product three words on (storage_offset_ between), data_type_ after
// it.  `layout_hint` (a word found before in the same process) is tried
// first; a 0-dim tensor is accepted only there or where nothing else fits.
std::optional<CommTensor> decode_comm_tensor(const std::uint64_t* words, int layout_hint);

// One (kind, dtype, elements) of a process: nccl-tests' row.
struct CommSizeRow {
  std::uint8_t kind = 0;
  std::string dtype;        // "" no tensor (barrier) or unreadable
  std::uint64_t count = 0;  // elements of this rank's tensor
  std::uint64_t bytes = 0;  // per call: count * element size (0: unknown)
  std::uint64_t calls = 0;
  std::uint64_t multi_tensor_calls = 0;  // calls with several tensors: only the first is counted in count/bytes
  // Times (comm_times.h), each a sum over the calls where it is known:
  std::uint64_t enqueued = 0, enqueue_ns = 0;     // entry -> hand-off to gloo's threads
  std::uint64_t completed = 0, in_flight_ns = 0;  // entry -> the work completed
  std::uint64_t waited = 0, blocked_ns = 0;       // a thread waited for it and it completed: time blocked
  std::uint64_t failed = 0;                       // completed with an error
};

struct CommActionRow {
  std::string action;  // kNoAction outside every action
  std::uint8_t kind = 0;
  std::uint64_t calls = 0, bytes = 0;             // the calls issued in the action
  std::uint64_t completed = 0, in_flight_ns = 0;  // of those calls, where known
  std::uint64_t waited = 0, blocked_ns = 0;       // waits by a thread in this action (its own calls or others')
};

struct CommGroup {
  unsigned index = 0;                                    // order of first use in the process: pg 0, pg 1, ...
  std::uint64_t object = 0;                              // the backend object's address
  std::uint64_t calls = 0, first_seq = 0, last_seq = 0;  // seq gaps = calls lost
};

// One call, for exports and the cross-rank merge (keep_calls).
struct CommCall {
  std::uint64_t ts_ns = 0;
  std::uint32_t tid = 0;
  unsigned pg = 0;
  std::uint64_t seq = 0;
  std::uint8_t kind = 0;
  std::int32_t peer = -1;
  std::string dtype;
  std::uint64_t count = 0, bytes = 0;
  std::string action;
  std::optional<std::uint64_t> enqueue_ns, in_flight_ns, blocked_ns;  // unknown: not joined
};

struct ProcessComm {
  std::uint32_t pid = 0;
  std::vector<CommSizeRow> sizes;  // by kind, then bytes, then dtype
  std::vector<CommActionRow> actions;
  std::vector<CommGroup> groups;
  std::uint64_t calls = 0, bytes = 0,
                unreadable = 0;  // unreadable: a tensor not read (LT_COMM_TENSOR_UNREAD) or whose words did not decode
  std::uint64_t rows_dropped = 0;  // calls in no row (more distinct sizes or groups than the bounds)
  std::uint64_t marks = 0;         // COMM_MARK records: 0 in a trace without the timing probes
  std::uint64_t untimed = 0;       // calls past the bound of calls timed (kept out of the time columns)
  std::uint64_t incomplete = 0;    // timed calls gloo enqueues whose completion was not seen (no in-flight time)
  std::vector<CommCall> calls_kept;
};

struct CommReport {
  std::vector<ProcessComm> processes;  // by pid
};

struct CommAggregatorOptions {
  bool keep_calls = false;  // every call (bounded), for exports and --merge
};

class CommAggregator {
 public:
  explicit CommAggregator(const ActionAggregator& actions, CommAggregatorOptions opts = {});
  ~CommAggregator();
  // Call right after actions.add(h, p) for the same record.
  void add(const lt_event_header& h, const std::byte* record);
  CommReport finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace lt
