// The time join of COMM calls and COMM_MARK records (reports/aggregate/
// comm_times.h) on synthetic records: marks out of order across threads, a
// missing completion, a completion before the wait, a send that is never
// enqueued, reused work addresses, and DDP's bucket waits; then the comm
// aggregator's rows and the report's columns from the same kind of stream.
#include "reports/aggregate/comm_times.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "bpf/events.h"
#include "reports/aggregate/actions.h"
#include "reports/aggregate/comm.h"
#include "reports/comm/comm_report.h"

using namespace lt;

namespace {

constexpr std::uint64_t us = 1000, ms = 1000 * us;
constexpr std::uint32_t kMain = 10, kWorker = 11, kOther = 12;

CommTimeMark mark(std::uint64_t ts, std::uint32_t tid, std::uint8_t what, std::uint64_t obj, std::uint32_t action = 0) {
  return {ts, tid, what, obj, 0, action};
}

TEST(CommTimes, SyncAllReduceWaitedByItsCaller) {
  // entry at 0, enqueue at 20 us, wait at 30 us, done at 5 ms
  std::vector<CommTimedCall> calls{{1 * ms, kMain, true}};
  std::vector<CommTimeMark> marks{mark(1 * ms + 20 * us, kMain, LT_COMM_MARK_ENQUEUE, 0xA0),
                                  mark(1 * ms + 30 * us, kMain, LT_COMM_MARK_WAIT, 0xA0, 1),
                                  mark(6 * ms, kWorker, LT_COMM_MARK_DONE, 0xA0)};
  auto t = join_comm_times(calls, marks);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].enqueue_ns, 20 * us);
  EXPECT_EQ(t[0].in_flight_ns, 5 * ms);
  EXPECT_EQ(t[0].blocked_ns, 5 * ms - 30 * us);
  EXPECT_EQ(t[0].wait_action, 1u);
  EXPECT_FALSE(t[0].failed);
  EXPECT_FALSE(t[0].ddp);
}

TEST(CommTimes, OrderOfTheRecordsDoesNotMatter) {
  // two threads issue async collectives; one waits for the other's work
  std::vector<CommTimedCall> calls{{1 * ms, kMain, true}, {2 * ms, kOther, true}, {3 * ms, kMain, true}};
  std::vector<CommTimeMark> marks{
      mark(1 * ms + 10 * us, kMain, LT_COMM_MARK_ENQUEUE, 0xA0),
      mark(2 * ms + 10 * us, kOther, LT_COMM_MARK_ENQUEUE, 0xB0),
      mark(3 * ms + 10 * us, kMain, LT_COMM_MARK_ENQUEUE, 0xC0),
      mark(4 * ms, kMain, LT_COMM_MARK_WAIT, 0xB0, 2),  // main waits for other's work
      mark(5 * ms, kWorker, LT_COMM_MARK_DONE, 0xA0),
      mark(7 * ms, kWorker, LT_COMM_MARK_DONE, 0xB0),
      mark(8 * ms, kWorker, LT_COMM_MARK_DONE_ERROR, 0xC0),
      mark(9 * ms, kOther, LT_COMM_MARK_WAIT, 0xC0, 3),  // after its completion: blocked 0
  };
  auto expect = [](const std::vector<CommCallTimes>& t) {
    ASSERT_EQ(t.size(), 3u);
    EXPECT_EQ(t[0].in_flight_ns, 4 * ms);
    EXPECT_FALSE(t[0].waited);
    EXPECT_FALSE(t[0].blocked_ns);
    EXPECT_EQ(t[1].in_flight_ns, 5 * ms);
    EXPECT_EQ(t[1].blocked_ns, 3 * ms);
    EXPECT_EQ(t[1].wait_action, 2u);
    EXPECT_EQ(t[2].in_flight_ns, 5 * ms);
    EXPECT_TRUE(t[2].failed);
    EXPECT_EQ(t[2].blocked_ns, 0u);
    EXPECT_EQ(t[2].wait_action, 3u);
    for (auto& x : t) EXPECT_EQ(x.enqueue_ns, 10 * us);
  };
  expect(join_comm_times(calls, marks));
  std::mt19937 rng(7);
  for (int i = 0; i < 20; ++i) {
    std::shuffle(marks.begin(), marks.end(), rng);
    expect(join_comm_times(calls, marks));
  }
}

