// The straggler rule across nodes (user/cluster/cross_node_stragglers.h)
// and the node side's lines (user/cluster/watch_uplink.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "bpf/events.h"
#include "user/cluster/agent_protocol.h"
#include "user/cluster/cross_node_stragglers.h"
#include "user/cluster/watch_uplink.h"

namespace lt::cluster {
namespace {

constexpr std::int64_t ms = 1'000'000;

// Two nodes whose processes have the same pids (pid namespaces, or chance):
// 4 ranks, 2 a node; rank 3 (node2's pid 11) arrives 30 ms late from step 20.
TEST(CrossNodeStragglers, NamesTheRankOfAnotherNodeOnceAndOnlyLineUpAllRanks) {
  CrossNodeStragglers rule;
  const std::string node[4] = {"node1", "node1", "node2", "node2"};
  const std::uint32_t pid[4] = {10, 11, 10, 11};
  std::optional<NamedStraggler> named;
  int named_at = -1, names = 0;
  for (int step = 0; step < 80; ++step) {
    const std::int64_t t = 1'700'000'000'000'000'000 + step * 100 * ms;
    for (int r = 0; r < 4; ++r) {
      std::int64_t at = t + ((step * 7 + r * 3) % 5) * 100'000;  // jitter: no one last throughout
      if (r == 3 && step >= 20) at += 30 * ms;
      rule.arrival(node[r], pid[r], 0xbeef00 + static_cast<std::uint64_t>(r), static_cast<std::uint64_t>(step + 1),
                   LT_COMM_ALLREDUCE, at);
      rule.progress(node[r], pid[r], r, static_cast<std::uint64_t>(step), 100 * ms);
    }
    rule.through("node1", t + 50 * ms);
    rule.through("node2", t + 50 * ms);
    if (auto v = rule.check(t + 50 * ms)) {
      ++names;
      if (!named) named = v, named_at = step;
    }
  }
  EXPECT_EQ(rule.ranks(), 4u);  // node1's pid 10 and node2's pid 10 are two ranks
  ASSERT_TRUE(named);
  EXPECT_EQ(names, 1);  // named once while it stays the straggler
  EXPECT_EQ(named->node, "node2");
  EXPECT_EQ(named->pid, 11u);
  EXPECT_EQ(named->rank, 3);
  // 16 waited-for collectives of its since step 20: named within 20 steps.
  EXPECT_GE(named_at, 20 + 11);
  EXPECT_LE(named_at, 20 + 16);
  EXPECT_NE(named->what.find("rank 3 on node2, last to arrive at"), std::string::npos) << named->what;
  EXPECT_NE(named->what.find("all_reduce collectives of 4 ranks on 2 nodes"), std::string::npos) << named->what;
  // The others waited ~30 ms for it (less the jitter of their own arrivals).
  const auto wait_at = named->what.find(" ms each, median)");
  ASSERT_NE(wait_at, std::string::npos) << named->what;
  const double wait_ms = std::stod(named->what.substr(named->what.rfind('(', wait_at) + 1));
  EXPECT_NEAR(wait_ms, 30.0, 0.5) << named->what;

  // Its node's watcher ended: its ranks are forgotten, and nobody is named
  // (the other node's ranks alone wait for no one).
  rule.node_gone("node2");
  EXPECT_EQ(rule.ranks(), 2u);
  for (int step = 80; step < 120; ++step) {
    const std::int64_t t = 1'700'000'000'000'000'000 + step * 100 * ms;
    for (int r = 0; r < 2; ++r)
      rule.arrival(node[r], pid[r], 0xbeef00 + static_cast<std::uint64_t>(r), static_cast<std::uint64_t>(step + 1),
                   LT_COMM_ALLREDUCE, t + r * 100'000);
    rule.through("node1", t + 50 * ms);
    EXPECT_FALSE(rule.check(t + 50 * ms)) << step;
  }
}

// The lateness that counts grows with the slowest rank's median step: 30 ms
// late on 1 s steps (under a tenth) names nobody.
TEST(CrossNodeStragglers, ALatenessUnderATenthOfTheStepIsNoStraggler) {
  CrossNodeStragglers rule;
  for (int step = 0; step < 60; ++step) {
    const std::int64_t t = step * 1000 * ms;
    for (int r = 0; r < 2; ++r) {
      const std::string node = r ? "node2" : "node1";
      rule.progress(node, 7, r, static_cast<std::uint64_t>(step), 1000 * ms);
      rule.arrival(node, 7, 1, static_cast<std::uint64_t>(step + 1), LT_COMM_ALLREDUCE, t + (r ? 30 * ms : 0));
      rule.through(node, t + 500 * ms);
    }
    EXPECT_FALSE(rule.check(t + 500 * ms)) << step;
  }
}

// As the coordinator gets them: each node's arrivals in batches, node1's
// ~200 ms ahead of node2's; two collectives a 35 ms step (a DDP step's
// broadcast and its gradient all_reduce), the straggler 30 ms late at the
// all_reduce -- its lateness near the step, so that only the sequence
// numbers line the ranks up. Checked every 50 ms for 300 steps (the newest
// 128 calls of each process long cut): named once, never lost in between.
TEST(CrossNodeStragglers, NodesBatchedApartAreLinedUpByTimeAndNamedOnce) {
  CrossNodeStragglers rule;
  struct Call {
    int rank;
    std::uint64_t seq;
    std::uint8_t kind;
    std::int64_t t;
  };
  std::vector<Call> node1, node2;  // every call, in time order per node
  const std::int64_t t0 = 1'000 * ms, step_ns = 35 * ms;
  for (int step = 0; step < 300; ++step) {
    const std::int64_t t = t0 + step * step_ns;
    for (int r = 0; r < 4; ++r) {
      const std::int64_t jitter = ((step * 7 + r * 3) % 5) * 100'000;
      auto& calls = r < 2 ? node1 : node2;
      calls.push_back({r, static_cast<std::uint64_t>(2 * step + 1), LT_COMM_BROADCAST, t + jitter});
      calls.push_back({r, static_cast<std::uint64_t>(2 * step + 2), LT_COMM_ALLREDUCE,
                       t + 2 * ms + jitter + (r == 3 ? 30 * ms : 0)});
    }
  }
  auto by_time = [](const Call& a, const Call& b) { return a.t < b.t; };
  std::stable_sort(node1.begin(), node1.end(), by_time);
  std::stable_sort(node2.begin(), node2.end(), by_time);
  std::size_t at1 = 0, at2 = 0;
  int names = 0;
  for (std::int64_t now = t0; now < t0 + 300 * step_ns + 1000 * ms; now += 50 * ms) {
    // node1's watcher has sent up to now + 200 ms (its clock, or its drain,
    // ahead), node2's up to now: batches of 100 ms each.
    const std::int64_t sent1 = now + 200 * ms - (now / (100 * ms)) % 2 * 50 * ms, sent2 = now;
    for (; at1 < node1.size() && node1[at1].t <= sent1; ++at1)
      rule.arrival("node1", static_cast<std::uint32_t>(100 + node1[at1].rank), 0xa, node1[at1].seq, node1[at1].kind,
                   node1[at1].t);
    rule.through("node1", sent1);
    for (; at2 < node2.size() && node2[at2].t <= sent2; ++at2)
      rule.arrival("node2", static_cast<std::uint32_t>(100 + node2[at2].rank), 0xa, node2[at2].seq, node2[at2].kind,
                   node2[at2].t);
    rule.through("node2", sent2);
    for (int r = 0; r < 4; ++r)
      rule.progress(r < 2 ? "node1" : "node2", static_cast<std::uint32_t>(100 + r), r, 0,
                    static_cast<std::uint64_t>(step_ns));
    if (auto v = rule.check(now)) {
      ++names;
      EXPECT_EQ(v->rank, 3);
    }
  }
  EXPECT_EQ(names, 1);  // never lost in between (each loss would name it again)
}

TEST(WatchUplink, RequestLinesRoundTripAndOddOnesAreRefused) {
  const std::string what = "rank 3 on node2 = 30 ms late\n% and more";
  const auto r = parse_straggler_request(straggler_request_line(42, what));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->pid, 42u);
  EXPECT_EQ(r->what, what);
  EXPECT_EQ(straggler_request_line(42, what).find('\n'), std::string::npos);  // one line whatever the text
  EXPECT_FALSE(parse_straggler_request("@ltrace-agent straggler pid=0 what=x"));
  EXPECT_FALSE(parse_straggler_request("@ltrace-agent straggler pid=12x what=x"));
  EXPECT_FALSE(parse_straggler_request("@ltrace-agent straggler what=x"));
  EXPECT_FALSE(parse_straggler_request("@ltrace-agent clock pid=12"));
  EXPECT_FALSE(parse_straggler_request("straggler pid=12"));
}

std::string read_until(int fd, const std::string& needle) {
  std::string got;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (got.find(needle) == std::string::npos && std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<std::size_t>(n));
  }
  return got;
}

// Without a clock server: the lines on "stdout" (a pipe), arrivals on this
// host's wall clock; a request on "stdin" comes back from take_requests and
// wakes the caller.
TEST(WatchUplink, SendsItsLinesAndTakesRequests) {
  int out[2], in[2];
  ASSERT_EQ(pipe(out), 0);
  ASSERT_EQ(pipe(in), 0);
  std::atomic<int> woken{0};
  {
    WatchUplink up(
        "", 0, [&] { ++woken; }, out[1], in[0]);
    timespec m{}, r{};
    clock_gettime(CLOCK_MONOTONIC, &m);
    clock_gettime(CLOCK_REALTIME, &r);
    const std::uint64_t mono = static_cast<std::uint64_t>(m.tv_sec) * 1'000'000'000 + m.tv_nsec;
    const std::int64_t real = static_cast<std::int64_t>(r.tv_sec) * 1'000'000'000 + r.tv_nsec;
    up.arrival(4242, 0xfeed, 7, LT_COMM_ALLREDUCE, mono);
    up.progress(4242, 3, 12, 25 * ms);
    up.gone(4243);
    up.flush(mono);
    const std::string got = read_until(out[0], "@ltrace-agent through");
    std::int64_t t = 0;
    bool clock = false, progress = false, gone = false, through = false;
    std::size_t at = 0;
    for (std::size_t nl; (nl = got.find('\n', at)) != std::string::npos; at = nl + 1) {
      const auto msg = parse_agent_line(got.substr(at, nl - at));
      ASSERT_TRUE(msg) << got;
      if (msg->kind == "clock") clock = msg->field("ok") == "0";
      if (msg->kind == "progress")
        progress = msg->field("pid") == "4242" && msg->field("rank") == "3" && msg->field("steps") == "12" &&
                   msg->field("median_ns") == "25000000";
      if (msg->kind == "gone") gone = msg->field("pid") == "4243";
      if (msg->kind == "through") through = std::stoll(msg->field("t")) > 0;
      if (msg->kind == "arrival") {
        EXPECT_EQ(msg->field("pid"), "4242");
        EXPECT_EQ(msg->field("pg"), std::to_string(0xfeed));
        EXPECT_EQ(msg->field("seq"), "7");
        EXPECT_EQ(msg->field("kind"), std::to_string(LT_COMM_ALLREDUCE));
        t = std::stoll(msg->field("t"));
      }
    }
    EXPECT_TRUE(clock && progress && gone && through) << got;
    EXPECT_NEAR(static_cast<double>(t), static_cast<double>(real), 50.0 * ms);  // the wall clock, not the monotonic
    const std::string req = straggler_request_line(4242, "late") + "\nnoise\n";
    ASSERT_EQ(write(in[1], req.data(), req.size()), static_cast<ssize_t>(req.size()));
    std::vector<StragglerRequest> reqs;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (reqs.empty() && std::chrono::steady_clock::now() < end) {
      reqs = up.take_requests();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_EQ(reqs.size(), 1u);
    EXPECT_EQ(reqs[0].pid, 4242u);
    EXPECT_EQ(reqs[0].what, "late");
    EXPECT_GE(woken.load(), 1);
  }  // destroyed with the pipes still open: it ends by itself
  for (int fd : {out[0], out[1], in[0], in[1]}) close(fd);
}

}  // namespace
}  // namespace lt::cluster
