// How long each c10d collective took and how long a caller was blocked for
// it: the join of the COMM records (a call entered) with the COMM_MARK
// records (bpf/commprobe.bpf.c; docs/design-comm.md, "Times").  A pure
// function of the records of one process; the records may come in any
// order (they are put in time order here).  Everything is measured from
// entry probes on the process's own clock; what cannot be joined stays
// unknown (std::nullopt), never estimated.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace lt {

struct CommTimedCall {
  std::uint64_t ts_ns = 0;  // the collective's entry
  std::uint32_t tid = 0;
  bool enqueues = true;  // gloo hands the work to its threads (every collective; not send / recv)
};

struct CommTimeMark {
  std::uint64_t ts_ns = 0;
  std::uint32_t tid = 0;
  std::uint8_t what = 0;  // enum lt_comm_mark_what
  std::uint64_t obj = 0, owner = 0;
  std::uint32_t action = 0;  // the caller's id of the thread's innermost action then (WAIT, DDP_FINALIZE)
};

struct CommCallTimes {
  std::optional<std::uint64_t> enqueue_ns;    // entry -> ProcessGroupGloo::enqueue (CPU side, issuing thread)
  std::optional<std::uint64_t> in_flight_ns;  // entry -> finishWorkGloo(Error) (the work completed)
  bool failed = false;                        // completed through finishWorkGlooError
  bool waited = false;                        // a Work::wait or DDP's finalize waited for it
  std::optional<std::uint64_t> blocked_ns;    // waited and completed: max(0, completion - wait start)
  std::uint32_t wait_action = 0;              // the waiting thread's action at the wait (CommTimeMark::action)
  bool ddp = false;                           // a DDP gradient bucket's collective
};

// times[i] belongs to calls[i].  The join, per process:
//  * enqueue: the first ENQUEUE on the call's thread after it (no other call
//    of the thread between) gives the work object and the enqueue time;
//  * DONE / DONE_ERROR of that work object: completion (the first after
//    the enqueue; the object's address is reused only after it is freed,
//    and a new ENQUEUE of it starts a new work);
//  * WAIT on that work object: the first one starts the caller's wait;
//  * DDP: DDP_LAUNCH(bucket) on a thread makes the next call of that thread
//    the bucket's; DDP_FINALIZE starts the wait for the first bucket, and
//    each DDP_BUCKET_READY(bucket) ends the wait for that bucket and starts
//    the wait for the next one (finalize_backward waits for bucket i, then
//    finalizes it, in bucket order).  The wait is capped at the bucket's
//    READY.
std::vector<CommCallTimes> join_comm_times(std::span<const CommTimedCall> calls, std::span<const CommTimeMark> marks);

}  // namespace lt