TEST(CommTimes, MissingCompletionStaysUnknown) {
  std::vector<CommTimedCall> calls{{1 * ms, kMain, true}};
  std::vector<CommTimeMark> marks{mark(1 * ms + 5 * us, kMain, LT_COMM_MARK_ENQUEUE, 0xA0),
                                  mark(2 * ms, kMain, LT_COMM_MARK_WAIT, 0xA0)};
  auto t = join_comm_times(calls, marks);
  EXPECT_EQ(t[0].enqueue_ns, 5 * us);
  EXPECT_TRUE(t[0].waited);
  EXPECT_FALSE(t[0].in_flight_ns);
  EXPECT_FALSE(t[0].blocked_ns);  // never a made-up number
}

TEST(CommTimes, SendIsNeverMatchedToAnEnqueue) {
  // send (not enqueued), then an enqueue from an unprobed path: not the send's
  std::vector<CommTimedCall> calls{{1 * ms, kMain, false}};
  std::vector<CommTimeMark> marks{mark(1 * ms + 5 * us, kMain, LT_COMM_MARK_ENQUEUE, 0xA0),
                                  mark(2 * ms, kWorker, LT_COMM_MARK_DONE, 0xA0),
                                  mark(3 * ms, kMain, LT_COMM_MARK_WAIT, 0xA0)};
  auto t = join_comm_times(calls, marks);
  EXPECT_FALSE(t[0].enqueue_ns);
  EXPECT_FALSE(t[0].in_flight_ns);
  EXPECT_FALSE(t[0].waited);
}

TEST(CommTimes, ReusedWorkAddressStartsANewWork) {
  std::vector<CommTimedCall> calls{{1 * ms, kMain, true}, {10 * ms, kMain, true}};
  std::vector<CommTimeMark> marks{mark(1 * ms + 5 * us, kMain, LT_COMM_MARK_ENQUEUE, 0xA0),
                                  mark(2 * ms, kMain, LT_COMM_MARK_WAIT, 0xA0),
                                  mark(3 * ms, kWorker, LT_COMM_MARK_DONE, 0xA0),
                                  mark(10 * ms + 5 * us, kMain, LT_COMM_MARK_ENQUEUE, 0xA0),
                                  mark(10 * ms + 6 * us, kMain, LT_COMM_MARK_WAIT, 0xA0),
                                  mark(12 * ms, kWorker, LT_COMM_MARK_DONE, 0xA0)};
  auto t = join_comm_times(calls, marks);
  EXPECT_EQ(t[0].in_flight_ns, 2 * ms);
  EXPECT_EQ(t[0].blocked_ns, 1 * ms);
  EXPECT_EQ(t[1].in_flight_ns, 2 * ms);
  EXPECT_EQ(t[1].blocked_ns, 2 * ms - 6 * us);
}

