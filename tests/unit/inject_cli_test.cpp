// The injector as a command for tests/integration/test_inject.py: with
// LT_INJECT_PID and LT_INJECT_LIB set (optional: LT_INJECT_TIMEOUT_MS;
// LT_INJECT_MEMFD=1 hands the library over as a memfd, as the GPU tracer does;
// LT_INJECT_DIE_AT_STEP=N SIGKILLs this process at the injection's N-th step,
// for tests/integration/test_inject_faults.py),
//   build/unit-tests --gtest_filter=InjectCli.FromEnvironment
// injects once and prints one line:
//   INJECT_RESULT ok handle=0x... tid=N ms=T detail=...
//   INJECT_RESULT error code=N message=...
// Without them the test is skipped.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "user/core/errors.h"
#include "user/inject/inject_library.h"
#include "user/inject/remote_call.h"

namespace {
int die_at_step = 0;
void die_here(int step) {
  if (step == die_at_step) raise(SIGKILL);
}
}  // namespace

TEST(InjectCli, FromEnvironment) {
  const char* pid = std::getenv("LT_INJECT_PID");
  const char* lib = std::getenv("LT_INJECT_LIB");
  if (!pid || !lib) GTEST_SKIP() << "LT_INJECT_PID / LT_INJECT_LIB not set";
  lt::inject::InjectOptions opts;
  if (const char* t = std::getenv("LT_INJECT_TIMEOUT_MS")) opts.timeout = std::chrono::milliseconds(std::atol(t));
  if (const char* d = std::getenv("LT_INJECT_DIE_AT_STEP")) {
    die_at_step = std::atoi(d);
    lt::inject::RemoteThread::set_step_hook(die_here);
  }
  if (const char* m = std::getenv("LT_INJECT_MEMFD"); m && *m == '1') opts.handoff = lt::inject::Handoff::memfd_or_path;
  auto t0 = std::chrono::steady_clock::now();
  try {
    auto r = lt::inject::inject_library(static_cast<pid_t>(std::atol(pid)), lib, opts);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("INJECT_RESULT ok handle=0x%llx tid=%d ms=%.3f detail=%s\n", static_cast<unsigned long long>(r.handle),
                static_cast<int>(r.tid), ms, r.detail.c_str());
  } catch (const lt::Error& e) {
    std::printf("INJECT_RESULT error code=%d message=%s\n", static_cast<int>(e.code()), e.what());
  }
  std::fflush(stdout);
}
