// Which processes the collector follows (user/collector/target_tracker.h),
// over scripted fork / exec / exit sequences as proctrack reports them.
#include <gtest/gtest.h>

#include <optional>

#include "user/collector/target_tracker.h"

using namespace lt;

namespace {

python::Interpreter interp(pid_t pid, int minor = 11) {
  python::Interpreter i;
  i.pid = pid;
  i.minor = minor;
  i.binary = "/usr/bin/python3." + std::to_string(minor);
  return i;
}

python::TsdLookup key(std::uint32_t k, bool by_map = false) {
  python::TsdLookup t;
  t.key = k;
  t.by_map = by_map;
  return t;
}

// An adopted target, as the session adopts one.
void adopt(TargetTracker& t, pid_t pid, std::optional<python::TsdLookup> tsd = std::nullopt) {
  t.met(pid);
  if (tsd) t.set_tsd(pid, *tsd);
  t.adopted(pid, interp(pid));
}

}  // namespace

TEST(CollectorTargetTracker, ForkOfATargetMakesATargetWithItsParentsImage) {
  TargetTracker t;
  adopt(t, 100, key(7));
  const auto* child = t.on_fork(100, 101);
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(child->pid, 101);                       // the child's own pid
  EXPECT_EQ(child->binary, "/usr/bin/python3.11");  // the parent's image
  EXPECT_TRUE(t.alive(101));
  EXPECT_EQ(t.live(101), child);
  EXPECT_EQ(t.ancestors(101), std::vector<pid_t>{100});
  // The inherited key is used, but unproven until re-checked in the child.
  ASSERT_NE(t.tsd(101), nullptr);
  EXPECT_EQ(t.tsd(101)->key, 7u);
  EXPECT_EQ(t.unproven(), std::vector<pid_t>{101});
  // A grandchild: the chain of images it shares.
  ASSERT_NE(t.on_fork(101, 102), nullptr);
  EXPECT_EQ(t.ancestors(102), (std::vector<pid_t>{101, 100}));
  EXPECT_EQ(t.live_pids(), (std::vector<pid_t>{100, 101, 102}));
}

TEST(CollectorTargetTracker, ForkOfAFollowedNonTargetIsReportedOnWithoutProbes) {
  TargetTracker t;
  t.met(200);  // a launcher (shell) we follow for its children
  EXPECT_EQ(t.on_fork(200, 201), nullptr);
  EXPECT_TRUE(t.alive(201));
  EXPECT_EQ(t.live(201), nullptr);
  EXPECT_TRUE(t.unproven().empty());
  EXPECT_EQ(t.processes(), 2u);
}

TEST(CollectorTargetTracker, ForkWithoutAKeyLeavesNothingToProve) {
  TargetTracker t;
  adopt(t, 100);  // no sampling: no thread-state key
  ASSERT_NE(t.on_fork(100, 101), nullptr);
  EXPECT_EQ(t.tsd(101), nullptr);
  EXPECT_TRUE(t.unproven().empty());
}

TEST(CollectorTargetTracker, ExecEndsTheTargetAndHandsItBackOnce) {
  TargetTracker t;
  adopt(t, 100, key(7));
  t.on_fork(100, 101);
  t.on_fork(101, 102);
  t.on_exec(101);
  EXPECT_EQ(t.live(101), nullptr);  // a new program: rediscovered by the session
  EXPECT_EQ(t.tsd(101), nullptr);
  EXPECT_TRUE(t.alive(101));                             // still reported on
  EXPECT_TRUE(t.ancestors(101).empty());                 // shares nothing any more
  EXPECT_EQ(t.ancestors(102), std::vector<pid_t>{101});  // its own link stays
  EXPECT_EQ(t.take_execed(), std::vector<pid_t>{101});
  EXPECT_TRUE(t.take_execed().empty());
  // Re-adopted as the new program.
  adopt(t, 101);
  EXPECT_NE(t.live(101), nullptr);
}

