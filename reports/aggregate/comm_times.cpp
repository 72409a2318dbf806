#include "reports/aggregate/comm_times.h"

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "bpf/events.h"

namespace lt {

namespace {

struct Pending {
  std::size_t call = 0;
  bool set = false;
};

struct DdpWait {
  std::uint64_t since = 0;
  std::uint32_t action = 0;
};

}  // namespace

std::vector<CommCallTimes> join_comm_times(std::span<const CommTimedCall> calls, std::span<const CommTimeMark> marks) {
  std::vector<CommCallTimes> out(calls.size());
  std::vector<std::optional<std::uint64_t>> done(calls.size()), wait_from(calls.size()), wait_until(calls.size());

  // Time order; at equal times a call before a mark (its enqueue follows it).
  struct Item {
    std::uint64_t ts;
    bool mark;
    std::size_t index;
  };
  std::vector<Item> order;
  order.reserve(calls.size() + marks.size());
  for (std::size_t i = 0; i < calls.size(); ++i) order.push_back({calls[i].ts_ns, false, i});
  for (std::size_t i = 0; i < marks.size(); ++i) order.push_back({marks[i].ts_ns, true, i});
  std::stable_sort(order.begin(), order.end(),
                   [](const Item& a, const Item& b) { return a.ts != b.ts ? a.ts < b.ts : (!a.mark && b.mark); });

  std::unordered_map<std::uint32_t, Pending> last_call;     // thread -> its last call not yet enqueued
  std::unordered_map<std::uint32_t, std::uint64_t> launch;  // thread -> DDP bucket whose collective comes next
  std::unordered_map<std::uint32_t, DdpWait> ddp_wait;      // thread -> where its current bucket wait began
  std::unordered_map<std::uint64_t, std::size_t> work;      // work object -> call
  std::unordered_map<std::uint64_t, std::size_t> bucket;    // DDP bucket -> call

  for (const Item& it : order) {
    if (!it.mark) {
      const CommTimedCall& c = calls[it.index];
      last_call[c.tid] = {it.index, c.enqueues};
      if (auto l = launch.find(c.tid); l != launch.end()) {
        bucket[l->second] = it.index;
        out[it.index].ddp = true;
        launch.erase(l);
      }
      continue;
    }
    const CommTimeMark& m = marks[it.index];
    switch (m.what) {
      case LT_COMM_MARK_ENQUEUE: {
        auto p = last_call.find(m.tid);
        if (p == last_call.end() || !p->second.set) break;
        const std::size_t i = p->second.call;
        out[i].enqueue_ns = m.ts_ns - calls[i].ts_ns;
        work[m.obj] = i;
        p->second.set = false;
        break;
      }
      case LT_COMM_MARK_DONE:
      case LT_COMM_MARK_DONE_ERROR: {
        auto w = work.find(m.obj);
        if (w == work.end() || done[w->second]) break;
        done[w->second] = m.ts_ns;
        out[w->second].failed = m.what == LT_COMM_MARK_DONE_ERROR;
        break;
      }
      case LT_COMM_MARK_WAIT: {
        auto w = work.find(m.obj);
        if (w == work.end() || out[w->second].waited) break;
        out[w->second].waited = true;
        out[w->second].wait_action = m.action;
        wait_from[w->second] = m.ts_ns;
        break;
      }
      case LT_COMM_MARK_DDP_LAUNCH:
        launch[m.tid] = m.obj;
        break;
      case LT_COMM_MARK_DDP_FINALIZE:
        ddp_wait[m.tid] = {m.ts_ns, m.action};
        break;
      case LT_COMM_MARK_DDP_BUCKET_READY: {
        auto d = ddp_wait.find(m.tid);
        if (d == ddp_wait.end()) break;  // no finalize seen (attached mid-way)
        if (auto b = bucket.find(m.obj); b != bucket.end()) {
          const std::size_t i = b->second;
          if (!out[i].waited) {
            out[i].waited = true;
            out[i].wait_action = d->second.action;
            wait_from[i] = d->second.since;
            wait_until[i] = m.ts_ns;
          }
          bucket.erase(b);
        }
        d->second.since = m.ts_ns;
        break;
      }
      default:
        break;
    }
  }

  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (!done[i]) continue;
    const std::uint64_t end = *done[i];
    out[i].in_flight_ns = end > calls[i].ts_ns ? end - calls[i].ts_ns : 0;
    if (!wait_from[i]) continue;
    std::uint64_t b = end > *wait_from[i] ? end - *wait_from[i] : 0;
    if (wait_until[i]) b = std::min(b, *wait_until[i] > *wait_from[i] ? *wait_until[i] - *wait_from[i] : 0);
    out[i].blocked_ns = b;
  }
  return out;
}

}  // namespace lt
