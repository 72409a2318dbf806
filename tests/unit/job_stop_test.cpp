// Ctrl-Z's stop (user/proc/job_stop.h): routed to the registered holder,
// and deferred while a call into a target is in flight.  The stop itself
// is a counter here: SIGSTOP would stop the test.
#include "user/proc/job_stop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <csignal>

using namespace lt::proc;

namespace {

std::atomic<int> g_stops{0};
void count_stop() {
  ++g_stops;
}

struct CountedStops {
  JobStopAction before = set_job_stop_action_for_tests(count_stop);
  CountedStops() { g_stops = 0; }
  ~CountedStops() { set_job_stop_action_for_tests(before); }
};

}  // namespace

TEST(JobStop, AStopWaitsForTheCallsInFlight) {
  CountedStops counted;
  job_stop_now();
  EXPECT_EQ(g_stops, 1);  // none in flight: at once
  {
    JobStopDeferral a;
    {
      JobStopDeferral b;
      job_stop_now();
      job_stop_now();  // asked twice while waiting: one stop
      EXPECT_EQ(g_stops, 1);
    }
    EXPECT_EQ(g_stops, 1);  // one call still in flight
  }
  EXPECT_EQ(g_stops, 2);  // as the last one ended
  { JobStopDeferral c; }
  EXPECT_EQ(g_stops, 2);  // no stop was waiting
}

// A stop that waited for a call in flight is asked of the holder again as
// the call ends: it lets go of what it took meanwhile before the stop.
TEST(JobStop, AStopThatWaitedGoesBackToTheHolder) {
  CountedStops counted;
  const int fd = register_job_stop();
  ASSERT_GE(fd, 0);
  {
    JobStopDeferral call;
    job_stop_now();  // the holder let go, and asks
    EXPECT_EQ(g_stops, 0);
  }
  EXPECT_EQ(g_stops, 0);
  EXPECT_TRUE(job_stop_asked(fd));  // the holder is woken again...
  job_stop_now();                   // ...lets go, and asks: nothing in flight now
  EXPECT_EQ(g_stops, 1);
  unregister_job_stop(fd);
  EXPECT_EQ(g_stops, 1);
}

TEST(JobStop, TerminalStopsGoToTheHolderWhileOneIsRegistered) {
  CountedStops counted;
  // Left ignored when ignored at start (a launcher's choice): not here.
  std::signal(SIGTSTP, SIG_DFL);
  install_job_stop_handler();
  struct sigaction now {};
  ASSERT_EQ(sigaction(SIGTSTP, nullptr, &now), 0);
  ASSERT_NE(now.sa_handler, SIG_DFL);  // else the raise below would stop the test binary
  const int fd = register_job_stop();
  ASSERT_GE(fd, 0);
  EXPECT_EQ(register_job_stop(), -1);  // one holder
  EXPECT_FALSE(job_stop_asked(fd));
  raise(SIGTSTP);
  EXPECT_TRUE(job_stop_asked(fd));
  EXPECT_FALSE(job_stop_asked(fd));  // read empty
  EXPECT_EQ(g_stops, 0);             // the holder stops us once it has let go
  raise(SIGTSTP);
  unregister_job_stop(fd);  // asked as it went: stopped then
  EXPECT_EQ(g_stops, 1);
  raise(SIGTSTP);  // no holder: at once
  EXPECT_EQ(g_stops, 2);
}