TEST(CommTimes, DdpBucketsMapByBucketAndWaitInOrder) {
  // backward on kMain: bucket B1 then B2 launched (each: all_reduce_bucket, the
  // collective, its enqueue); a metric all_reduce in between is not a bucket's.
  std::vector<CommTimedCall> calls{{1 * ms, kMain, true}, {2 * ms, kMain, true}, {3 * ms, kMain, true}};
  std::vector<CommTimeMark> marks{
      mark(1 * ms - 1 * us, kMain, LT_COMM_MARK_DDP_LAUNCH, 0xB1),
      mark(1 * ms + 5 * us, kMain, LT_COMM_MARK_ENQUEUE, 0xA1),
      mark(2 * ms + 5 * us, kMain, LT_COMM_MARK_ENQUEUE, 0xA2),  // the metric
      mark(3 * ms - 1 * us, kMain, LT_COMM_MARK_DDP_LAUNCH, 0xB2),
      mark(3 * ms + 5 * us, kMain, LT_COMM_MARK_ENQUEUE, 0xA3),
      mark(4 * ms, kMain, LT_COMM_MARK_DDP_FINALIZE, 0xEE, 4),
      mark(6 * ms, kWorker, LT_COMM_MARK_DONE, 0xA1),  // B1 done 2 ms into the wait
      mark(6 * ms + 100 * us, kMain, LT_COMM_MARK_DDP_BUCKET_READY, 0xB1),
      mark(6 * ms + 200 * us, kWorker, LT_COMM_MARK_DONE, 0xA3),  // B2 done before its wait ends
      mark(6 * ms + 300 * us, kMain, LT_COMM_MARK_DDP_BUCKET_READY, 0xB2),
      mark(7 * ms, kWorker, LT_COMM_MARK_DONE, 0xA2),
  };
  std::reverse(marks.begin(), marks.end());
  auto t = join_comm_times(calls, marks);
  EXPECT_TRUE(t[0].ddp);
  EXPECT_FALSE(t[1].ddp);
  EXPECT_TRUE(t[2].ddp);
  EXPECT_EQ(t[0].blocked_ns, 2 * ms);
  EXPECT_EQ(t[0].wait_action, 4u);
  EXPECT_EQ(t[2].blocked_ns, 100 * us);  // from B1's finalize to B2's completion
  EXPECT_FALSE(t[1].waited);
  EXPECT_EQ(t[1].in_flight_ns, 5 * ms);
}

TEST(CommTimes, DdpWaitIsCappedAtTheBucketsReady) {
  // completion seen after READY (clock order across CPUs): at most READY - wait start
  std::vector<CommTimedCall> calls{{1 * ms, kMain, true}};
  std::vector<CommTimeMark> marks{mark(1 * ms - 1 * us, kMain, LT_COMM_MARK_DDP_LAUNCH, 0xB1),
                                  mark(1 * ms + 5 * us, kMain, LT_COMM_MARK_ENQUEUE, 0xA1),
                                  mark(2 * ms, kMain, LT_COMM_MARK_DDP_FINALIZE, 0xEE),
                                  mark(3 * ms, kMain, LT_COMM_MARK_DDP_BUCKET_READY, 0xB1),
                                  mark(3 * ms + 10 * us, kWorker, LT_COMM_MARK_DONE, 0xA1)};
  auto t = join_comm_times(calls, marks);
  EXPECT_EQ(t[0].blocked_ns, 1 * ms);
}

TEST(CommTimes, BucketReadyWithoutFinalizeIsNotAWait) {
  std::vector<CommTimedCall> calls{{1 * ms, kMain, true}};
  std::vector<CommTimeMark> marks{mark(1 * ms - 1 * us, kMain, LT_COMM_MARK_DDP_LAUNCH, 0xB1),
                                  mark(1 * ms + 5 * us, kMain, LT_COMM_MARK_ENQUEUE, 0xA1),
                                  mark(2 * ms, kWorker, LT_COMM_MARK_DONE, 0xA1),
                                  mark(3 * ms, kMain, LT_COMM_MARK_DDP_BUCKET_READY, 0xB1)};
  auto t = join_comm_times(calls, marks);
  EXPECT_TRUE(t[0].ddp);
  EXPECT_FALSE(t[0].waited);
  EXPECT_EQ(t[0].in_flight_ns, 1 * ms);
}

