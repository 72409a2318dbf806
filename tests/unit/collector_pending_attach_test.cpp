// The one poller for probes that wait for a library the target has not
// loaded yet, serving every library tracer (user/collector/pending_attach.h), with a scripted attempt.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "user/collector/pending_attach.h"

using namespace lt;
using Attempt = PendingAttach::Attempt;

namespace {

constexpr std::uint64_t kMs = 1'000'000;

// Says `later` for a pid until its count of attempts reaches ready_after.
struct ScriptedAttach {
  std::map<pid_t, int> ready_after;
  std::vector<std::pair<pid_t, bool>> calls;  // (pid, first)
  Attempt operator()(std::size_t, pid_t pid, bool first) {
    calls.emplace_back(pid, first);
    int n = 0;
    for (auto& c : calls) n += c.first == pid;
    return n >= ready_after[pid] ? Attempt::done : Attempt::later;
  }
};

auto ours_all = [](pid_t) { return true; };

}  // namespace

TEST(CollectorPendingAttach, FirstAttemptAtStartThenRetriesEveryInterval) {
  ScriptedAttach script;
  script.ready_after = {{10, 1}, {20, 3}};
  PendingAttach p(250 * kMs, std::ref(script));
  p.add_tracer();
  p.start_clock(0);
  p.start(10);
  p.start(20);
  EXPECT_FALSE(p.waiting(10));  // attached at once
  EXPECT_TRUE(p.waiting(20));
  ASSERT_EQ(script.calls.size(), 2u);
  EXPECT_TRUE(script.calls[0].second && script.calls[1].second);  // both first attempts

  p.poll(100 * kMs, ours_all);  // too soon
  EXPECT_EQ(script.calls.size(), 2u);
  p.poll(251 * kMs, ours_all);  // retry 1: still later
  EXPECT_TRUE(p.waiting(20));
  p.poll(400 * kMs, ours_all);  // within the interval of the last retry
  EXPECT_EQ(script.calls.size(), 3u);
  p.poll(502 * kMs, ours_all);  // retry 2: done
  EXPECT_FALSE(p.waiting(20));
  EXPECT_TRUE(p.empty());
  ASSERT_EQ(script.calls.size(), 4u);
  EXPECT_EQ(script.calls[3], std::make_pair(pid_t{20}, false));  // a retry, not the first attempt
  p.poll(2000 * kMs, ours_all);
  EXPECT_EQ(script.calls.size(), 4u);  // nothing left to try
}

TEST(CollectorPendingAttach, TargetsNoLongerOursStopWaitingUntried) {
  ScriptedAttach script;
  script.ready_after = {{10, 100}, {20, 100}};
  PendingAttach p(250 * kMs, std::ref(script));
  p.add_tracer();
  p.start_clock(0);
  p.start(10);
  p.start(20);
  p.poll(300 * kMs, [](pid_t pid) { return pid == 20; });  // 10 exited
  EXPECT_FALSE(p.waiting(10));
  EXPECT_TRUE(p.waiting(20));
  EXPECT_EQ(script.calls.size(), 3u);
  EXPECT_EQ(script.calls.back().first, 20);
}

TEST(CollectorPendingAttach, AnIdlePollerDoesNotRestartItsInterval) {
  // As the loop it replaces: the interval runs from the last retry (or the
  // loop's start), whether or not anything was waiting in between.
  ScriptedAttach script;
  script.ready_after = {{10, 2}};
  PendingAttach p(250 * kMs, std::ref(script));
  p.add_tracer();
  p.start_clock(0);
  p.poll(1000 * kMs, ours_all);  // nothing waits: no retry, clock untouched
  p.start(10);
  p.poll(1001 * kMs, ours_all);  // due since 250 ms
  EXPECT_FALSE(p.waiting(10));
  EXPECT_EQ(script.calls.size(), 2u);
}