TEST(CollectorTargetTracker, ExitAndPolledExits) {
  TargetTracker t;
  adopt(t, 100, key(7));
  t.on_fork(100, 101);
  t.on_fork(100, 102);
  t.on_exit(101);
  EXPECT_FALSE(t.alive(101));
  EXPECT_NE(t.live(101), nullptr);  // its records still need its interpreter
  EXPECT_EQ(t.unproven(), std::vector<pid_t>{102});
  EXPECT_EQ(t.live_alive_pids(), (std::vector<pid_t>{100, 102}));
  // 102's exit record was lost: found by polling, once.
  auto exists = [](pid_t p) { return p == 100; };
  EXPECT_EQ(t.reap(exists), std::vector<pid_t>{102});
  EXPECT_TRUE(t.reap(exists).empty());
  EXPECT_TRUE(t.any_alive());
  EXPECT_EQ(t.reap([](pid_t) { return false; }), std::vector<pid_t>{100});
  EXPECT_FALSE(t.any_alive());
  EXPECT_EQ(t.processes(), 3u);  // every process reported on stays counted
}

TEST(CollectorTargetTracker, RefusedAdoptionLeavesNoTrace) {
  TargetTracker t;
  t.met(300);
  t.forget(300);
  EXPECT_FALSE(t.alive(300));
  EXPECT_EQ(t.processes(), 0u);
  EXPECT_FALSE(t.any_alive());
}

TEST(CollectorTargetTracker, UnprovenKeyGetsItsTriesThenGivesUp) {
  TargetTracker t;
  adopt(t, 100, key(7));
  t.on_fork(100, 101);
  for (int i = 1; i < TargetTracker::kTsdTries; ++i) ASSERT_TRUE(t.retry_unproven(101, 0)) << i;
  EXPECT_FALSE(t.retry_unproven(101, 0));
  EXPECT_TRUE(t.unproven().empty());
  // Proven at once instead:
  t.on_fork(100, 102);
  t.proven(102);
  EXPECT_TRUE(t.unproven().empty());
  EXPECT_FALSE(t.retry_unproven(102, 0));
  // Awaited by the clock (adopted at its exec): any number of tries before
  // its time, none after.
  t.await_tsd(103, 5'000);
  for (int i = 0; i < 10 * TargetTracker::kTsdTries; ++i) ASSERT_TRUE(t.retry_unproven(103, 4'999)) << i;
  EXPECT_FALSE(t.retry_unproven(103, 5'000));
  EXPECT_TRUE(t.unproven().empty());
  // ...but while its interpreter is not initialised yet, for as long as it
  // takes; a forked child's tries are spent all the same.
  t.await_tsd(104, 5'000);
  EXPECT_TRUE(t.retry_unproven(104, 60'000, /*not_yet=*/true));
  EXPECT_FALSE(t.retry_unproven(104, 60'000));
  t.on_fork(100, 105);
  for (int i = 1; i < TargetTracker::kTsdTries; ++i) ASSERT_TRUE(t.retry_unproven(105, 0, true)) << i;
  EXPECT_FALSE(t.retry_unproven(105, 0, true));
}

TEST(CollectorTargetTracker, ThreadStateMapTargetsAreLiveAliveAndByMap) {
  TargetTracker t;
  adopt(t, 100, key(0, true));
  adopt(t, 200, key(5, false));
  adopt(t, 300, key(0, true));
  t.on_fork(100, 101);  // inherits by_map
  t.on_exit(300);
  EXPECT_EQ(t.tstate_map_targets(), (std::vector<pid_t>{100, 101}));
  t.drop_tsd(101);
  EXPECT_EQ(t.tstate_map_targets(), std::vector<pid_t>{100});
}

TEST(CollectorTargetTracker, AncestorsStopAtEight) {
  TargetTracker t;
  adopt(t, 1000);
  for (pid_t p = 1000; p < 1012; ++p) ASSERT_NE(t.on_fork(p, p + 1), nullptr);
  const auto chain = t.ancestors(1012);
  ASSERT_EQ(chain.size(), 8u);
  EXPECT_EQ(chain.front(), 1011);
  EXPECT_EQ(chain.back(), 1004);
}