// The aggregator and the report: two all_reduces of 1000 float32, one
// waited 3 ms, one never completed; an old trace (no marks) shows no columns.
struct Feed {
  ActionAggregator actions;
  CommAggregator comm{actions, {.keep_calls = true}};
  template <typename R>
  void put(R r, std::uint16_t kind, std::uint32_t tid, std::uint64_t ts) {
    r.hdr = {kind, sizeof r, 40, tid, 0, ts};
    actions.add(r.hdr, reinterpret_cast<const std::byte*>(&r));
    comm.add(r.hdr, reinterpret_cast<const std::byte*>(&r));
  }
  void call(std::uint64_t ts) {
    lt_comm_event c{};
    c.pg = 0x900;
    c.seq = ++seq;
    c.kind = LT_COMM_ALLREDUCE;
    c.backend = LT_COMM_GLOO;
    c.peer = -1;
    c.ntensors = 1;
    c.flags = LT_COMM_HAS_TENSOR;
    c.impl[2] = 1;  // SizesAndStrides at word 2: ndim 1, size 1000, stride 1
    c.impl[3] = 1000;
    c.impl[8] = 1;
    c.impl[14] = 1000;  // numel_
    c.impl[15] = 6;     // float32
    put(c, LT_EV_COMM, 40, ts);
  }
  void mark(std::uint64_t ts, std::uint32_t tid, std::uint8_t what, std::uint64_t obj) {
    lt_comm_mark_event m{};
    m.what = what;
    m.obj = obj;
    put(m, LT_EV_COMM_MARK, tid, ts);
  }
  std::uint64_t seq = 0;
};

TEST(CommTimesReport, RowsCarryTheJoinedTimes) {
  Feed f;
  f.call(1 * ms);
  f.mark(1 * ms + 40 * us, 40, LT_COMM_MARK_ENQUEUE, 0xA0);
  f.mark(1 * ms + 50 * us, 40, LT_COMM_MARK_WAIT, 0xA0);
  f.mark(4 * ms + 50 * us, 41, LT_COMM_MARK_DONE, 0xA0);
  f.call(10 * ms);
  f.mark(10 * ms + 20 * us, 40, LT_COMM_MARK_ENQUEUE, 0xA8);  // never completes
  auto rep = f.comm.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  const ProcessComm& p = rep.processes[0];
  ASSERT_EQ(p.sizes.size(), 1u);
  const CommSizeRow& r = p.sizes[0];
  EXPECT_EQ(r.calls, 2u);
  EXPECT_EQ(r.bytes, 4000u);
  EXPECT_EQ(r.completed, 1u);
  EXPECT_EQ(r.in_flight_ns, 3 * ms + 50 * us);
  EXPECT_EQ(r.waited, 1u);
  EXPECT_EQ(r.blocked_ns, 3 * ms);
  EXPECT_EQ(r.enqueued, 2u);
  EXPECT_EQ(r.enqueue_ns, 60 * us);
  ASSERT_EQ(p.calls_kept.size(), 2u);
  EXPECT_EQ(p.calls_kept[0].blocked_ns, 3 * ms);
  EXPECT_FALSE(p.calls_kept[1].in_flight_ns);
  ASSERT_EQ(p.actions.size(), 1u);
  EXPECT_EQ(p.actions[0].blocked_ns, 3 * ms);

  const std::string text = render_comm_report(rep);
  EXPECT_NE(text.find("in-flight (ms)"), std::string::npos) << text;
  EXPECT_NE(text.find("3.050"), std::string::npos) << text;  // in-flight total and average of the one completed
  EXPECT_NE(text.find("3.000"), std::string::npos) << text;  // blocked
  EXPECT_NE(text.find("30.0"), std::string::npos) << text;   // enqueue average, us
  // algbw = 4000 B / 3.05 ms = 0.001311 GB/s; busbw needs n (no PROC_ENV here)
  EXPECT_NE(text.find("0.001"), std::string::npos) << text;
  EXPECT_NE(text.find("WORLD_SIZE unknown"), std::string::npos) << text;
  EXPECT_EQ(p.incomplete, 1u);
  EXPECT_NE(text.find("(1 collectives not seen complete"), std::string::npos) << text;
}

TEST(CommTimesReport, OldTraceHasNoTimeColumns) {
  Feed f;
  f.call(1 * ms);
  const std::string text = render_comm_report(f.comm.finish());
  EXPECT_EQ(text.find("in-flight (ms)"), std::string::npos) << text;
  EXPECT_NE(text.find("no timing records"), std::string::npos) << text;
}

}  // namespace
