// Lost records by process, kind and cause (issue 20, points 2 and 8):
// PROC_DROPS from the BPF counters, and what the aggregator makes of them.
#include <gtest/gtest.h>

#include "reports/aggregate/actions.h"
#include "user/sources/loss_records.h"

using namespace lt;

namespace {

LossCount loss(std::uint32_t tgid, std::uint16_t kind, std::uint16_t cause, std::uint64_t n) {
  LossCount l{};
  l.key.tgid = tgid;
  l.key.kind = kind;
  l.key.cause = cause;
  l.count = n;
  return l;
}

void window(Trace& t, std::uint64_t ts, bool begin) {
  lt_window_event w{};
  w.hdr = {LT_EV_WINDOW, sizeof w, 0, 0, 0, ts};
  w.begin = begin;
  t.append(w);
}

}  // namespace

TEST(LossRecords, PerProcessThenTheRemainderAsPidZero) {
  lt_drop_counters totals{};
  totals.ringbuf_full = 10;  // 7 attributed, 3 found the table full
  totals.read_faults = 2;
  totals.unreadable = 1;
  auto recs = loss_records(
      {loss(20, LT_EV_ACTION_END, LT_LOSS_RINGBUF_FULL, 2), loss(10, LT_EV_ACTION_BEGIN, LT_LOSS_RINGBUF_FULL, 5),
       loss(10, LT_EV_ACTION_BEGIN, LT_LOSS_READ_FAULT, 2), loss(10, LT_EV_NONE, LT_LOSS_UNREADABLE, 1)},
      totals, 99);
  ASSERT_EQ(recs.size(), 5u);
  EXPECT_EQ(recs[0].hdr.pid, 10u);  // sorted by process, kind, cause
  EXPECT_EQ(recs[0].lost_kind, LT_EV_NONE);
  EXPECT_EQ(recs[1].lost_kind, LT_EV_ACTION_BEGIN);
  EXPECT_EQ(recs[1].cause, LT_LOSS_RINGBUF_FULL);
  EXPECT_EQ(recs[1].count, 5u);
  EXPECT_EQ(recs[3].hdr.pid, 20u);
  EXPECT_EQ(recs[4].hdr.pid, 0u);  // unattributed ring-buffer drops
  EXPECT_EQ(recs[4].cause, LT_LOSS_RINGBUF_FULL);
  EXPECT_EQ(recs[4].count, 3u);
  for (auto& r : recs) {
    EXPECT_EQ(r.hdr.kind, LT_EV_PROC_DROPS);
    EXPECT_EQ(r.hdr.size, sizeof r);
    EXPECT_EQ(r.hdr.ts_ns, 99u);
  }
}

TEST(LossRecords, NothingLostNoRecords) {
  EXPECT_TRUE(loss_records({}, lt_drop_counters{}, 1).empty());
}

TEST(Losses, AggregatorAttributesToProcesses) {
  Trace t;
  window(t, 0, true);
  lt_drops_event d{};
  d.hdr = {LT_EV_DROPS, sizeof d, 0, 0, 0, 5};
  d.ringbuf_full = 8;
  t.append(d);
  lt_drop_counters totals{};
  totals.ringbuf_full = 8;
  totals.unreadable = 1;
  for (auto& r : loss_records(
           {loss(42, LT_EV_ACTION_BEGIN, LT_LOSS_RINGBUF_FULL, 4), loss(42, LT_EV_ACTION_END, LT_LOSS_RINGBUF_FULL, 3),
            loss(42, LT_EV_PROC_EXIT, LT_LOSS_RINGBUF_FULL, 1), loss(43, LT_EV_NONE, LT_LOSS_UNREADABLE, 1)},
           totals, 5))
    t.append(r);
  window(t, 6, false);
  auto rep = aggregate_actions(t);
  EXPECT_EQ(rep.ringbuf_drops, 8u);
  EXPECT_EQ(rep.unreadable, 1u);
  EXPECT_TRUE(rep.unattributed.empty());
  ASSERT_EQ(rep.processes.size(), 2u);
  auto& p = rep.processes[0];
  EXPECT_EQ(p.meta.pid, 42u);
  EXPECT_TRUE(p.actions.empty());
  EXPECT_EQ(p.losses.size(), 3u);
  EXPECT_EQ(p.lost_action_records(), 7u);  // the exit record is not an action's
  EXPECT_EQ(rep.processes[1].lost_action_records(), 1u);
}

TEST(Losses, OldTracesWithOnlyTheTotalsStillRead) {
  Trace t;
  window(t, 0, true);
  lt_drops_event d{};
  d.hdr = {LT_EV_DROPS, sizeof d, 0, 0, 0, 5};
  d.ringbuf_full = 3;
  d.read_faults = 1;
  t.append(d);
  window(t, 6, false);
  auto rep = aggregate_actions(t);
  EXPECT_EQ(rep.ringbuf_drops, 3u);
  EXPECT_EQ(rep.read_faults, 1u);
  EXPECT_EQ(rep.unreadable, 0u);
  EXPECT_TRUE(rep.processes.empty());
}