TEST(CollectorPendingAttach, AnAttemptThatThrowsLeavesTheTargetNotWaiting) {
  int calls = 0;
  PendingAttach p(250 * kMs, [&](std::size_t, pid_t, bool first) -> Attempt {
    ++calls;
    if (!first) throw std::runtime_error("ends the session");
    return Attempt::later;
  });
  p.add_tracer();
  p.start_clock(0);
  p.start(10);
  EXPECT_TRUE(p.waiting(10));
  EXPECT_THROW(p.poll(300 * kMs, ours_all), std::runtime_error);
  EXPECT_FALSE(p.waiting(10));
  EXPECT_EQ(calls, 2);
}

// One poller serves every library tracer: each has its first attempt at
// adoption, in order, and waits on its own; a retry or a library load's
// out-of-turn attempt reaches only the tracers still waiting.
TEST(CollectorPendingAttach, OnePollerServesEveryTracer) {
  std::vector<std::tuple<std::size_t, pid_t, bool>> calls;
  std::map<std::size_t, int> ready_after = {{0, 1}, {1, 2}};
  PendingAttach p(250 * kMs, [&](std::size_t t, pid_t pid, bool first) {
    calls.emplace_back(t, pid, first);
    int n = 0;
    for (auto& [ct, cp, cf] : calls) n += ct == t && cp == pid;
    return n >= ready_after[t] ? Attempt::done : Attempt::later;
  });
  EXPECT_EQ(p.add_tracer(), 0u);
  EXPECT_EQ(p.add_tracer(), 1u);
  p.start_clock(0);
  p.start(10);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0], std::make_tuple(std::size_t{0}, pid_t{10}, true));
  EXPECT_EQ(calls[1], std::make_tuple(std::size_t{1}, pid_t{10}, true));
  EXPECT_FALSE(p.waiting(0, 10));
  EXPECT_TRUE(p.waiting(1, 10));
  EXPECT_TRUE(p.waiting(10));
  p.retry(0, 10);  // not waiting for tracer 0: nothing
  EXPECT_EQ(calls.size(), 2u);
  p.retry(1, 10);  // a library load: tracer 1 now
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[2], std::make_tuple(std::size_t{1}, pid_t{10}, false));
  EXPECT_FALSE(p.waiting(10));
  p.poll(300 * kMs, ours_all);
  EXPECT_EQ(calls.size(), 3u);
}

TEST(CollectorPendingAttach, ToldTargetsWaitForTheirLoadsAndTheBackstop) {
  // A target whose loads are told is tried at each load, and by the poll
  // only at the backstop; the others keep the interval.  next_due_ns()
  // says when the poll next has work (the drain loop sleeps until then).
  ScriptedAttach script;
  script.ready_after = {{10, 100}, {20, 100}};
  PendingAttach p(250 * kMs, std::ref(script));
  p.add_tracer();
  p.start_clock(0);
  p.start(10);
  p.start(20);
  p.told(10, true);
  EXPECT_EQ(p.next_due_ns(), 250 * kMs + 1);  // 20 is polled
  p.poll(251 * kMs, ours_all);
  ASSERT_EQ(script.calls.size(), 3u);
  EXPECT_EQ(script.calls.back().first, 20);  // 10 is not polled
  p.loaded(10);
  ASSERT_EQ(script.calls.size(), 4u);
  EXPECT_EQ(script.calls.back(), std::make_pair(pid_t{10}, false));
  p.loaded(30);  // not waiting: nothing
  EXPECT_EQ(script.calls.size(), 4u);

  p.told(20, true);  // every waiting target told: only the backstop is due
  EXPECT_EQ(p.next_due_ns(), PendingAttach::kBackstopNs + 1);
  p.poll(600 * kMs, ours_all);
  EXPECT_EQ(script.calls.size(), 4u);
  // The backstop runs on its own clock, even right after an interval's retry.
  p.poll(PendingAttach::kBackstopNs - 10 * kMs, ours_all);
  p.poll(PendingAttach::kBackstopNs + 1, ours_all);
  EXPECT_EQ(script.calls.size(), 6u);
  EXPECT_EQ(p.next_due_ns(), 2 * PendingAttach::kBackstopNs + 2);
  EXPECT_EQ(p.waiting_pids(), (std::vector<pid_t>{10, 20}));
}
